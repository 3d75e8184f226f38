"""A whole deployment started by `gym run`: example_session_state_mgmt + simple_agent + openai_model, with
the scripted upstream playing the model. Every test runs against the three ways of placing the servers:
one process each, all co-hosted in one process, and co-hosted in two worker processes."""

import time
from collections.abc import Iterator

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.http.deadlines import DEADLINE_HEADER
from tests.helpers import (
    REPO_ROOT,
    RunningDeployment,
    established_connections,
    running_deployment,
    worker_pids,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

ENVIRONMENT = "resources_servers/example_session_state_mgmt"
AGENT = "example_session_state_mgmt_simple_agent"
DEADLINE_S = 3.0
ROW_1 = orjson.loads((REPO_ROOT / ENVIRONMENT / "data" / "example.jsonl").read_bytes().splitlines()[0])
RESOURCES = "example_session_state_mgmt_resources_server"
PLACEMENTS = {
    "one_process_per_server": [],
    "colocated": ["+colocate=true"],
    "colocated_2_workers": ["+colocate=true", "+colocate_num_workers=2"],
}


@pytest.fixture(scope="module", params=list(PLACEMENTS))
def deployment(request, scripted_upstream: ScriptedUpstream) -> Iterator[tuple[RunningDeployment, str]]:
    model = fresh_model("e2e")
    args = [
        *PLACEMENTS[request.param],
        f"+config_paths=[{ENVIRONMENT}/configs/example_session_state_mgmt.yaml,configs/policy_model.yaml]",
        f"+policy_base_url={scripted_upstream.base_url}",
        "+policy_api_key=sk-end-to-end",
        f"+policy_model_name={model}",
        f"+global_http_deadline_s={DEADLINE_S}",
    ]
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model


def script(upstream: ScriptedUpstream, model: str, *turns: dict) -> None:
    upstream.clear(model)
    upstream.script(model, list(turns))


async def post_run(running: RunningDeployment, row: dict) -> tuple[int, dict]:
    response = await request("POST", running.url(AGENT) + "/run", json=row)
    return response.status, await get_response_json(response)


def counting_turns(*increments: int) -> list[dict]:
    turns = [
        {"output": [function_call("increment_counter", {"count": n})], "usage": {"input_tokens": 20}}
        for n in increments
    ]
    turns.append({"output": [function_call("get_counter_value", {})], "usage": {"input_tokens": 30}})
    turns.append({"output": [assistant_message("The count is ready.")], "usage": {"input_tokens": 40}})
    return turns


async def test_example_row_1_counted_right_earns_reward_1(deployment, scripted_upstream):
    running, model = deployment
    assert ROW_1["initial_count"] + 1 + 2 == ROW_1["expected_count"]
    script(scripted_upstream, model, *counting_turns(1, 2))
    status, result = await post_run(running, ROW_1)
    assert status == 200, result
    assert result["reward"] == 1.0
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output"] * 3 + ["message"]
    assert [item.get("name") for item in output[::2][:3]] == [
        "increment_counter",
        "increment_counter",
        "get_counter_value",
    ]
    assert orjson.loads(output[5]["output"]) == {"count": ROW_1["expected_count"]}
    usage = result["response"]["usage"]
    assert usage["input_tokens"] == 20 + 20 + 30 + 40
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    # The model server forced the configured model name and sent the key as a bearer token.
    received = scripted_upstream.requests(model)
    assert len(received) == 4
    assert all(entry["headers"]["Authorization"] == "Bearer sk-end-to-end" for entry in received)


async def test_a_wrong_final_count_earns_0(deployment, scripted_upstream):
    running, model = deployment
    script(scripted_upstream, model, *counting_turns(1, 1))
    status, result = await post_run(running, ROW_1)
    assert status == 200 and result["reward"] == 0.0


async def test_upstream_400_reaches_the_trainer_as_a_4xx_naming_the_model_server(
    deployment, scripted_upstream
):
    running, model = deployment
    script(
        scripted_upstream, model, {"status": 400, "body": {"error": {"message": "bad request: max_tokens"}}}
    )
    status, result = await post_run(running, ROW_1)
    assert status == 400
    assert result["error"]["server"] == f"SimpleAgent___{AGENT}"
    assert result["error"]["cause"]["server"].endswith("___policy_model")
    assert "max_tokens" in orjson.dumps(result["error"]["cause"]).decode()


async def test_a_hanging_upstream_fails_the_run_at_the_deadline(deployment, scripted_upstream):
    running, model = deployment
    script(scripted_upstream, model, {"hang": True})
    started = time.monotonic()
    status, result = await post_run(running, ROW_1)
    assert status == 504, result
    assert time.monotonic() - started >= DEADLINE_S  # the deadline's 504, not an earlier failure


async def test_colocated_servers_talk_without_sockets(deployment, scripted_upstream):
    """Co-hosted, a rollout opens no connection to the resources or model server: their calls stay
    in-process, and only `/run` and the upstream calls cross the network. One process per server keeps
    pooled connections to both."""
    running, model = deployment
    script(scripted_upstream, model, *counting_turns(1, 2))
    status, result = await post_run(running, ROW_1)
    assert status == 200 and result["reward"] == 1.0
    pids = {running.instances[name]["pid"] for name in (AGENT, RESOURCES, "policy_model")}
    inner_ports = [int(running.url(name).rsplit(":", 1)[1]) for name in (RESOURCES, "policy_model")]
    processes = pids | {worker for pid in pids for worker in worker_pids(pid)}
    inner_connections = established_connections(processes, remote_ports=inner_ports)
    if "+colocate=true" in running.process.args:
        assert len(pids) == 1
        assert inner_connections == 0
    else:
        assert len(pids) == 3
        assert inner_connections > 0


async def test_every_colocated_server_still_answers_on_its_own_port(deployment):
    running, _ = deployment
    seeded = await request("POST", running.url(RESOURCES) + "/seed_session", json=ROW_1)
    assert seeded.status == 200, await seeded.read()
    for name in (AGENT, RESOURCES, "policy_model"):
        alive = await request("GET", running.url(name) + "/")
        assert alive.status == 200 and await get_response_json(alive) == {"status": "ok"}


async def test_a_caller_with_little_time_left_is_cut_at_its_deadline(deployment, scripted_upstream):
    """The caller's remaining time travels every hop, in-process ones included, and stops at Gym's edge:
    the run fails at the caller's deadline and the upstream is never told a deadline."""
    running, model = deployment
    script(scripted_upstream, model, {"hang": True})
    answer = await request(
        "POST", running.url(AGENT) + "/run", json=ROW_1, headers={DEADLINE_HEADER: str(DEADLINE_S / 3)}
    )
    result = await get_response_json(answer)
    assert answer.status == 504, result
    assert "deadline" in orjson.dumps(result).decode()
    received = scripted_upstream.requests(model)
    assert received and all(
        DEADLINE_HEADER.lower() not in map(str.lower, entry["headers"]) for entry in received
    )
