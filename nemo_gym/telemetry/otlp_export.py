"""Finished spans to an OTLP/HTTP collector: batched on a background thread, encoded straight to protobuf
bytes.

The encoder writes the wire format of `ExportTraceServiceRequest` itself (opentelemetry-proto's
`trace.proto`) instead of building message objects: a rollout makes about ten spans per server process,
and the SDK's encoder spent more CPU on them than the rollout's own serving did (docs/observability.md,
"Overhead"). The test receiver decodes what this writes with the official protobuf classes.
"""

from __future__ import annotations

import atexit
import collections
import gzip
import http.client
import logging
import os
import struct
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nemo_gym.telemetry.spans import RecordedSpan

LOG = logging.getLogger(__name__)
# As the SDK's batch processor (and its OTEL_BSP_* variables): a batch leaves when this many spans are
# waiting or SCHEDULE_DELAY_S after the previous one; beyond MAX_QUEUE spans waiting, new ones are dropped.
MAX_BATCH = 512
MAX_QUEUE = 2048
SCHEDULE_DELAY_S = 5.0


_ONE_BYTE = [bytes((value,)) for value in range(0x80)]
# Encoded attributes (and span names) recur: the same server, route and method on every request, the same
# rollout id on its ten spans. Kept up to this many; then forgotten all at once and built again.
MAX_REMEMBERED = 8192
_remembered: dict[tuple[Any, ...], bytes] = {}


def _varint(value: int) -> bytes:
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, sub-message)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode("utf-8", "replace"))


def _any_value(value: Any) -> bytes:
    """An `AnyValue` message; a value of another type is sent as its text."""
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + struct.pack("<d", value)
    if isinstance(value, str):
        return _text(1, value)
    if isinstance(value, (list, tuple)):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    return _text(1, str(value))


def _remember(key: tuple[Any, ...], encoded: bytes) -> bytes:
    if len(_remembered) >= MAX_REMEMBERED:
        _remembered.clear()
    _remembered[key] = encoded
    return encoded


def encode_attributes(number: int, attributes: Mapping[str, Any]) -> bytes:
    """Repeated `KeyValue` field `number`."""
    out = []
    for key, value in attributes.items():
        if isinstance(value, (list, tuple)):  # not hashable, and rare
            out.append(_field(number, _text(1, key) + _field(2, _any_value(value))))
            continue
        memo = (number, key, value.__class__, value)  # the class keeps True apart from 1
        encoded = _remembered.get(memo)
        if encoded is None:
            encoded = _remember(memo, _field(number, _text(1, key) + _field(2, _any_value(value))))
        out.append(encoded)
    return b"".join(out)


def _name(value: str) -> bytes:
    memo = ("name", value)
    return _remembered.get(memo) or _remember(memo, _text(5, value))


def _fixed64(number: int, value: int) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<Q", value)


def encode_span(span: RecordedSpan) -> bytes:
    """One `Span` message (without its field tag)."""
    context, parent = span.context, span.parent
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),
    ]
    if parent is not None:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))
    parts += [
        _name(span.name),
        b"\x30" + _varint(span.kind.value + 1),  # OTLP counts SpanKind from UNSPECIFIED = 0
        _fixed64(7, span.start_time),
        _fixed64(8, span.end_time or span.start_time),
        encode_attributes(9, span.attributes),
    ]
    for name, timestamp, attributes in span.events:
        parts.append(_field(11, _fixed64(1, timestamp) + _text(2, name) + encode_attributes(3, attributes)))
    for link in span.links:
        linked = link.context
        parts.append(
            _field(
                13,
                b"\x0a\x10"
                + linked.trace_id.to_bytes(16, "big")
                + b"\x12\x08"
                + linked.span_id.to_bytes(8, "big"),
            )
        )
    code, message = span.status
    if code:
        parts.append(_field(15, (_text(2, message) if message else b"") + b"\x18" + _varint(code)))
    parts.append(b"\x85\x01" + struct.pack("<I", int(context.trace_flags)))
    return b"".join(parts)


def encode_request(resource: bytes, scope: bytes, spans: Iterable[RecordedSpan]) -> bytes:
    """An `ExportTraceServiceRequest` of one resource and one instrumentation scope, both pre-encoded."""
    scope_spans = _field(1, scope) + b"".join(_field(2, encode_span(span)) for span in spans)
    return _field(1, _field(1, resource) + _field(2, scope_spans))


def encode_resource(attributes: Mapping[str, Any]) -> bytes:
    return encode_attributes(1, attributes)


def encode_scope(name: str) -> bytes:
    return _text(1, name)


class OtlpHttpExporter:
    """Posts encoded batches to one OTLP/HTTP traces endpoint, each attempt bounded by `timeout_s`;
    a batch the collector does not take is dropped (logged once), never retried into a backlog."""

    def __init__(self, endpoint: str, headers: Mapping[str, str], timeout_s: float, gzip_body: bool) -> None:
        url = urllib.parse.urlsplit(endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"OTLP endpoint {endpoint!r} is not an http(s) URL")
        self._url, self.timeout_s, self._gzip = url, timeout_s, gzip_body
        self._headers = {"Content-Type": "application/x-protobuf", **headers}
        if gzip_body:
            self._headers["Content-Encoding"] = "gzip"
        self._connection: http.client.HTTPConnection | None = None
        self._warned = False

    def _connect(self) -> http.client.HTTPConnection:
        url = self._url
        kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        return kind(url.hostname, url.port, timeout=self.timeout_s)

    def post(self, body: bytes) -> bool:
        if self._gzip:
            body = gzip.compress(body, compresslevel=1)
        path = self._url.path or "/"
        while True:
            # A kept-alive connection the collector has since closed gets one fresh connection; a fresh
            # connection that fails is the end of this batch.
            reused = self._connection is not None
            if self._connection is None:
                self._connection = self._connect()
            try:
                self._connection.request("POST", path, body, self._headers)
                response = self._connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException) as error:
                self._connection.close()
                self._connection = None
                if not reused:
                    self._warn(f"{type(error).__name__}: {error}")
                    return False
                continue
            if 200 <= response.status < 300:
                return True
            self._warn(f"the collector answered HTTP {response.status}")
            return False

    def _warn(self, cause: str) -> None:
        if not self._warned:
            self._warned = True
            LOG.warning("Tracing: spans could not be exported to %s (%s); later failures are not logged",
                        self._url.geturl(), cause)  # fmt: skip

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def forget_connection(self) -> None:
        """In a forked child: the parent's connection is the parent's to use and close."""
        self._connection = None


class BatchingSpanSink:
    """Where finished spans go: a bounded queue a background thread drains into an exporter, MAX_BATCH
    spans per request. Survives a fork (a forked worker gets its own empty queue and thread)."""

    def __init__(self, exporter: OtlpHttpExporter, resource: bytes, scope: bytes) -> None:
        self._exporter, self._resource, self._scope = exporter, resource, scope
        self._queue: collections.deque[RecordedSpan] = collections.deque()
        self._start_thread()
        os.register_at_fork(after_in_child=self._start_thread)
        atexit.register(self.shutdown)

    def _start_thread(self) -> None:
        self._queue.clear()
        self.dropped = self._dropped_reported = 0
        self._exporter.forget_connection()
        self._wake, self._idle, self._stopping = threading.Event(), threading.Event(), False
        self._thread = threading.Thread(target=self._drain_forever, name="gym-span-export", daemon=True)
        self._thread.start()

    def __call__(self, span: RecordedSpan) -> None:
        queue = self._queue
        if len(queue) >= MAX_QUEUE:
            self.dropped += 1
            return
        queue.append(span)
        if len(queue) == MAX_BATCH:
            self._wake.set()

    def _drain_forever(self) -> None:
        while True:
            self._wake.wait(SCHEDULE_DELAY_S)
            self._wake.clear()
            stopping = self._stopping  # read before the drain, so a drain always follows the request to stop
            self._drain()
            self._report_drops()
            self._idle.set()
            if stopping:
                return

    def _report_drops(self) -> None:
        """One warning per drain that follows new drops (at most one every SCHEDULE_DELAY_S, then)."""
        if self.dropped > self._dropped_reported:
            LOG.warning("Tracing: %d span(s) dropped so far: more than %d were waiting for export (is the "
                        "collector slow?)", self.dropped, MAX_QUEUE)  # fmt: skip
            self._dropped_reported = self.dropped

    def _drain(self) -> None:
        queue = self._queue
        while queue:
            batch = [queue.popleft() for _ in range(min(MAX_BATCH, len(queue)))]
            self._exporter.post(encode_request(self._resource, self._scope, batch))

    def force_flush(self, timeout_millis: int = 5000) -> bool:
        """Export what is waiting now; wait at most `timeout_millis` for it."""
        self._idle.clear()
        self._wake.set()
        return self._idle.wait(timeout_millis / 1000)

    def shutdown(self) -> None:
        """Export what is waiting (bounded by the exporter's timeout) and stop the thread."""
        if self._stopping:
            return
        self._stopping = True
        self._wake.set()
        self._thread.join(self._exporter.timeout_s + 1)
        self._exporter.close()


def parse_headers(raw: str) -> dict[str, str]:
    """`name=value,...` (the `OTEL_EXPORTER_OTLP_HEADERS` format, values URL-encoded)."""
    pairs = (item.partition("=") for item in raw.split(","))
    return {
        name.strip(): urllib.parse.unquote(value.strip()) for name, separator, value in pairs if separator
    }
