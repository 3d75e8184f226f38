"""bench/tracing_share.py sorts a profile's samples into tracing's work and the request's own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
_spec = importlib.util.spec_from_file_location("tracing_share", BENCH / "tracing_share.py")
tracing_share = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tracing_share)

SERVE = "Server.run (uvicorn/server.py:86)"
SPAN_MIDDLEWARE = "ServerSpans.__call__ (nemo_gym/telemetry/spans.py:316)"
APP_WORK = "BaseModel.model_validate (pydantic/main.py:792)"


def test_the_request_work_below_the_span_middleware_is_not_tracing():
    assert tracing_share.classify([SERVE, SPAN_MIDDLEWARE, APP_WORK]) == "other"
    sending = "ServerSpans.__call__.<locals>.send_with_status (nemo_gym/telemetry/spans.py:325)"
    assert (
        tracing_share.classify([SERVE, SPAN_MIDDLEWARE, sending, "RequestResponseCycle.send (x.py:1)"])
        == "other"
    )


def test_span_work_is_tracing_wherever_it_runs():
    assert tracing_share.classify([SERVE, SPAN_MIDDLEWARE]) == "spans"  # the middleware's own time
    starting = "Tracer.start_span (nemo_gym/telemetry/spans.py:190)"
    assert (
        tracing_share.classify(
            [SERVE, SPAN_MIDDLEWARE, starting, "ABCMeta.__instancecheck__ (<frozen abc>:119)"]
        )
        == "spans"
    )
    injecting = "inject (/srv/checkout/nemo_gym/telemetry/trace_headers.py:51)"
    assert tracing_share.classify([SERVE, SPAN_MIDDLEWARE, APP_WORK, injecting]) == "spans"
    assert tracing_share.classify([SERVE, "get_current_span (opentelemetry/trace/__init__.py:35)"]) == "spans"


def test_the_export_thread_counts_apart_and_waiting_not_at_all():
    exporting = [
        "Thread.run (threading.py:982)",
        "BatchingSpanSink._drain_forever (nemo_gym/telemetry/otlp_export.py:251)",
    ]
    assert (
        tracing_share.classify([*exporting, "encode_span (nemo_gym/telemetry/otlp_export.py:120)"])
        == "export"
    )
    assert tracing_share.classify([*exporting, "Event.wait (threading.py:629)"]) == "waiting"
    assert tracing_share.classify(["Runner.run (asyncio/runners.py:118)"]) == "waiting"


def test_shares_are_percentages_of_the_working_samples(tmp_path: Path):
    (tmp_path / "1.txt").write_text(
        f"{SERVE};{SPAN_MIDDLEWARE};{APP_WORK} 90\n{SERVE};{SPAN_MIDDLEWARE} 10\nRunner.run (asyncio/runners.py:118) 500\n"
    )
    assert tracing_share.shares([tmp_path / "1.txt"]) == {
        "spans": 10.0,
        "export": 0.0,
        "other": 90.0,
        "samples": 100,
    }
