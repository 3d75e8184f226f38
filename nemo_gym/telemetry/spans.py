"""The spans `nemo_gym.telemetry.tracing` makes once tracing is on; imported only then (it loads OpenTelemetry's API).

A rollout makes about ten spans in each server process it passes through, and at that rate the SDK's span
objects and their OTLP encoding cost more CPU than serving the rollout (docs/observability.md,
"Overhead"). So the spans here are Gym's own `RecordedSpan`s: OpenTelemetry API spans (the current span,
`traceparent` propagation and any instrumented library below see an ordinary span) that keep their
fields in slots and, once ended, go to a sink: `otlp_export.BatchingSpanSink` in a server, `MemorySpans`
in a test. A server's SERVER span comes from `ServerSpans`, our middleware rather than OpenTelemetry's
ASGI instrumentation, which alone took over a third of tracing's CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from types import TracebackType
from typing import Any

from opentelemetry import baggage, context, trace
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym.http.in_process import IN_PROCESS_EXTENSION
from nemo_gym.http.sessions import SESSION_ID_KEY
from nemo_gym.telemetry import trace_headers
from nemo_gym.telemetry.tracing import (
    ROLLOUT_ID_ATTRIBUTE,
    SERVER_NAME_ATTRIBUTE,
    SERVER_TYPE_ATTRIBUTE,
    SESSION_ID_ATTRIBUTE,
)
from nemo_gym.text.redaction import without_url_passwords

LOG = logging.getLogger(__name__)
# Copied from the span a span runs under in this process (across processes the rollout id is W3C baggage).
INHERITED = (SERVER_NAME_ATTRIBUTE, SERVER_TYPE_ATTRIBUTE, ROLLOUT_ID_ATTRIBUTE)
UNSET_STATUS = (StatusCode.UNSET.value, "")
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
NOT_SAMPLED = TraceFlags(TraceFlags.DEFAULT)


def inherited_attributes(attributes: Mapping[str, Any] | None, parent: trace.Span) -> dict[str, Any]:
    """`attributes` without None values, plus the inherited ones of `parent` (the span it runs under)."""
    found = {key: value for key, value in (attributes or {}).items() if value is not None}
    inherited = getattr(parent, "attributes", None)
    if inherited:
        for name in INHERITED:
            if name in inherited and name not in found:
                found[name] = inherited[name]
    return found


class RecordedSpan(trace.Span):
    """A sampled span: its fields, readable as the SDK's finished spans' are (`name`, `kind`, `context`,
    `parent`, `attributes`, `events`, `links`, `status`), handed to the sink when it ends."""

    def __init__(
        self,
        name: str,
        kind: SpanKind,
        span_context: SpanContext,
        parent: SpanContext | None,
        attributes: dict[str, Any],
        links: Sequence[Link],
        sink: Callable[[RecordedSpan], None],
    ) -> None:
        self.name, self.kind, self.context, self.parent = name, kind, span_context, parent
        self.attributes, self.links, self._sink = attributes, links, sink
        self.events: list[tuple[str, int, dict[str, Any]]] = []
        self.status: tuple[int, str] = UNSET_STATUS
        self.start_time = time.time_ns()
        self.end_time: int | None = None

    def get_span_context(self) -> SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: Any) -> None:
        if value is not None:
            self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        self.events.append((name, timestamp or time.time_ns(), dict(attributes or {})))

    def update_name(self, name: str) -> None:
        self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if isinstance(status, Status):
            status, description = status.status_code, status.description
        self.status = (status.value, description or "")

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        details = {
            "exception.type": type(exception).__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": escaped,
        }
        self.add_event("exception", {**details, **(attributes or {})}, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is None:
            self.end_time = end_time or time.time_ns()
            self._sink(self)


class Sampler:
    """`OTEL_TRACES_SAMPLER` (and its `_ARG`) as the SDK reads them: `parentbased_always_on` unless set;
    a ratio keeps a trace when the low 64 bits of its id fall under it."""

    def __init__(self, name: str = "parentbased_always_on", argument: str | None = None) -> None:
        self.parent_based = name.startswith("parentbased_")
        root = name.removeprefix("parentbased_")
        ratios = {"always_on": 1.0, "always_off": 0.0}
        if root in ratios:
            ratio = ratios[root]
        elif root == "traceidratio":
            ratio = min(max(float(argument or 1.0), 0.0), 1.0)
        else:
            raise ValueError(f"OTEL_TRACES_SAMPLER={name!r} is not one of the standard samplers")
        self._bound = round(ratio * (1 << 64))

    @classmethod
    def from_environment(cls) -> Sampler:
        """The sampler the variables name; one the SDK would not know (or a ratio that is no number) is
        warned about and the default used, as the SDK does."""
        try:
            return cls(
                os.environ.get("OTEL_TRACES_SAMPLER") or "parentbased_always_on",
                os.environ.get("OTEL_TRACES_SAMPLER_ARG"),
            )
        except ValueError as error:
            LOG.warning("Tracing: %s; sampling every trace (parentbased_always_on)", error)
            return cls()

    def keeps(self, trace_id: int, parent: SpanContext) -> bool:
        if self.parent_based and parent.is_valid:
            return parent.trace_flags.sampled
        return (trace_id & 0xFFFFFFFFFFFFFFFF) < self._bound


class Tracer:
    """Starts spans under the current one (or the given context's), as an OpenTelemetry tracer does."""

    def __init__(self, sink: Callable[[RecordedSpan], None], sampler: Sampler | None = None) -> None:
        self._sink, self._sampler = sink, sampler or Sampler()
        self._random = random.Random()

    def start_span(
        self,
        name: str,
        context: context.Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
    ) -> trace.Span:
        return self.start_under(trace.get_current_span(context), name, kind, attributes, links)

    def start_under(
        self,
        parent_span: trace.Span,
        name: str,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
    ) -> trace.Span:
        """`start_span` for a caller that has the parent span at hand already."""
        parent = parent_span.get_span_context()
        trace_id = parent.trace_id if parent.is_valid else self._random.getrandbits(128) or 1
        span_id = self._random.getrandbits(64) or 1
        if not self._sampler.keeps(trace_id, parent):
            return trace.NonRecordingSpan(SpanContext(trace_id, span_id, False, NOT_SAMPLED))
        state = parent.trace_state if parent.is_valid else None
        span_context = SpanContext(trace_id, span_id, False, SAMPLED, state)
        return RecordedSpan(
            name, kind, span_context, parent if parent.is_valid else None, dict(attributes or {}), links or (),
            self._sink,
        )  # fmt: skip


class MemorySpans:
    """A sink that keeps every finished span in `finished` (tests, and in-process inspection)."""

    def __init__(self) -> None:
        self.finished: list[RecordedSpan] = []

    def __call__(self, span: RecordedSpan) -> None:
        self.finished.append(span)

    def force_flush(self, timeout_millis: int = 0) -> bool:
        return True

    def shutdown(self) -> None:
        pass


class CurrentSpan:
    """A span that is the current one while the block runs and ends when it leaves; an exception leaving
    the block is recorded on it and marks it failed. (A class: a generator-based helper costs more, and
    this runs for every span.)"""

    __slots__ = ("span", "_token")

    def __init__(
        self, tracer: Tracer, name: str, kind: SpanKind, attributes: Mapping[str, Any] | None
    ) -> None:
        parent = trace.get_current_span()
        self.span = tracer.start_under(parent, name, kind, inherited_attributes(attributes, parent))
        self._token: object = None

    def __enter__(self) -> Any:
        self._token = context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(
        self, error_type: type[BaseException] | None, error: BaseException | None, _: TracebackType | None
    ) -> None:
        context.detach(self._token)
        if error is not None:
            mark_failed(self.span, error)
        self.span.end()


class ClientSpan(CurrentSpan):
    """A CLIENT span whose W3C `traceparent` (and the baggage) goes into the outbound headers."""

    __slots__ = ("_headers",)

    def __init__(self, tracer: Tracer, method: str, url: str, headers: MutableMapping[str, str]) -> None:
        attributes = {"http.request.method": method, "url.full": without_url_passwords(url.split("?", 1)[0])}
        super().__init__(tracer, f"HTTP {method}", SpanKind.CLIENT, attributes)
        self._headers = headers

    def __enter__(self) -> Any:
        span = super().__enter__()
        trace_headers.inject(self._headers, span.get_span_context())
        return span


def mark_failed(span: Any, error: BaseException) -> None:
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def record_status(span: Any, status: int) -> None:
    """The answer's status on a span (an error status from 500 on, as the HTTP conventions say)."""
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))


@contextlib.contextmanager
def rollout_span(tracer: Tracer, attributes: Mapping[str, Any]) -> Iterator[Any]:
    """`gym.rollout` as the root of a trace of its own, linked to the current (the job's) span; its rollout
    id travels to every server as W3C baggage."""
    job = trace.get_current_span().get_span_context()
    rollout_id = attributes.get(ROLLOUT_ID_ATTRIBUTE)
    root = context.Context()  # no parent: a trace of its own
    if rollout_id:
        root = baggage.set_baggage(ROLLOUT_ID_ATTRIBUTE, str(rollout_id), root)
    found = {key: value for key, value in attributes.items() if value is not None}
    span = tracer.start_span(
        "gym.rollout", context=root, links=[Link(job)] if job.is_valid else None, attributes=found
    )
    token = context.attach(trace.set_span_in_context(span, root))
    try:
        yield span
    except BaseException as error:
        mark_failed(span, error)
        raise
    finally:
        context.detach(token)
        span.end()


class ServerSpans:
    """A SERVER span per HTTP request, child of the caller's `traceparent` (which, with the baggage, it
    takes up) or, for an in-process call, of the caller's current span; named `<METHOD> <route template>` once the router has matched the route. Installed inside
    the rollout-prefix and session middleware, so it sees the path and the session they settle."""

    def __init__(self, app: ASGIApp, tracer: Tracer, server_name: str, server_type: str) -> None:
        self.app, self.tracer = app, tracer
        self.labels = {SERVER_NAME_ATTRIBUTE: server_name, SERVER_TYPE_ATTRIBUTE: server_type}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if IN_PROCESS_EXTENSION in scope.get("extensions", ()):
            parent = None  # the caller's own context: an in-process call runs in the caller's task
        else:
            parent = trace_headers.extract(scope["headers"])
        method = scope["method"]
        attributes = {"http.request.method": method, "url.path": scope["path"], **self.labels}
        rollout_id = baggage.get_baggage(ROLLOUT_ID_ATTRIBUTE, parent)
        if rollout_id is not None:
            attributes[ROLLOUT_ID_ATTRIBUTE] = str(rollout_id)
        span = self.tracer.start_span(method, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        status = 500  # what the error middleware outside answers for an exception that passes through here

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = context.attach(trace.set_span_in_context(span, parent))
        try:
            await self.app(scope, receive, send_with_status)
        except BaseException as error:
            mark_failed(span, error)
            raise
        finally:
            context.detach(token)
            self._finish(span, scope, method, status)

    @staticmethod
    def _finish(span: Any, scope: Scope, method: str, status: int) -> None:
        template = getattr(scope.get("route"), "path", None)
        if template:
            span.update_name(f"{method} {template}")
            span.set_attribute("http.route", template)
        session_id = (scope.get("session") or {}).get(SESSION_ID_KEY)
        if session_id:
            span.set_attribute(SESSION_ID_ATTRIBUTE, session_id)
        record_status(span, status)
        span.end()
