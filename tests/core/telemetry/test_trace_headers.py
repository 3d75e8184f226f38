"""`nemo_gym.telemetry.trace_headers` reads and writes exactly what OpenTelemetry's own W3C propagators do, for the
forms it handles itself and for every form it leaves to them."""

from collections.abc import Iterator

import pytest
from opentelemetry import baggage, context, propagate, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from nemo_gym.telemetry import trace_headers

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def official(headers: dict[str, str]) -> context.Context:
    return propagate.extract(headers)


def seen(ctx: context.Context | None) -> tuple[SpanContext, dict[str, object]]:
    """What a server takes from a context: the remote parent and the baggage."""
    return trace.get_current_span(ctx).get_span_context(), dict(baggage.get_all(ctx))


@pytest.mark.parametrize(
    "headers",
    [
        {"traceparent": TRACEPARENT, "baggage": "nemo.gym.rollout.id=12-3"},  # what Gym sends
        {"traceparent": TRACEPARENT},
        {"traceparent": TRACEPARENT.replace("-01", "-00")},  # not sampled
        {"traceparent": TRACEPARENT, "tracestate": "vendor=abc,other=1"},
        {"traceparent": TRACEPARENT, "baggage": "nemo.gym.rollout.id=12-3,team=rl"},
        {"traceparent": TRACEPARENT, "baggage": "who=a%20b;prop=1"},
        {"traceparent": TRACEPARENT, "baggage": " spaced = yes "},
        {"traceparent": TRACEPARENT.upper()},
        {"traceparent": "ff" + TRACEPARENT[2:]},
        {"traceparent": "01" + TRACEPARENT[2:] + "-future"},
        {"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01", "baggage": "a=1"},
        {"traceparent": "garbage", "baggage": "a=1"},
        {"baggage": "a=1"},
    ],
)
def test_the_context_read_is_the_one_opentelemetry_reads(headers: dict[str, str]):
    raw = [(b"host", b"127.0.0.1"), *((name.encode(), value.encode()) for name, value in headers.items())]
    assert seen(trace_headers.extract(raw)) == seen(official(headers))


def test_a_request_without_trace_headers_has_no_remote_parent():
    assert trace_headers.extract([(b"host", b"127.0.0.1"), (b"content-type", b"application/json")]) is None


def written_in(ctx: context.Context) -> tuple[dict[str, str], dict[str, str]]:
    """The headers Gym and OpenTelemetry write for a call made in `ctx`."""
    token = context.attach(ctx)
    try:
        ours: dict[str, str] = {}
        theirs: dict[str, str] = {}
        trace_headers.inject(ours)
        propagate.inject(theirs)
    finally:
        context.detach(token)
    return ours, theirs


@pytest.fixture
def current() -> Iterator[None]:
    """Runs the test with a span of its own current, as a CLIENT span would be."""
    span = NonRecordingSpan(
        SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False, TraceFlags(1))
    )
    token = context.attach(trace.set_span_in_context(span))
    yield
    context.detach(token)


@pytest.mark.parametrize(
    "entries",
    [{}, {"nemo.gym.rollout.id": "12-3"}, {"a": "1", "b": "2"}, {"who": "a b"}, {"key": "ä"}],
    ids=["none", "gym", "two", "space", "non-ascii"],
)
def test_the_headers_written_are_the_ones_opentelemetry_writes(current, entries: dict[str, str]):
    ctx = context.get_current()
    for key, value in entries.items():
        ctx = baggage.set_baggage(key, value, ctx)
    ours, theirs = written_in(ctx)
    assert ours == theirs and ours["traceparent"] == TRACEPARENT


def test_a_trace_state_is_written_as_opentelemetry_writes_it():
    state = TraceState([("vendor", "abc")])
    span = NonRecordingSpan(SpanContext(1, 2, False, TraceFlags(1), state))
    ours, theirs = written_in(trace.set_span_in_context(span))
    assert ours == theirs and ours["tracestate"] == "vendor=abc"


def test_another_propagator_configuration_is_left_to_opentelemetry(current):
    """With trace context alone (no baggage propagator), no baggage is written or read."""
    default = propagate.get_global_textmap()
    propagate.set_global_textmap(TraceContextTextMapPropagator())
    token = context.attach(baggage.set_baggage("nemo.gym.rollout.id", "12-3"))
    try:
        headers: dict[str, str] = {}
        trace_headers.inject(headers)
        read = trace_headers.extract([(b"traceparent", TRACEPARENT.encode()), (b"baggage", b"a=1")])
    finally:
        context.detach(token)
        propagate.set_global_textmap(default)
    assert headers == {"traceparent": TRACEPARENT}
    assert baggage.get_all(read) == {} and trace.get_current_span(read).get_span_context().is_valid
