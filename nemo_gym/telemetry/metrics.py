"""Prometheus figures of a Gym server, served as `GET /metrics` (on unless `telemetry.metrics_enabled` is
false).

A server process may fork workers and may co-host several server instances. The figures live in
prometheus_client's multiprocess mode, in a directory made for this process tree (each worker writes its
own files there; `/metrics` reads them all), and every series carries the `server` (instance name) and
`server_type` labels: a scrape answers with the series of the instance it reached, summed over workers.
Work done while a request is handled is labelled with that request's instance; anything else with the
process's first instance.

Counts are added up in memory and written to the shared files at most `FLUSH_DELAY_S` after the first
of them (and before this worker answers a scrape): a request then costs a few dictionary updates instead of
three locked writes to memory-mapped files, and a scrape may miss another worker's last fraction of a
second. Gauges that are set (not added to) are written at once.

When metrics are off, or outside a server process, prometheus_client is never imported and every
`record_*` function returns after one check.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_gym.config.errors import ConfigError

if TYPE_CHECKING:
    from fastapi import FastAPI
    from omegaconf import DictConfig
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("nemo_gym.metrics")

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
DIRECTORY_PREFIX = "gym-metrics-"  # + the pid of the process that made it
METRICS_PATH = "/metrics"
UNMATCHED_ROUTE = "<unmatched>"
# Up to ten minutes: a whole `/run` (model turns, tools, verification) lands in one bucket.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
BUCKET_LABELS = (*(repr(float(bound)) for bound in LATENCY_BUCKETS_S), "+Inf")  # `le` as Prometheus writes it
SERVER_LABELS = ("server", "server_type")
REQUEST_LABELS = (*SERVER_LABELS, "route", "method", "status")
LATENCY_METRIC = "gym_http_request_duration_seconds"
# The latency histogram as written: a counter of requests per bucket (not cumulative) and one of their total
# time, so that many requests are written at once; `instance_families` shows them as the histogram.
LATENCY_HITS = "gym_http_request_duration_hits"
LATENCY_TIME = "gym_http_request_duration_time"
FLUSH_DELAY_S = 0.2


@dataclass(frozen=True)
class ServerIdentity:
    instance: str
    server_type: str


class _Recorder:
    """The metric objects of this process, built once, with every server instance of the process."""

    def __init__(self, directory: str) -> None:
        from prometheus_client import Counter, Gauge

        self.directory = directory
        self.owner = os.getpid()
        # Three counts a request, added up in memory (`add`): the histogram, the request count and the in-flight
        # figure (started minus answered) are worked out from them when the page is made (`instance_families`).
        self.started = Counter("gym_http_requests_started", "Requests that reached the app", SERVER_LABELS)
        self.latency_hits = Counter(
            LATENCY_HITS,
            "Requests answered, by route template, status and latency bucket",
            [*REQUEST_LABELS, "le"],
        )
        self.latency_time = Counter(
            LATENCY_TIME, "Seconds spent answering, by route template and status", REQUEST_LABELS
        )
        self.retries = Counter(
            "gym_http_client_retries",
            "Outbound calls retried, by the failure that caused it",
            [*SERVER_LABELS, "cause"],
        )
        self.breaker_open = Gauge(
            "gym_judge_circuit_breaker_open",
            "1 while the judge model server's circuit breaker is open (in any worker)",
            [*SERVER_LABELS, "judge"],
            multiprocess_mode="livemax",
        )
        self.sandbox_runs = Counter(
            "gym_sandbox_runs", "Sandboxed program runs, by outcome", [*SERVER_LABELS, "outcome"]
        )
        self.cpu_queue_depth = Gauge(
            "gym_cpu_pool_queue_depth",
            "CPU-bound calls waiting for a free pool worker",
            SERVER_LABELS,
            multiprocess_mode="livesum",
        )
        self.cpu_calls = Gauge(
            "gym_cpu_pool_calls_in_flight",
            "CPU-bound calls submitted and not yet finished",
            SERVER_LABELS,
            multiprocess_mode="livesum",
        )
        self.sessions_open = Gauge(
            "gym_sessions_open",
            "Sessions held in memory, by kind",
            [*SERVER_LABELS, "kind"],
            multiprocess_mode="livesum",
        )
        self.session_evictions = Counter(
            "gym_session_evictions", "Sessions evicted to stay within max_sessions", [*SERVER_LABELS, "kind"]
        )
        self.servers: list[ServerIdentity] = []
        self.cpu_calls_outstanding = 0
        self._series: dict[tuple[Any, tuple[str, ...]], Any] = {}
        self._pending: dict[tuple[Any, tuple[str, ...]], float] = {}
        self._flush: asyncio.TimerHandle | None = None
        self._flush_loop: asyncio.AbstractEventLoop | None = None
        os.register_at_fork(after_in_child=self._forget_pending)

    def remove_directory(self) -> None:
        """At shutdown, in the process that made the directory (forked workers leave it to that one)."""
        if os.getpid() == self.owner:
            shutil.rmtree(self.directory, ignore_errors=True)

    def series(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: prometheus_client's own lookup costs more than the update."""
        key = (metric, labels)
        found = self._series.get(key)
        if found is None:
            found = self._series[key] = metric.labels(*labels)
        return found

    def add(self, metric: Any, labels: tuple[str, ...], amount: float) -> None:
        """Add `amount` to a counter (or a live-sum gauge) series: written with the next flush on an event
        loop's thread, at once on any other."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.series(metric, *labels).inc(amount)
            return
        key = (metric, labels)
        pending = self._pending
        pending[key] = pending.get(key, 0.0) + amount
        if self._flush is None or self._flush_loop is not loop:
            self._flush, self._flush_loop = loop.call_later(FLUSH_DELAY_S, self.flush), loop

    def flush(self) -> None:
        """Write the counts added since the last flush to this worker's files."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        pending, self._pending = self._pending, {}
        for (metric, labels), amount in pending.items():
            self.series(metric, *labels).inc(amount)

    def _forget_pending(self) -> None:
        """In a forked worker: the parent's unwritten counts are the parent's to write."""
        self._pending, self._flush = {}, None

    def labels(self) -> tuple[str, str]:
        server = _current_server.get() or self.servers[0]
        return server.instance, server.server_type


_recorder: _Recorder | None = None
_current_server: ContextVar[ServerIdentity | None] = ContextVar("gym_metrics_server", default=None)


def metrics_enabled(global_config_dict: DictConfig | dict[str, Any]) -> bool:
    """`telemetry.metrics_enabled` (NeMo Gym 0.7's key), true when unset."""
    telemetry = global_config_dict.get("telemetry") or {}
    if not hasattr(telemetry, "get"):
        raise ConfigError("telemetry must be a mapping of settings, e.g. telemetry: {metrics_enabled: false}")
    enabled = telemetry.get("metrics_enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"telemetry.metrics_enabled must be true or false, not {enabled!r}")
    return enabled


def install_metrics(app: FastAPI, server: ServerIdentity) -> None:
    """Count the app's requests and add `GET /metrics` (when `metrics_enabled`). Call after the app's last
    middleware: this one is then the innermost, and sees the route a request matched."""
    from starlette.middleware import Middleware
    from starlette.responses import Response

    recorder = _process_recorder()
    recorder.servers.append(server)

    async def metrics_page() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        recorder.flush()
        return Response(render_instance(recorder.directory, server.instance), media_type=CONTENT_TYPE_LATEST)

    app.add_api_route(METRICS_PATH, metrics_page, methods=["GET"], include_in_schema=False)
    app.user_middleware.append(Middleware(RequestMetricsMiddleware, recorder=recorder, server=server))
    app.router.on_shutdown.append(recorder.remove_directory)


def _process_recorder() -> _Recorder:
    """The process's recorder; the first call makes the directory this process and its forked workers
    write to."""
    global _recorder
    if _recorder is None:
        _remove_directories_of_dead_processes()
        directory = tempfile.mkdtemp(prefix=f"{DIRECTORY_PREFIX}{os.getpid()}-")
        os.environ[MULTIPROCESS_DIR_ENV] = directory
        from prometheus_client import values

        if not getattr(values.ValueClass, "_multiprocess", False):
            logger.warning(
                "prometheus_client was loaded before metrics were set up: /metrics covers one worker"
            )
        _recorder = _Recorder(directory)
    return _recorder


def _remove_directories_of_dead_processes() -> None:
    """A server stopped by a signal removes nothing on its way out (uvicorn ends it with the signal it
    got): the next server to start removes what the dead ones left."""
    for path in Path(tempfile.gettempdir()).glob(f"{DIRECTORY_PREFIX}*"):
        pid = path.name.removeprefix(DIRECTORY_PREFIX).partition("-")[0]
        if pid.isdigit() and not _process_exists(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def render_instance(directory: str, instance: str) -> bytes:
    """The exposition text of one instance's series, summed over every process that wrote to `directory`."""
    from prometheus_client import CollectorRegistry, generate_latest

    class InstanceView:
        def collect(self) -> Iterator[Any]:
            return instance_families(directory, instance)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(InstanceView())
    return generate_latest(registry)


def instance_families(directory: str, instance: str) -> Iterator[Any]:
    """The `gym_` metric families of one instance, with the latency histogram, the request count and the
    in-flight figure worked out from the counters written."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
    from prometheus_client.multiprocess import MultiProcessCollector

    started: dict[tuple[str, str], float] = {}
    hits: dict[tuple[str, ...], list[float]] = {}
    seconds: dict[tuple[str, ...], float] = {}
    for family in MultiProcessCollector(None, directory).collect():
        family.samples = [sample for sample in family.samples if sample.labels.get("server") == instance]
        if not family.name.startswith("gym_") or not family.samples:
            continue
        for sample in family.samples:
            labels = tuple(sample.labels.get(label, "") for label in REQUEST_LABELS)
            if family.name == LATENCY_HITS:
                counts = hits.setdefault(labels, [0.0] * len(BUCKET_LABELS))
                counts[BUCKET_LABELS.index(sample.labels["le"])] += sample.value
            elif family.name == LATENCY_TIME:
                seconds[labels] = seconds.get(labels, 0.0) + sample.value
            elif family.name == "gym_http_requests_started":
                started[labels[:2]] = sample.value
        if family.name not in (LATENCY_HITS, LATENCY_TIME):
            yield family
    requests = CounterMetricFamily(
        "gym_http_requests", "Requests answered, by route template and status", labels=REQUEST_LABELS
    )
    latency = HistogramMetricFamily(
        LATENCY_METRIC,
        "Time from a request reaching the app to its last response byte, by route template and status",
        labels=REQUEST_LABELS,
    )
    for labels, counts in hits.items():
        cumulative = list(accumulate(counts))
        requests.add_metric(list(labels), cumulative[-1])
        latency.add_metric(
            list(labels), list(zip(BUCKET_LABELS, cumulative, strict=True)), seconds.get(labels, 0.0)
        )
    yield requests
    yield latency
    answered = sum(sum(counts) for counts in hits.values())
    in_flight = GaugeMetricFamily(
        "gym_http_requests_in_flight", "Requests being handled (scrapes not counted)", labels=SERVER_LABELS
    )
    for labels, count in started.items():
        in_flight.add_metric(list(labels), max(0.0, count - answered))
    yield in_flight


class RequestMetricsMiddleware:
    """Counts each request as started, then times it by route template (bounded, unlike raw paths) and
    status; the instance it belongs to is current while it is handled."""

    def __init__(self, app: ASGIApp, recorder: _Recorder, server: ServerIdentity) -> None:
        self.app, self.recorder, self.server = app, recorder, server
        self.server_labels = (server.instance, server.server_type)
        self.templates: dict[Any, str] = {}
        self.literal_paths: set[str] | None = None  # filled on the first request, once every route exists

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the error middleware answers for an exception that passes through here

        async def send_with_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        recorder = self.recorder
        token = _current_server.set(self.server)
        # A scrape starts when it ends: the page it makes never counts itself in flight.
        in_flight_counted = scope["path"] != METRICS_PATH
        if in_flight_counted:
            recorder.add(recorder.started, self.server_labels, 1)
        started = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_status)
        finally:
            elapsed = time.perf_counter() - started
            _current_server.reset(token)
            if not in_flight_counted:
                recorder.add(recorder.started, self.server_labels, 1)
            labels = (*self.server_labels, self._route_of(scope), scope["method"], str(status))
            recorder.add(recorder.latency_time, labels, elapsed)
            bucket = BUCKET_LABELS[bisect_left(LATENCY_BUCKETS_S, elapsed)]
            recorder.add(recorder.latency_hits, (*labels, bucket), 1)

    def _route_of(self, scope: Scope) -> str:
        """The path template of the route the router matched: a path some route has literally, else the
        template of the matched endpoint (which the router put on the scope)."""
        if self.literal_paths is None:
            routes = scope["app"].router.routes
            paths = [getattr(route, "path", None) for route in routes]
            self.literal_paths = {path for path in paths if path and "{" not in path}
            for route, path in zip(routes, paths, strict=True):
                self.templates.setdefault(getattr(route, "endpoint", None), path or UNMATCHED_ROUTE)
        path = scope["path"]
        if path in self.literal_paths:
            return path
        return self.templates.get(scope.get("endpoint"), UNMATCHED_ROUTE)


def record_retry(error: BaseException | None, status: int | None = None) -> None:
    """An outbound call is retried after `error`, or after an answer with `status`."""
    if _recorder is None:
        return
    _recorder.add(_recorder.retries, (*_recorder.labels(), retry_cause(error, status)), 1)


def retry_cause(error: BaseException | None, status: int | None) -> str:
    """A bounded name for why a call was retried: `status_503`, `timeout`, `connect_error`, ..."""
    if error is None:
        return f"status_{status}"
    import aiohttp

    if isinstance(error, (TimeoutError, aiohttp.ServerTimeoutError)):
        return "timeout"
    if isinstance(error, aiohttp.ClientConnectorError):
        return "connect_error"
    if isinstance(error, aiohttp.ServerDisconnectedError):
        return "disconnected"
    if isinstance(error, aiohttp.ClientPayloadError):
        return "payload_error"
    if isinstance(error, (aiohttp.ClientOSError, ConnectionError)):
        return "connection_reset"
    return "other"


def record_breaker_state(judge: str, is_open: bool) -> None:
    """The process's breaker for the judge model server `judge` opened or closed."""
    if _recorder is not None:
        for server in _recorder.servers:  # shared by the process's co-hosted instances
            _recorder.series(_recorder.breaker_open, server.instance, server.server_type, judge).set(
                int(is_open)
            )


def record_sandbox_run(outcome: str) -> None:
    """`outcome`: `ok`, `exit_nonzero`, `signal`, the limit that stopped it, or `unavailable`."""
    if _recorder is not None:
        _recorder.add(_recorder.sandbox_runs, (*_recorder.labels(), outcome), 1)


@contextmanager
def cpu_pool_call(workers: int) -> Iterator[None]:
    """Around one call to the process's CPU pool of `workers` workers (shared by co-hosted instances)."""
    recorder = _recorder
    if recorder is None:
        yield
        return
    recorder.cpu_calls_outstanding += 1
    _show_cpu_pool(recorder, workers)
    try:
        yield
    finally:
        recorder.cpu_calls_outstanding -= 1
        _show_cpu_pool(recorder, workers)


def _show_cpu_pool(recorder: _Recorder, workers: int) -> None:
    waiting = max(0, recorder.cpu_calls_outstanding - workers)
    for server in recorder.servers:
        recorder.series(recorder.cpu_calls, server.instance, server.server_type).set(
            recorder.cpu_calls_outstanding
        )
        recorder.series(recorder.cpu_queue_depth, server.instance, server.server_type).set(waiting)


def record_sessions(kind: str, opened: int = 0, closed: int = 0, evicted: int = 0) -> None:
    """Sessions of `kind` opened, closed or evicted (the last two leave memory)."""
    if _recorder is None:
        return
    labels = _recorder.labels()
    _recorder.add(_recorder.sessions_open, (*labels, kind), opened - closed - evicted)
    if evicted:
        _recorder.add(_recorder.session_evictions, (*labels, kind), evicted)
