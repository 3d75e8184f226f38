"""OpenTelemetry tracing of a deployment: one trace per rollout, across every server it touches.

Off unless the config says `telemetry: {enabled: true}` or `observability_enabled: true` (NeMo Gym 0.7's
switches). The launcher turns the `telemetry:` block into `NEMO_GYM_OTEL_<KEY>` variables (a variable the
user already set wins), so every server process, whatever starts it, decides from its environment alone;
each then runs its own tracer provider exporting over OTLP/HTTP. `OTEL_SDK_DISABLED=true` forces it off;
the standard `OTEL_EXPORTER_OTLP_*` and `OTEL_SERVICE_NAME` variables win over the config.

When off, OpenTelemetry is never imported and each traced spot costs one `is None` check: the helpers
below return a shared no-op context manager that yields None. When on, they hand over to
`nemo_gym.telemetry.spans`, which makes the spans.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import urllib.parse
from collections.abc import Iterator, Mapping, MutableMapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from nemo_gym.config.errors import ConfigError

if TYPE_CHECKING:
    from fastapi import FastAPI

ENV_PREFIX = "NEMO_GYM_OTEL_"
DEFAULT_SERVICE_NAME = "nemo-gym"
DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"
SUPPORTED_PROTOCOLS = ("http/protobuf", "http")
# How long one export may take, retries included: a dead collector must never hold a server's shutdown.
EXPORT_TIMEOUT_S = 5.0
# Attribute names of NeMo Gym 0.7.
SERVER_NAME_ATTRIBUTE = "nemo.gym.server.name"
SERVER_TYPE_ATTRIBUTE = "nemo.gym.server.type"
ROLLOUT_ID_ATTRIBUTE = "nemo.gym.rollout.id"
SESSION_ID_ATTRIBUTE = "nemo.gym.session.id"
TASK_INDEX_ATTRIBUTE = "nemo.gym.task.index"
ROLLOUT_INDEX_ATTRIBUTE = "nemo.gym.rollout.index"
AGENT_NAME_ATTRIBUTE = "nemo.gym.agent.name"
REWARD_ATTRIBUTE = "nemo.gym.reward"

_NO_SPAN: contextlib.nullcontext[None] = contextlib.nullcontext()
_tracer: Any = None  # a tracing_spans.Tracer while tracing is on in this process
_sink: Any = None  # where its finished spans go
_spans: ModuleType | None = None  # nemo_gym.telemetry.spans while tracing is on


def is_on() -> bool:
    return _tracer is not None


def _truthy(value: object) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def telemetry_env(cfg: Mapping[str, Any]) -> dict[str, str]:
    """The `NEMO_GYM_OTEL_*` variables for a config (empty when tracing is off in it).

    Every scalar key of the `telemetry:` block becomes `NEMO_GYM_OTEL_<KEY>`; a header map becomes
    `name=value,...` (the `OTEL_EXPORTER_OTLP_HEADERS` format). Raises `ConfigError` for a block that is not
    a mapping or asks for a protocol this client cannot speak.
    """
    block = cfg.get("telemetry") or {}
    if not isinstance(block, Mapping):
        raise ConfigError("telemetry: must be a mapping such as {enabled: true}")
    enabled = _truthy(block.get("enabled", False)) or _truthy(cfg.get("observability_enabled", False))
    if not enabled:
        return {}
    protocol = str(block.get("otlp_protocol") or SUPPORTED_PROTOCOLS[0])
    if protocol not in SUPPORTED_PROTOCOLS:
        raise ConfigError(
            f"telemetry.otlp_protocol: {protocol!r} is not supported; use 'http/protobuf' (OTLP over HTTP)"
        )
    endpoint = str(block.get("otlp_endpoint") or "")
    if endpoint and urllib.parse.urlsplit(endpoint).scheme not in ("http", "https"):
        raise ConfigError(
            f"telemetry.otlp_endpoint: {endpoint!r} is not an http(s) URL; give the collector's OTLP/HTTP "
            "address, e.g. http://127.0.0.1:4318"
        )
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise ConfigError(
            "telemetry is enabled but the OpenTelemetry SDK is not installed: pip install 'nemo-gym[telemetry]'"
        )
    env = {f"{ENV_PREFIX}ENABLED": "true"}
    for key, value in block.items():
        if key == "enabled" or value is None:
            continue
        if isinstance(value, Mapping):
            if key != "otlp_headers":
                continue  # nested settings (memory_profiling) are not read here
            value = ",".join(f"{name}={header}" for name, header in value.items())
        env[f"{ENV_PREFIX}{str(key).upper()}"] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


def export_to_environment(cfg: Mapping[str, Any]) -> None:
    """Make the config's telemetry settings visible to this process and every child it starts; a variable
    already set (by the user) is kept."""
    for name, value in telemetry_env(cfg).items():
        os.environ.setdefault(name, value)


def _setting(key: str, default: str | None = None) -> str | None:
    return os.environ.get(f"{ENV_PREFIX}{key}", default)


def wanted() -> bool:
    """Whether this process's environment asks for tracing."""
    if _truthy(os.environ.get("OTEL_SDK_DISABLED", "")):
        return False
    return _truthy(_setting("ENABLED", "")) and _truthy(_setting("TRACES_ENABLED", "true"))


def _service_name(process_label: str) -> str:
    if "OTEL_SERVICE_NAME" in os.environ:
        return os.environ["OTEL_SERVICE_NAME"]
    base = _setting("SERVICE_NAME", DEFAULT_SERVICE_NAME) or DEFAULT_SERVICE_NAME
    return f"{base}.{process_label}" if _truthy(_setting("SERVICE_NAME_PER_SERVER", "true")) else base


def _traces_endpoint() -> str:
    """Where spans go: the standard variables first, then the config's `otlp_endpoint` (a base URL gets
    `/v1/traces`, as `OTEL_EXPORTER_OTLP_ENDPOINT` does)."""
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _setting("OTLP_ENDPOINT")
    if not base:
        return DEFAULT_ENDPOINT
    base = base.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def _exporter_setting(key: str) -> str | None:
    """`OTEL_EXPORTER_OTLP_TRACES_<KEY>`, else `OTEL_EXPORTER_OTLP_<KEY>`."""
    names = (f"OTEL_EXPORTER_OTLP_TRACES_{key}", f"OTEL_EXPORTER_OTLP_{key}")
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def start(process_label: str) -> bool:
    """Set up this process's span export if its environment asks for tracing (once; later calls return at
    once). `process_label` names the process in `service.name` (an instance, `collector`, ...)."""
    if _tracer is not None or not wanted():
        return _tracer is not None
    from opentelemetry.sdk.resources import Resource

    from nemo_gym.telemetry import otlp_export

    attributes = {"service.name": _service_name(process_label)}
    run_id = _setting("RUN_ID")
    if run_id:
        attributes["nemo.gym.run.id"] = run_id
    resource = Resource.create(attributes)  # adds OTEL_RESOURCE_ATTRIBUTES and the SDK's own, as usual
    headers = _exporter_setting("HEADERS") or _setting("OTLP_HEADERS") or ""
    timeout = _exporter_setting("TIMEOUT")  # seconds, as the Python exporter reads it
    exporter = otlp_export.OtlpHttpExporter(
        _traces_endpoint(),
        otlp_export.parse_headers(headers),
        float(timeout) if timeout else EXPORT_TIMEOUT_S,
        gzip_body=_exporter_setting("COMPRESSION") == "gzip",
    )
    resource_bytes = otlp_export.encode_resource(resource.attributes)
    install_sink(otlp_export.BatchingSpanSink(exporter, resource_bytes, otlp_export.encode_scope("nemo_gym")))
    return True


def install_sink(sink: Any) -> None:
    """Trace in this process, every finished span handed to `sink` (`otlp_export.BatchingSpanSink` from
    `start`; a test's `tracing_spans.MemorySpans`). The sink also answers `force_flush` and `shutdown`."""
    global _tracer, _sink, _spans
    from nemo_gym.telemetry import spans as tracing_spans

    _sink, _spans = sink, tracing_spans
    _tracer = tracing_spans.Tracer(sink, tracing_spans.Sampler.from_environment())


def stop() -> None:
    """Flush what is buffered and stop tracing in this process (a test's sink; a process that exits has
    its sink shut down at exit)."""
    global _tracer, _sink, _spans
    sink, _tracer, _sink, _spans = _sink, None, None, None
    if sink is not None:
        sink.shutdown()


def flush() -> None:
    """Export what is buffered now (a server stopping, a collection done), waiting at most one export."""
    if _sink is not None:
        _sink.force_flush(timeout_millis=int(EXPORT_TIMEOUT_S * 1000))


def span(name: str, attributes: Mapping[str, Any] | None = None) -> contextlib.AbstractContextManager[Any]:
    """An internal span around a step (`gym.judge`, `gym.sandbox.exec`, ...); yields the span, or None
    when tracing is off."""
    if _spans is None:
        return _NO_SPAN
    return _spans.CurrentSpan(_tracer, name, _spans.SpanKind.INTERNAL, attributes)


def set_on_current_span(name: str, value: Any) -> None:
    """An attribute on the span current here (a request's SERVER span, ...): a fact that needs no span of
    its own. Nothing when tracing is off."""
    if _spans is not None:
        _spans.trace.get_current_span().set_attribute(name, value)


def client_span(
    method: str, url: str, headers: MutableMapping[str, str]
) -> contextlib.AbstractContextManager[Any]:
    """A CLIENT span `HTTP <METHOD>` around one outbound call (retries included), whose W3C `traceparent`
    (and baggage) is written into `headers`; yields the span, or None when tracing is off."""
    if _spans is None:
        return _NO_SPAN
    return _spans.ClientSpan(_tracer, method.upper(), url, headers)


def record_status(current: Any, status: int) -> None:
    """The answer's status on a client span (an error status from 500 on, as the HTTP conventions say)."""
    _spans.record_status(current, status)


@contextlib.contextmanager
def rollout_span(attributes: Mapping[str, Any]) -> Iterator[Any]:
    """`gym.rollout`: the root of one rollout's own trace, linked to the job's span (one trace per rollout
    keeps a long collection's traces small). Its rollout id travels to every server as W3C baggage."""
    if _spans is None:
        yield None
        return
    with _spans.rollout_span(_tracer, attributes) as current:
        yield current


def instrument_app(app: FastAPI, server_name: str, server_type: str) -> None:
    """A SERVER span per request of `app` (`tracing_spans.ServerSpans`, which also takes up the caller's
    `traceparent`), named for the server; and the provider flushed when the app stops. Call after the
    app's own middleware: the span sits inside it, where the route and the session are known."""
    if _spans is None:
        return
    from starlette.middleware import Middleware

    app.user_middleware.append(
        Middleware(_spans.ServerSpans, tracer=_tracer, server_name=server_name, server_type=server_type)
    )
    app.router.on_shutdown.append(flush)
