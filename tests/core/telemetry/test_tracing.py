"""OpenTelemetry tracing (`telemetry: {enabled: true}`): one trace per rollout across every server.

In this process, with a sink that keeps the spans in memory: the HTTP client's CLIENT span and the
`traceparent` it sends, and the co-hosted in-process path. End to end: `gym eval run` (example_single_tool_call +
simple_agent + openai_model in front of the scripted upstream) exporting to a local OTLP/HTTP receiver
(tests/otlp_receiver.py), with each server in its own process and all co-hosted. Tracing off loads no
OpenTelemetry module and sends no `traceparent`; a dead collector does not fail a rollout.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from fastapi import Request
from opentelemetry import propagate
from opentelemetry.trace import SpanKind

from nemo_gym.config_types import ConfigError
from nemo_gym.http.client import request
from nemo_gym.http.in_process import call_in_process, host_in_process
from nemo_gym.sandbox import SandboxLimits, resolve_isolation, run_sandboxed
from nemo_gym.server_utils import finalize_app, new_app
from nemo_gym.telemetry import tracing
from nemo_gym.telemetry.spans import MemorySpans
from tests.helpers import REPO_ROOT, StartedServer, one_line_error, run_server
from tests.shared_fixtures import closed_port
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

BIN = Path(sys.executable).parent
ENVIRONMENT = "example_single_tool_call"


@pytest.fixture
def memory_spans() -> Iterator[MemorySpans]:
    """Tracing on in this process, every finished span kept in memory; off again afterwards."""
    sink = MemorySpans()
    tracing.install_sink(sink)
    try:
        yield sink
    finally:
        tracing.stop()


def traceparent_ids(header: str) -> tuple[str, str]:
    """(trace id, parent span id) of a W3C `traceparent` header."""
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00" and int(flags, 16) & 1, "sampled"
    return trace_id, span_id


async def test_the_http_client_sends_the_traceparent_of_its_client_span(
    memory_spans, scripted_upstream: ScriptedUpstream
):
    model = fresh_model("tracing-client")
    response = await request(
        "POST", scripted_upstream.base_url + "/responses", json={"model": model, "input": "hi"}
    )
    assert response.status == 200
    (span,) = memory_spans.finished
    assert span.name == "HTTP POST" and span.kind is SpanKind.CLIENT
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["url.full"] == scripted_upstream.base_url + "/responses"
    sent = scripted_upstream.requests(model)[0]["headers"]
    assert traceparent_ids(sent["traceparent"]) == (
        format(span.context.trace_id, "032x"),
        format(span.context.span_id, "016x"),
    )


async def test_an_in_process_call_continues_the_callers_trace(memory_spans):
    app = new_app()

    @app.post("/verify")
    async def verify(request: Request) -> dict[str, Any]:
        with tracing.span("gym.grading"):
            return {"reward": 1.0, "traceparent": request.headers.get("traceparent")}

    app = finalize_app(app, "TracedServer___traced")
    tracing.instrument_app(app, "traced_resources", "resources_servers")
    host_in_process("traced_resources", app, "127.0.0.1", 9)
    with tracing.rollout_span({tracing.ROLLOUT_ID_ATTRIBUTE: "7-0", tracing.TASK_INDEX_ATTRIBUTE: 7}):
        response = await call_in_process("traced_resources", "POST", "/verify", json={})
    answer = await response.json()
    assert response.status == 200 and answer["reward"] == 1.0

    spans = {span.name: span for span in memory_spans.finished}
    assert set(spans) == {"gym.rollout", "POST /verify", "gym.grading"}  # no CLIENT span in-process
    chain = ["gym.grading", "POST /verify", "gym.rollout"]
    for child, parent in itertools.pairwise(chain):
        assert spans[child].parent.span_id == spans[parent].context.span_id, f"{child} under {parent}"
    assert spans["gym.rollout"].parent is None
    assert answer["traceparent"] is None  # the callee shares the caller's context; nothing is serialised
    assert spans["POST /verify"].kind is SpanKind.SERVER
    assert len({span.context.trace_id for span in spans.values()}) == 1
    for name in ("POST /verify", "gym.grading"):
        assert spans[name].attributes[tracing.SERVER_NAME_ATTRIBUTE] == "traced_resources"
        assert spans[name].attributes[tracing.SERVER_TYPE_ATTRIBUTE] == "resources_servers"
    assert {span.attributes[tracing.ROLLOUT_ID_ATTRIBUTE] for span in spans.values()} == {"7-0"}


async def test_a_sandboxed_program_is_a_span_of_its_caller(memory_spans):
    with tracing.span("gym.grading") as verify:
        result = await run_sandboxed(
            "print(6 * 7)", limits=SandboxLimits(isolation=resolve_isolation("auto"))
        )
    assert result.stdout.strip() == "42"
    spans = {span.name: span for span in memory_spans.finished}
    assert spans["gym.sandbox.exec"].parent.span_id == verify.get_span_context().span_id


def test_the_config_becomes_nemo_gym_otel_variables():
    assert tracing.telemetry_env({}) == {}
    assert tracing.telemetry_env({"telemetry": {"enabled": False, "otlp_endpoint": "http://x"}}) == {}
    env = tracing.telemetry_env(
        {"telemetry": {"enabled": True, "otlp_endpoint": "http://c:4318", "otlp_headers": {"a": "1", "b": "2"},
                       "service_name_per_server": False, "memory_profiling": {"enabled": False}}}
    )  # fmt: skip
    assert env == {
        "NEMO_GYM_OTEL_ENABLED": "true",
        "NEMO_GYM_OTEL_OTLP_ENDPOINT": "http://c:4318",
        "NEMO_GYM_OTEL_OTLP_HEADERS": "a=1,b=2",
        "NEMO_GYM_OTEL_SERVICE_NAME_PER_SERVER": "false",
    }
    assert tracing.telemetry_env({"observability_enabled": True}) == {"NEMO_GYM_OTEL_ENABLED": "true"}
    with pytest.raises(ConfigError, match="telemetry.otlp_protocol: 'grpc' is not supported"):
        tracing.telemetry_env({"telemetry": {"enabled": True, "otlp_protocol": "grpc"}})
    with pytest.raises(ConfigError, match="telemetry.otlp_endpoint: '127.0.0.1:4318' is not an http"):
        tracing.telemetry_env({"telemetry": {"enabled": True, "otlp_endpoint": "127.0.0.1:4318"}})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            ["+telemetry.enabled=true", "+telemetry.otlp_protocol=grpc"],
            "'grpc' is not supported; use 'http/protobuf'",
        ),
        (["+telemetry=[1]"], "telemetry: must be a mapping"),
    ],
    ids=["grpc", "not-a-mapping"],
)
def test_a_telemetry_block_gym_cannot_honour_stops_the_start(settings, message, tmp_path):
    (tmp_path / "env.yaml").write_text("{}\n")
    result = subprocess.run(
        [str(BIN / "gym"), "env", "validate", "--resources-server", ENVIRONMENT, "--model-type", "openai_model",
         "--model-url", "http://127.0.0.1:9/v1", "--model", "m", "--model-api-key", "sk-x", *settings],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1 and message in one_line_error(result)


OFF_PROBE = textwrap.dedent(
    """
    import asyncio, sys
    from nemo_gym.telemetry import tracing
    from nemo_gym.http.client import request
    from nemo_gym.http.in_process import call_in_process, host_in_process
    from nemo_gym.server_utils import finalize_app, new_app

    async def main():
        assert not tracing.start("probe")
        app = finalize_app(new_app(), "Probe___probe")
        tracing.instrument_app(app, "probe", "resources_servers")
        host_in_process("probe", app, "127.0.0.1", 9)
        assert (await call_in_process("probe", "GET", "/")).status == 200
        answer = await request("POST", sys.argv[1], json={"model": sys.argv[2], "input": "hi"})
        assert answer.status == 200
        heavy = ("opentelemetry.sdk", "opentelemetry.exporter", "nemo_gym.telemetry.otlp_export", "nemo_gym.telemetry.spans")
        print(sorted(name for name in sys.modules if name.startswith(heavy)))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    "env",
    [{}, {"NEMO_GYM_OTEL_ENABLED": "true", "OTEL_SDK_DISABLED": "true"}],
    ids=["not-configured", "sdk-disabled"],
)
def test_tracing_off_loads_no_sdk_and_sends_no_traceparent(env, scripted_upstream: ScriptedUpstream):
    model = fresh_model("tracing-off")
    clean = {
        key: value for key, value in os.environ.items() if not key.startswith(("NEMO_GYM_OTEL_", "OTEL_"))
    }
    probe = subprocess.run(
        [sys.executable, "-c", OFF_PROBE, scripted_upstream.base_url + "/responses", model],
        env={**clean, **env}, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[]"
    (sent,) = scripted_upstream.requests(model)
    assert not {name.lower() for name in sent["headers"]} & {"traceparent", "baggage"}


# ---- end to end ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def otlp_receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    server_file = Path(__file__).resolve().parents[2] / "otlp_receiver.py"
    with run_server([str(server_file)], tmp_path_factory.mktemp("otlp_receiver")) as server:
        yield server


def received_spans(receiver: StartedServer) -> list[dict[str, Any]]:
    answer = requests.get(receiver.url + "/_spans", timeout=10)
    answer.raise_for_status()
    return answer.json()


def eval_run(workdir: Path, upstream: ScriptedUpstream, model: str, *extra: str, env: dict | None = None):
    """One rollout of the environment's first example row through `gym eval run`; its exit code is 0. No
    pre-flight check: its probe and example rollout would take the scripted turns and add traces."""
    upstream.script(
        model,
        [
            {"output": [function_call("get_weather", {"city": "sf"})]},
            {"output": [assistant_message("Sunny.")]},
        ],
    )
    result = subprocess.run(
        [str(BIN / "gym"), "eval", "run", "--resources-server", ENVIRONMENT, "--dataset", "example",
         "--limit", "1", "--model-type", "openai_model", "--model-url", upstream.base_url, "--model", model,
         "--model-api-key", "sk-tracing", "-o", "out/r.jsonl", "--no-health-check", *extra],
        cwd=workdir, capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (rollout,) = [json.loads(line) for line in (workdir / "out/r.jsonl").read_text().splitlines()]
    assert isinstance(rollout["reward"], float)
    return rollout


def ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The span's parents, nearest first, up to its trace's root."""
    chain = []
    while span["parent_span_id"] is not None:
        span = by_id[span["parent_span_id"]]
        chain.append(span)
    return chain


def server_span(chain: list[dict[str, Any]], server_type: str) -> dict[str, Any]:
    (found,) = [
        span for span in chain
        if span["kind"] == "server" and span["attributes"].get(tracing.SERVER_TYPE_ATTRIBUTE) == server_type
    ]  # fmt: skip
    return found


PLACEMENTS = {
    "process_per_server": [],
    "colocated": ["+colocate=true"],
    "colocated_2_workers": ["+colocate=true", "+colocate_num_workers=2"],  # forked after tracing started
}


@pytest.mark.parametrize("placement", list(PLACEMENTS.values()), ids=list(PLACEMENTS))
def test_one_rollout_is_one_trace_through_every_server(placement, tmp_path, otlp_receiver, scripted_upstream):
    requests.post(otlp_receiver.url + "/_reset", timeout=10).raise_for_status()
    model = fresh_model("tracing-e2e")
    telemetry = ["+telemetry.enabled=true", f"+telemetry.otlp_endpoint={otlp_receiver.url}"]
    result = eval_run(tmp_path, scripted_upstream, model, *telemetry, *placement)
    spans = received_spans(otlp_receiver)

    (rollout,) = [span for span in spans if span["name"] == "gym.rollout"]
    (job,) = [span for span in spans if span["name"] == "gym.job"]
    assert rollout["parent_span_id"] is None and rollout["links"] == [job["span_id"]]
    assert rollout["attributes"][tracing.TASK_INDEX_ATTRIBUTE] == 0
    assert rollout["attributes"][tracing.ROLLOUT_INDEX_ATTRIBUTE] == 0
    assert rollout["attributes"][tracing.AGENT_NAME_ATTRIBUTE] == f"{ENVIRONMENT}_simple_agent"
    rollout_id = rollout["attributes"][tracing.ROLLOUT_ID_ATTRIBUTE]

    trace = [span for span in spans if span["trace_id"] == rollout["trace_id"]]
    by_id = {span["span_id"]: span for span in trace}
    # A single tree: every span but the root has its parent in the trace, and all lead to the rollout.
    assert all(ancestors(span, by_id)[-1:] in ([rollout], []) for span in trace)
    assert [span for span in trace if span["parent_span_id"] is None] == [rollout]
    assert {span["attributes"].get(tracing.ROLLOUT_ID_ATTRIBUTE) for span in trace} == {rollout_id}

    # collector -> agent -> model server -> upstream
    (upstream_call,) = [
        span for span in trace if span["kind"] == "client" and span["attributes"]["url.full"].startswith(scripted_upstream.url)
        and span["attributes"].get(tracing.SERVER_TYPE_ATTRIBUTE) == "responses_api_models"
    ][:1]  # fmt: skip
    chain = ancestors(upstream_call, by_id)
    model_span = server_span(chain, "responses_api_models")
    agent_span = server_span(chain, "responses_api_agents")
    assert agent_span["name"] == "POST /run" and chain[-1] is rollout
    collector_call = by_id[agent_span["parent_span_id"]]
    assert collector_call["kind"] == "client" and collector_call["service"] == rollout["service"]
    # agent -> resources server verify
    (verify,) = [span for span in trace if span["name"] == "POST /verify"]
    # The reward is on the server span: verification has no span of its own.
    assert verify["attributes"][tracing.REWARD_ATTRIBUTE] == result["reward"]
    assert server_span(ancestors(verify, by_id), "responses_api_agents") == agent_span
    assert not [span for span in trace if span["name"] == "gym.verify"]
    # the tool call reached the resources server in the same trace, in the rollout's one session there
    assert any(span["name"] == "POST /get_weather" for span in trace)
    resources = [
        span for span in trace if span["attributes"].get(tracing.SERVER_TYPE_ATTRIBUTE) == "resources_servers"
    ]
    sessions = {
        span["attributes"][tracing.SESSION_ID_ATTRIBUTE] for span in resources if span["kind"] == "server"
    }
    assert len(sessions) == 1, sessions

    servers = {
        span["attributes"].get(tracing.SERVER_NAME_ATTRIBUTE) for span in trace if span["kind"] == "server"
    }
    assert len(servers) == 3, (
        servers
    )  # agent, model server, resources server (+ the collector: four processes)
    if not placement:
        assert len({span["service"] for span in trace}) == 4
        assert {model_span["service"], agent_span["service"]} <= {f"nemo-gym.{name}" for name in servers}
    sent = scripted_upstream.requests(model)
    assert {traceparent_ids(entry["headers"]["traceparent"])[0] for entry in sent} == {rollout["trace_id"]}


def test_without_telemetry_nothing_is_exported_or_propagated(tmp_path, otlp_receiver, scripted_upstream):
    requests.post(otlp_receiver.url + "/_reset", timeout=10).raise_for_status()
    model = fresh_model("tracing-none")
    # The standard variable alone names a collector but does not turn tracing on.
    eval_run(tmp_path, scripted_upstream, model, env={"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.url})
    assert received_spans(otlp_receiver) == []
    assert all("traceparent" not in entry["headers"] for entry in scripted_upstream.requests(model))


def test_a_dead_collector_does_not_fail_the_rollout(tmp_path, scripted_upstream):
    model = fresh_model("tracing-dead-collector")
    rollout = eval_run(
        tmp_path, scripted_upstream, model,
        "+telemetry.enabled=true", f"+telemetry.otlp_endpoint=http://127.0.0.1:{closed_port()}",
    )  # fmt: skip
    assert rollout["reward"] in (0.0, 1.0)
    assert all("traceparent" in entry["headers"] for entry in scripted_upstream.requests(model))


def test_the_standard_exporter_variables_set_the_headers_and_gzip(otlp_receiver, monkeypatch):
    """A flush sends what has ended; stopping sends the rest (one export each), with the variables' headers."""
    requests.post(otlp_receiver.url + "/_reset", timeout=10).raise_for_status()
    monkeypatch.setenv("NEMO_GYM_OTEL_ENABLED", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", otlp_receiver.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=gym%20team,x-other=1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    assert tracing.start("exporter-probe")
    try:
        with tracing.span("gym.grading", {"nemo.gym.reward": 1.0}):
            pass
        tracing.flush()
        with tracing.span("gym.judge"):
            pass
    finally:
        tracing.stop()
    first, second = received_spans(otlp_receiver)
    assert (first["name"], second["name"]) == ("gym.grading", "gym.judge")
    assert first["service"] == "nemo-gym.exporter-probe" and first["attributes"] == {"nemo.gym.reward": 1.0}
    exports = requests.get(otlp_receiver.url + "/_requests", timeout=10).json()
    assert len(exports) == 2
    for headers in exports:
        assert headers["x-tenant"] == "gym team" and headers["x-other"] == "1"
        assert headers["content-encoding"] == "gzip" and headers["content-type"] == "application/x-protobuf"


@pytest.mark.parametrize(
    ("sampler", "kept"),
    [("always_off", False), ("traceidratio", False), ("parentbased_always_off", False), ("always_on", True)],
)
def test_a_root_span_the_sampler_drops_is_not_recorded_and_says_so_downstream(sampler, kept, monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", sampler)
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0")
    sink = MemorySpans()
    tracing.install_sink(sink)
    headers: dict[str, str] = {}
    try:
        with tracing.span("gym.job"):
            propagate.inject(headers)
    finally:
        tracing.stop()
    assert [span.name for span in sink.finished] == (["gym.job"] if kept else [])
    assert headers["traceparent"].endswith("-01" if kept else "-00")
