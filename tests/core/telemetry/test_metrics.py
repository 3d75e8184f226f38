"""`GET /metrics` of every Gym server, read with Prometheus's own parser, on deployments started by
`gym run`: example_session_state_mgmt + simple_agent + openai_model, the scripted upstream playing the
model. One deployment runs a process per server, the model server with two forked workers; the other
co-hosts all three in one process forked twice."""

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from nemo_gym.http.client import get_response_json, request
from nemo_gym.serving.cpu_pool import WORKERS_ENV
from nemo_gym.testing import message_item, post_json, response_with, run_judged_server, start_refusal
from tests.helpers import (
    REPO_ROOT,
    RunningDeployment,
    gym_command,
    instance_config,
    run_instance,
    run_server,
    running_deployment,
    write_config,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

ENVIRONMENT = "resources_servers/example_session_state_mgmt"
AGENT = "example_session_state_mgmt_simple_agent"
RESOURCES = "example_session_state_mgmt_resources_server"
MODEL = "policy_model"
ROW_1 = orjson.loads((REPO_ROOT / ENVIRONMENT / "data" / "example.jsonl").read_bytes().splitlines()[0])
MODEL_CALLS_PER_ROLLOUT = 4  # two increments, one read, one final answer
ROLLOUTS = 3

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


def deployment_args(upstream: ScriptedUpstream, model: str, *extra: str) -> list[str]:
    return [
        *extra,
        f"+config_paths=[{ENVIRONMENT}/configs/example_session_state_mgmt.yaml,configs/policy_model.yaml]",
        f"+policy_base_url={upstream.base_url}",
        "+policy_api_key=sk-metrics",
        f"+policy_model_name={model}",
    ]


@pytest.fixture(scope="module")
def separate(scripted_upstream: ScriptedUpstream) -> Iterator[tuple[RunningDeployment, str]]:
    """One process per server; the model server forks a second worker."""
    model = fresh_model("metrics")
    args = deployment_args(
        scripted_upstream, model, f"++{MODEL}.responses_api_models.openai_model.num_workers=2"
    )
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model


@pytest.fixture(scope="module")
def cohosted(scripted_upstream: ScriptedUpstream) -> Iterator[tuple[RunningDeployment, str]]:
    model = fresh_model("metrics-colocated")
    args = deployment_args(scripted_upstream, model, "+colocate=true", "+colocate_num_workers=2")
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model


async def scrape(url: str) -> Series:
    """Every sample of the server's `/metrics`, on a connection of its own (so that, with several
    workers, any of them may answer)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        async with session.get(url + "/metrics", headers={"Connection": "close"}) as response:
            assert response.status == 200, await response.text()
            assert response.headers["Content-Type"].startswith("text/plain")
            page = await response.text()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


async def scrape_showing(url: str, name: str, at_least: float, **labels: str) -> Series:
    """A scrape once it shows at least `at_least` of `name`: a worker writes its counts within
    `FLUSH_DELAY_S`, and the scrape may reach another worker (the page after the deadline, else)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        series = await scrape(url)
        if value(series, name, **labels) >= at_least or asyncio.get_running_loop().time() > deadline:
            return series


def value(series: Series, name: str, **labels: str) -> float:
    """The sum of the samples named `name` whose labels include `labels` (0 when there is none)."""
    wanted = set(labels.items())
    return sum(
        found
        for (sample, sample_labels), found in series.items()
        if sample == name and wanted <= sample_labels
    )


def script_rollouts(upstream: ScriptedUpstream, model: str, count: int) -> None:
    turns = [
        {"output": [function_call("increment_counter", {"count": 1})]},
        {"output": [function_call("increment_counter", {"count": 2})]},
        {"output": [function_call("get_counter_value", {})]},
        {"output": [assistant_message("The count is ready.")]},
    ]
    upstream.clear(model)
    upstream.script(model, turns * count)


async def run_rollouts(running: RunningDeployment, count: int) -> None:
    for _ in range(count):
        response = await request("POST", running.url(AGENT) + "/run", json=ROW_1)
        result = await get_response_json(response)
        assert response.status == 200 and result["reward"] == 1.0, result


async def test_counters_and_histograms_move_with_rollouts_on_every_server(separate, scripted_upstream):
    running, model = separate
    before = {name: await scrape(running.url(name)) for name in (AGENT, RESOURCES, MODEL)}
    script_rollouts(scripted_upstream, model, ROLLOUTS)
    await run_rollouts(running, ROLLOUTS)
    expected = {
        AGENT: {"/run": ROLLOUTS},
        RESOURCES: {"/seed_session": ROLLOUTS, "/increment_counter": 2 * ROLLOUTS, "/verify": ROLLOUTS},
        MODEL: {"/v1/responses": MODEL_CALLS_PER_ROLLOUT * ROLLOUTS},
    }
    answered = "gym_http_requests_total"
    after = {
        name: await scrape_showing(
            running.url(name),
            answered,
            value(before[name], answered, method="POST") + sum(routes.values()),
            method="POST",
        )  # fmt: skip
        for name, routes in expected.items()
    }

    def moved(name: str, metric: str, **labels: str) -> float:
        return value(after[name], metric, **labels) - value(before[name], metric, **labels)

    for name, routes in expected.items():
        server_type = running.instances[name]["server_type"]
        for route, count in routes.items():
            labels = {"server": name, "server_type": server_type, "route": route, "method": "POST"}
            assert moved(name, "gym_http_requests_total", status="200", **labels) == count, (name, route)
            assert moved(name, "gym_http_requests_total", **labels) == count, (name, route)
            assert moved(name, "gym_http_request_duration_seconds_count", **labels) == count, (name, route)
            assert moved(name, "gym_http_request_duration_seconds_bucket", le="+Inf", **labels) == count
            assert moved(name, "gym_http_request_duration_seconds_sum", **labels) > 0
        # Nothing was left counted in flight (a scrape does not count itself).
        assert value(after[name], "gym_http_requests_in_flight", server=name) == 0
        assert {dict(labels)["server"] for _, labels in after[name]} == {name}
    # Route templates, not raw paths: no series per session or rollout.
    routes = {dict(labels).get("route") for _, labels in after[RESOURCES]} - {None}
    assert routes <= {"/seed_session", "/increment_counter", "/get_counter_value", "/verify", "/metrics"}


async def test_forked_workers_report_the_whole_server(separate):
    """Requests on many fresh connections reach both model-server workers; every scrape, whichever worker
    answers it, counts all of them."""
    running, model = separate
    url = running.url(MODEL)
    baseline = value(await scrape(url), "gym_http_requests_total", route="/v1/responses")
    calls = 16
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        for _ in range(calls):  # unscripted: the upstream answers "ok"
            body = {"input": "hello", "model": model}
            async with session.post(
                url + "/v1/responses", json=body, headers={"Connection": "close"}
            ) as response:
                assert response.status == 200, await response.text()
    await scrape_showing(url, "gym_http_requests_total", baseline + calls, route="/v1/responses")
    counts = [value(await scrape(url), "gym_http_requests_total", route="/v1/responses") for _ in range(8)]
    assert counts == [baseline + calls] * 8


async def test_an_upstream_503_counts_one_retry_with_its_cause(separate, scripted_upstream):
    running, model = separate
    before = await scrape(running.url(MODEL))
    scripted_upstream.clear(model)
    scripted_upstream.script(
        model, [{"status": 503, "retry_after": 0}, {"output": [assistant_message("hi")]}]
    )
    response = await request(
        "POST", running.url(MODEL) + "/v1/responses", json={"input": "hello", "model": model}
    )
    assert response.status == 200, await response.read()
    retried = value(before, "gym_http_client_retries_total") + 1
    after = await scrape_showing(running.url(MODEL), "gym_http_client_retries_total", retried)
    retries = {"server": MODEL, "cause": "status_503"}
    assert (
        value(after, "gym_http_client_retries_total", **retries)
        - value(before, "gym_http_client_retries_total", **retries)
        == 1
    )
    assert value(after, "gym_http_client_retries_total") - value(before, "gym_http_client_retries_total") == 1


async def test_sessions_held_are_counted_and_released_at_verify(separate, scripted_upstream):
    running, model = separate
    url = running.url(RESOURCES)
    before = value(await scrape(url), "gym_sessions_open", kind="resources")
    seeded = await request("POST", url + "/seed_session", json=ROW_1)
    assert seeded.status == 200, await seeded.read()
    assert value(await scrape(url), "gym_sessions_open", kind="resources") == before + 1
    script_rollouts(scripted_upstream, model, 1)
    await run_rollouts(running, 1)  # its session opens at seed and closes at verify
    assert value(await scrape(url), "gym_sessions_open", kind="resources") == before + 1


async def test_cohosted_servers_keep_their_figures_apart(cohosted, scripted_upstream):
    running, model = cohosted
    assert len({running.instances[name]["pid"] for name in (AGENT, RESOURCES, MODEL)}) == 1
    before = {name: await scrape(running.url(name)) for name in (AGENT, RESOURCES, MODEL)}
    script_rollouts(scripted_upstream, model, ROLLOUTS)
    await run_rollouts(running, ROLLOUTS)
    calls = {AGENT: ROLLOUTS, RESOURCES: 4 * ROLLOUTS, MODEL: MODEL_CALLS_PER_ROLLOUT * ROLLOUTS}
    answered = "gym_http_requests_total"
    after = {
        name: await scrape_showing(
            running.url(name), answered, value(before[name], answered, method="POST") + count, method="POST"
        )
        for name, count in calls.items()
    }
    for name in (AGENT, RESOURCES, MODEL):
        assert {dict(labels)["server"] for _, labels in after[name]} == {name}
    # The in-process calls between co-hosted servers are counted by the server that took them.
    for name, route, count in (
        (AGENT, "/run", ROLLOUTS),
        (RESOURCES, "/verify", ROLLOUTS),
        (MODEL, "/v1/responses", MODEL_CALLS_PER_ROLLOUT * ROLLOUTS),
    ):
        moved = value(after[name], "gym_http_requests_total", route=route) - value(
            before[name], "gym_http_requests_total", route=route
        )
        assert moved == count, (name, route)
    assert value(after[AGENT], "gym_http_requests_total", route="/v1/responses") == 0
    assert value(after[MODEL], "gym_http_requests_total", route="/run") == 0


async def test_gym_env_status_shows_each_servers_figures(separate, scripted_upstream):
    running, model = separate
    script_rollouts(scripted_upstream, model, 1)
    await run_rollouts(running, 1)
    port = running.head_url.rsplit(":", 1)[1]
    table = await asyncio.to_thread(
        subprocess.run, gym_command("env", "status", f"++head_server.port={port}"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[-6:] == ["REQUESTS", "5XX", "P50_S", "P95_S", "IN_FLIGHT", "RETRIES"]
    agent_row = next(row.split() for row in rows if row.startswith(AGENT + " "))
    assert int(agent_row[-6]) >= 1 and agent_row[-5] == "0" and float(agent_row[-4]) > 0
    as_json = await asyncio.to_thread(
        subprocess.run, gym_command("env", "status", "--json", f"++head_server.port={port}"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    listed = {entry["process_name"]: entry for entry in json.loads(as_json.stdout)}
    agent = listed[AGENT]["metrics"]
    runs = value(await scrape(running.url(AGENT)), "gym_http_requests_total", route="/run")
    assert agent["requests"] >= runs >= 1
    assert agent["errors_5xx"] == 0 and agent["in_flight"] == 0
    assert 0 < agent["latency_p50_s"] <= agent["latency_p95_s"]
    assert listed[MODEL]["metrics"]["requests"] >= MODEL_CALLS_PER_ROLLOUT


def resources_alone(**top_level: object) -> dict:
    return {
        RESOURCES: instance_config("resources_servers", "example_session_state_mgmt", domain="other"),
        **top_level,
    }


async def test_metrics_off_has_no_route(tmp_path: Path):
    config = resources_alone(telemetry={"metrics_enabled": False})
    with run_instance(config, RESOURCES, tmp_path) as server:
        response = await request("GET", server.url + "/metrics")
        assert response.status == 404
        alive = await request("GET", server.url + "/")
        assert alive.status == 200


def test_a_metrics_switch_that_is_not_a_boolean_is_refused_naming_the_key(tmp_path: Path):
    lines = start_refusal(resources_alone(telemetry={"metrics_enabled": "sometimes"}), RESOURCES, tmp_path)
    assert len(lines) == 1
    assert "telemetry.metrics_enabled must be true or false" in lines[0] and RESOURCES in lines[0]


ADD_PROGRAM = "a, b = map(int, input().split())\nprint(a + b)"


async def test_sandbox_runs_are_counted_by_outcome(tmp_path: Path):
    config = {"code_gen": instance_config("resources_servers", "code_gen", domain="coding")}
    verify_body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Add two numbers."}]},
        "verifier_metadata": {"unit_tests": {"inputs": ["1 2\n"], "outputs": ["3\n"]}},
        "response": response_with(message_item(f"```python\n{ADD_PROGRAM}\n```")),
    }
    with run_instance(config, "code_gen", tmp_path) as server:
        before = await scrape(server.url)
        status, result = await post_json(server.url + "/verify", verify_body)
        assert status == 200 and result["reward"] == 1.0, result
        after = await scrape(server.url)
    assert value(after, "gym_sandbox_runs_total", outcome="ok") - value(before, "gym_sandbox_runs_total") == 1
    assert value(after, "gym_sandbox_runs_total") - value(before, "gym_sandbox_runs_total") == 1


async def test_an_open_judge_circuit_shows_on_the_environments_page(scripted_upstream, tmp_path: Path):
    settings = {
        "domain": "knowledge",
        "judge_max_attempts": 1,
        "judge_circuit_breaker_failures": 2,
        "judge_circuit_breaker_cooldown_s": 600,  # stays open for the whole test
    }
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "What heats surface waters?"}]},
        "expected_answer": "the sun",
        "response": response_with(message_item("The Sun.")),
    }
    with run_judged_server(scripted_upstream, tmp_path, "equivalence_llm_judge", **settings) as env:
        env.judge.script({"status": 400, "repeat": 2})
        breaker = {"server": "equivalence_llm_judge", "judge": "judge_model"}
        for _ in range(2):
            assert value(await scrape(env.url), "gym_judge_circuit_breaker_open", **breaker) == 0
            status, result = await post_json(env.url + "/verify", row)
            assert status == 200 and result["judge_failure"]["kind"] == "upstream_error", result
        assert value(await scrape(env.url), "gym_judge_circuit_breaker_open", **breaker) == 1
        status, result = await post_json(env.url + "/verify", row)
        assert result["judge_failure"]["kind"] == "circuit_open"


GRADING_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "grading_resources_server.py"


async def test_cpu_pool_calls_waiting_for_the_one_worker_show_as_queue_depth(tmp_path: Path):
    """Three gradings that each hold the pool's only worker until their 0.3 s deadline: while they run,
    the page shows calls queued behind it; once they are done, none."""
    config = {"grading": instance_config("resources_servers", "grading", domain="other")}
    config_file = tmp_path / "grading.json"
    config_file.write_bytes(orjson.dumps(config))
    env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": "grading", WORKERS_ENV: "1"}
    row = {"responses_create_params": {"input": "1 squared?"}, "response": response_with(message_item("1"))}
    with run_server([str(GRADING_FIXTURE)], tmp_path, env) as server:
        gradings = [
            asyncio.ensure_future(post_json(server.url + "/verify", {**row, "runaway": True}))
            for _ in range(3)
        ]
        deepest = 0.0
        while not all(grading.done() for grading in gradings):
            deepest = max(deepest, value(await scrape(server.url), "gym_cpu_pool_queue_depth"))
        assert [(await grading)[0] for grading in gradings] == [200] * 3
        assert deepest >= 1
        done = await scrape(server.url)
    assert value(done, "gym_cpu_pool_queue_depth", server="grading") == 0
    assert value(done, "gym_cpu_pool_calls_in_flight", server="grading") == 0


async def test_gym_env_status_shows_dashes_for_a_server_without_metrics(tmp_path: Path):
    config = resources_alone(telemetry={"metrics_enabled": False})
    with running_deployment([write_config(tmp_path, config)], tmp_path) as running:
        port = running.head_url.rsplit(":", 1)[1]
        table, as_json = await asyncio.gather(
            *(
                asyncio.to_thread(
                    subprocess.run,
                    gym_command("env", "status", *flags, f"++head_server.port={port}"),
                    capture_output=True,
                    text=True,
                    timeout=60,
                    cwd=tmp_path,
                )  # fmt: skip
                for flags in ((), ("--json",))
            )
        )
    assert table.returncode == 0 and as_json.returncode == 0, table.stderr + as_json.stderr
    row = next(line.split() for line in table.stdout.splitlines() if line.startswith(RESOURCES + " "))
    assert row[-6:] == ["-"] * 6 and "success" in row
    assert [entry["metrics"] for entry in json.loads(as_json.stdout)] == [None]
