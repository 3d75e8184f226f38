"""W3C `traceparent` and `baggage` headers, written and read without OpenTelemetry's propagators when
they hold what Gym itself sends (imported only while tracing is on).

Every HTTP hop of a traced rollout writes both headers and the next server reads them back (the rollout id
travels as baggage). Through OpenTelemetry's composite propagator that is ~4.5 µs to write and ~8.5 µs to
read per hop, a sizeable share of tracing's cost on a deployment with a process per server
(docs/observability.md, "Overhead"). Here the canonical forms — a version-00 `traceparent`, no
`tracestate`, baggage of one plain `key=value` entry — are handled directly; anything else, and any
propagator configuration but the default W3C pair (`OTEL_PROPAGATORS`), goes through OpenTelemetry's
propagators unchanged.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping, Sequence

from opentelemetry import baggage, context, propagate, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

W3C_FIELDS = frozenset({"traceparent", "tracestate", "baggage"})
_HEADER_NAMES = {name.encode(): name for name in W3C_FIELDS}  # as ASGI spells them, lower case
_TRACEPARENT = re.compile(rb"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
# One baggage entry that percent-encoding leaves as it is: no properties, nothing to decode.
_PLAIN_ENTRY = re.compile(r"[A-Za-z0-9._-]+=[A-Za-z0-9._~:-]*")
MAX_PLAIN_BAGGAGE = 4096  # OpenTelemetry's bound on one entry; a longer header is left to it
_checked: tuple[object, bool] | None = None  # the global propagator last looked at, and the answer


def default_propagation() -> bool:
    """Whether the global propagator is W3C trace context plus baggage (OpenTelemetry's default)."""
    global _checked
    textmap = propagate.get_global_textmap()
    if _checked is None or _checked[0] is not textmap:
        _checked = (textmap, set(textmap.fields) == W3C_FIELDS)
    return _checked[1]


def inject(headers: MutableMapping[str, str], span_context: SpanContext | None = None) -> None:
    """Write the current span's `traceparent` (and the current baggage) into `headers`; `span_context`,
    when the caller has it, is the current span's."""
    if not default_propagation():
        propagate.inject(headers)
        return
    if span_context is None:
        span_context = trace.get_current_span().get_span_context()
    entries = baggage.get_all()
    plain = all(_PLAIN_ENTRY.fullmatch(f"{key}={value}") for key, value in entries.items())
    if span_context.trace_state or not plain or not span_context.is_valid:
        propagate.inject(headers)
        return
    headers["traceparent"] = (
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
    )
    if entries:
        headers["baggage"] = ",".join(f"{key}={value}" for key, value in entries.items())


def extract(raw_headers: Sequence[tuple[bytes, bytes]]) -> context.Context | None:
    """The caller's context from an ASGI request's headers, or None when it sent none."""
    found = {_HEADER_NAMES[name]: value for name, value in raw_headers if name in _HEADER_NAMES}
    if not found:
        return None
    parent = _read_plain(found) if default_propagation() else None
    if parent is None:
        return propagate.extract({name: value.decode("latin-1") for name, value in found.items()})
    return parent


def _read_plain(found: dict[str, bytes]) -> context.Context | None:
    """The context of headers in the forms Gym writes; None for anything else."""
    traceparent = _TRACEPARENT.fullmatch(found.get("traceparent", b""))
    if traceparent is None or "tracestate" in found:
        return None
    trace_id, span_id = int(traceparent[1], 16), int(traceparent[2], 16)
    if not trace_id or not span_id:
        return None
    remote = SpanContext(trace_id, span_id, True, TraceFlags(int(traceparent[3], 16)))
    parent = trace.set_span_in_context(NonRecordingSpan(remote), context.Context())
    if "baggage" in found:
        entry = found["baggage"].decode("latin-1")
        if len(entry) > MAX_PLAIN_BAGGAGE or not _PLAIN_ENTRY.fullmatch(entry):
            return None
        key, _, value = entry.partition("=")
        parent = baggage.set_baggage(key, value, parent)
    return parent
