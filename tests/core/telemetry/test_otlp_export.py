"""The OTLP encoder: what it writes decodes with the official protobuf classes, field for field."""

from __future__ import annotations

import logging
import socket

import pytest
from opentelemetry import baggage, context, trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus
from opentelemetry.trace import Link, SpanKind, StatusCode

from nemo_gym.telemetry import otlp_export
from nemo_gym.telemetry.spans import MemorySpans, Tracer


def plain(value: AnyValue):
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in value.array_value.values]
    return getattr(value, kind)


def decoded(spans, resource: dict) -> ExportTraceServiceRequest:
    body = otlp_export.encode_request(
        otlp_export.encode_resource(resource), otlp_export.encode_scope("nemo_gym"), spans
    )
    return ExportTraceServiceRequest.FromString(body)


ATTRIBUTES = {
    "text": "naïve ☃",
    "flag": True,
    "off": False,
    "count": 200,
    "negative": -3,
    "large": 2**40,
    "ratio": 0.25,
    "list": ["a", "b"],
    "numbers": [1, 2],
    "empty": "",
}


@pytest.mark.parametrize("repeat", [1, 2], ids=["first", "remembered"])
def test_every_field_decodes_with_the_official_classes(repeat):
    sink = MemorySpans()
    tracer = Tracer(sink)
    job = tracer.start_span("gym.job")
    for _ in range(repeat):  # the second pass encodes from what the encoder remembered
        token = context.attach(trace.set_span_in_context(job))
        try:
            child = tracer.start_span(
                "POST /verify",
                kind=SpanKind.SERVER,
                attributes=ATTRIBUTES,
                links=[Link(job.get_span_context())],
            )
        finally:
            context.detach(token)
        child.record_exception(ValueError("bad row"))
        child.set_status(StatusCode.ERROR, "HTTP 500")
        child.end()
    job.end()

    request = decoded(sink.finished, {"service.name": "nemo-gym.probe", "port": 8000})
    (resource_spans,) = request.resource_spans
    assert {pair.key: plain(pair.value) for pair in resource_spans.resource.attributes} == {
        "service.name": "nemo-gym.probe",
        "port": 8000,
    }
    (scope_spans,) = resource_spans.scope_spans
    assert scope_spans.scope.name == "nemo_gym"
    *children, root = scope_spans.spans
    assert len(children) == repeat
    job_context = job.get_span_context()
    assert root.name == "gym.job" and root.kind == ProtoSpan.SPAN_KIND_INTERNAL
    assert root.parent_span_id == b"" and root.status.code == ProtoStatus.STATUS_CODE_UNSET
    for encoded, recorded in zip(children, sink.finished, strict=False):
        assert encoded.trace_id == job_context.trace_id.to_bytes(16, "big")
        assert encoded.span_id == recorded.context.span_id.to_bytes(8, "big")
        assert encoded.parent_span_id == job_context.span_id.to_bytes(8, "big")
        assert encoded.name == "POST /verify" and encoded.kind == ProtoSpan.SPAN_KIND_SERVER
        assert encoded.start_time_unix_nano == recorded.start_time
        assert encoded.end_time_unix_nano == recorded.end_time >= recorded.start_time
        assert {pair.key: plain(pair.value) for pair in encoded.attributes} == ATTRIBUTES
        assert [type(plain(pair.value)) for pair in encoded.attributes][:3] == [str, bool, bool]
        (event,) = encoded.events
        event_attributes = {pair.key: plain(pair.value) for pair in event.attributes}
        assert event.name == "exception" and event_attributes["exception.type"] == "ValueError"
        assert event_attributes["exception.message"] == "bad row"
        assert "ValueError: bad row" in event_attributes["exception.stacktrace"]
        (link,) = encoded.links
        assert link.span_id == job_context.span_id.to_bytes(8, "big")
        assert encoded.status.code == ProtoStatus.STATUS_CODE_ERROR and encoded.status.message == "HTTP 500"
        assert encoded.flags & 0xFF == 1  # sampled


def test_the_baggage_and_trace_state_of_the_parent_are_kept_by_children():
    sink = MemorySpans()
    tracer = Tracer(sink)
    root_context = baggage.set_baggage("nemo.gym.rollout.id", "3-1", context.Context())
    root = tracer.start_span("gym.rollout", context=root_context)
    child = tracer.start_span("HTTP POST", context=trace.set_span_in_context(root, root_context))
    child.end()
    root.end()
    assert child.parent == root.get_span_context()
    assert child.get_span_context().trace_id == root.get_span_context().trace_id
    assert root.parent is None


def test_spans_beyond_the_queue_are_dropped_counted_and_reported(caplog):
    """A collector that takes connections and never answers: while the first export waits out its timeout,
    the queue fills; what does not fit is dropped, counted and reported in one warning."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        exporter = otlp_export.OtlpHttpExporter(
            f"http://127.0.0.1:{silent.getsockname()[1]}/v1/traces", {}, 1.0, False
        )
        sink = otlp_export.BatchingSpanSink(
            exporter, otlp_export.encode_resource({}), otlp_export.encode_scope("t")
        )
        tracer = Tracer(sink)
        extra = 300
        with caplog.at_level(logging.WARNING, logger="nemo_gym.otlp_export"):
            for _ in range(otlp_export.MAX_QUEUE + otlp_export.MAX_BATCH + extra):
                tracer.start_span("gym.grading").end()
            assert sink.force_flush(timeout_millis=60_000)
            sink.shutdown()
    assert sink.dropped >= extra
    reports = [record.getMessage() for record in caplog.records if "dropped so far" in record.getMessage()]
    assert reports and reports[-1].startswith(f"Tracing: {sink.dropped} span(s) dropped so far")
