"""nemo_gym.telemetry.spans, in this process with the spans kept in memory: a span started in another is
its child and takes up its server labels, an error leaving a span marks it failed, a CLIENT span hands
its `traceparent` on, a rollout is a trace of its own, and the sampler decides as the SDK's does. (The
SERVER spans of real servers: tests/core/telemetry/test_tracing.py.)"""

from __future__ import annotations

import pytest
from opentelemetry import baggage, trace
from opentelemetry.trace import INVALID_SPAN_CONTEXT, SpanContext, SpanKind, StatusCode, TraceFlags

from nemo_gym.telemetry.spans import (
    ClientSpan,
    CurrentSpan,
    MemorySpans,
    Sampler,
    Tracer,
    record_status,
    rollout_span,
)
from nemo_gym.telemetry.tracing import (
    ROLLOUT_ID_ATTRIBUTE,
    SERVER_NAME_ATTRIBUTE,
    SERVER_TYPE_ATTRIBUTE,
    TASK_INDEX_ATTRIBUTE,
)

SERVER = {
    SERVER_NAME_ATTRIBUTE: "tally",
    SERVER_TYPE_ATTRIBUTE: "resources_servers",
    ROLLOUT_ID_ATTRIBUTE: "7-0",
}


@pytest.fixture
def sink() -> MemorySpans:
    return MemorySpans()


@pytest.fixture
def tracer(sink: MemorySpans) -> Tracer:
    return Tracer(sink)


def test_a_span_started_in_another_is_its_child_and_takes_up_its_server_labels(sink, tracer) -> None:
    with CurrentSpan(tracer, "POST /verify", SpanKind.SERVER, {**SERVER, "http.route": None}) as outer:
        with CurrentSpan(tracer, "gym.judge", SpanKind.INTERNAL, {SERVER_NAME_ATTRIBUTE: "judge"}) as inner:
            assert trace.get_current_span() is inner
        assert trace.get_current_span() is outer
    assert trace.get_current_span().get_span_context() == INVALID_SPAN_CONTEXT
    assert [span.name for span in sink.finished] == ["gym.judge", "POST /verify"]
    assert outer.parent is None and outer.attributes == SERVER
    assert inner.parent.span_id == outer.context.span_id
    assert inner.context.trace_id == outer.context.trace_id
    assert inner.attributes == {**SERVER, SERVER_NAME_ATTRIBUTE: "judge"}
    assert not inner.is_recording() and inner.end_time >= inner.start_time


def test_an_error_leaving_a_span_is_recorded_on_it_and_marks_it_failed(sink, tracer) -> None:
    with pytest.raises(ValueError, match="no verdict"):
        with CurrentSpan(tracer, "gym.judge", SpanKind.INTERNAL, None) as span:
            raise ValueError("no verdict")
    assert span.status == (StatusCode.ERROR.value, "ValueError: no verdict")
    ((name, _, details),) = span.events
    assert name == "exception"
    assert (details["exception.type"], details["exception.message"]) == ("ValueError", "no verdict")
    assert 'raise ValueError("no verdict")' in details["exception.stacktrace"]
    span.end()
    assert sink.finished == [span], "a span is handed to the sink once"


def test_a_client_span_hands_its_traceparent_on_and_names_the_url_without_secrets(sink, tracer) -> None:
    headers: dict[str, str] = {}
    url = "http://user:secret@127.0.0.1:9/v1/responses?api_key=abc"
    with ClientSpan(tracer, "POST", url, headers) as span:
        pass
    ids = span.get_span_context()
    assert headers["traceparent"] == f"00-{ids.trace_id:032x}-{ids.span_id:016x}-01"
    assert (span.name, span.kind) == ("HTTP POST", SpanKind.CLIENT)
    assert span.attributes == {
        "http.request.method": "POST",
        "url.full": "http://user:****@127.0.0.1:9/v1/responses",
    }


@pytest.mark.parametrize(("status", "failed"), [(200, False), (429, False), (500, True), (503, True)])
def test_an_answers_status_fails_a_span_from_500_on(tracer, status: int, failed: bool) -> None:
    span = tracer.start_span("POST /run", kind=SpanKind.SERVER)
    record_status(span, status)
    assert span.attributes["http.response.status_code"] == status
    assert span.status == (
        (StatusCode.ERROR.value, f"HTTP {status}") if failed else (StatusCode.UNSET.value, "")
    )


def test_a_rollout_is_a_trace_of_its_own_linked_to_the_job_and_carries_its_id_as_baggage(
    sink, tracer
) -> None:
    with CurrentSpan(tracer, "gym.job", SpanKind.INTERNAL, None) as job:
        attributes = {ROLLOUT_ID_ATTRIBUTE: "3-1", TASK_INDEX_ATTRIBUTE: 3, "nemo.gym.agent.name": None}
        with rollout_span(tracer, attributes) as rollout:
            assert baggage.get_baggage(ROLLOUT_ID_ATTRIBUTE) == "3-1"
            with CurrentSpan(tracer, "gym.grading", SpanKind.INTERNAL, None) as grading:
                pass
        assert trace.get_current_span() is job
    assert rollout.parent is None and rollout.context.trace_id != job.context.trace_id
    assert [link.context for link in rollout.links] == [job.context]
    assert rollout.attributes == {ROLLOUT_ID_ATTRIBUTE: "3-1", TASK_INDEX_ATTRIBUTE: 3}
    assert grading.parent.span_id == rollout.context.span_id
    assert grading.attributes == {ROLLOUT_ID_ATTRIBUTE: "3-1"}


def test_a_failed_rollout_is_marked_failed_and_the_error_passes_on(tracer) -> None:
    with pytest.raises(TimeoutError):
        with rollout_span(tracer, {ROLLOUT_ID_ATTRIBUTE: "4-0"}) as rollout:
            raise TimeoutError("deadline")
    assert rollout.status == (StatusCode.ERROR.value, "TimeoutError: deadline")
    assert baggage.get_baggage(ROLLOUT_ID_ATTRIBUTE) is None


def test_a_trace_the_sampler_drops_records_nothing_down_its_tree(sink) -> None:
    tracer = Tracer(sink, Sampler("parentbased_always_off"))
    with CurrentSpan(tracer, "gym.job", SpanKind.INTERNAL, None) as job:
        with CurrentSpan(tracer, "gym.judge", SpanKind.INTERNAL, None) as child:
            pass
    assert not job.is_recording() and not job.get_span_context().trace_flags.sampled
    assert child.get_span_context().trace_id == job.get_span_context().trace_id
    assert sink.finished == []
    caller = trace.NonRecordingSpan(SpanContext(5, 6, True, TraceFlags(TraceFlags.SAMPLED)))
    kept = tracer.start_under(caller, "POST /verify", SpanKind.SERVER)
    assert kept.is_recording() and kept.parent.span_id == 6 and kept.context.trace_id == 5


def test_a_child_follows_its_parents_sampling_decision():
    sampler = Sampler("parentbased_traceidratio", "0")
    sampled_parent = SpanContext(5, 6, True, TraceFlags(TraceFlags.SAMPLED))
    dropped_parent = SpanContext(5, 6, True, TraceFlags(TraceFlags.DEFAULT))
    assert sampler.keeps(5, sampled_parent) and not sampler.keeps(5, dropped_parent)
    half = Sampler("traceidratio", "0.5")
    assert half.keeps((1 << 100) + (1 << 62), INVALID_SPAN_CONTEXT)  # only the low 64 bits count
    assert not half.keeps((1 << 63) + 1, INVALID_SPAN_CONTEXT)
    with pytest.raises(ValueError, match="'sometimes' is not one of the standard samplers"):
        Sampler("sometimes")


def test_an_unknown_sampler_variable_is_warned_about_and_every_trace_kept(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "sometimes")
    sampler = Sampler.from_environment()
    assert sampler.keeps(1, INVALID_SPAN_CONTEXT) and sampler.keeps((1 << 64) - 1, INVALID_SPAN_CONTEXT)
    assert "'sometimes' is not one of the standard samplers" in caplog.text
