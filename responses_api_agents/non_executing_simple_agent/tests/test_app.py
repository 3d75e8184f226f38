"""NonExecutingSimpleAgent over HTTP: the shipped xlam_fc environment, openai_model and the scripted upstream
(the one test double), each a real server process on 127.0.0.1; the upstream plays the model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from tests.helpers import instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

ROWS = Path(__file__).resolve().parents[3] / "resources_servers" / "xlam_fc" / "data" / "example.jsonl"
ROW = orjson.loads(ROWS.read_bytes().splitlines()[0])  # expects live_giveaways_by_type(beta) and (game)
ROLLOUT_DEADLINE_S = 3.0


@dataclass
class Stack:
    agent_url: str
    model: str
    upstream: ScriptedUpstream
    requests_before_script: int = 0

    def script(self, *turns: dict) -> None:
        self.upstream.clear(self.model)
        self.requests_before_script = len(self.upstream.requests(self.model))
        self.upstream.script(self.model, list(turns))

    def model_requests(self) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(self.model)[self.requests_before_script :]]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("non_executing_simple_agent")
    model = fresh_model("non-executing")
    config = {
        "xlam_fc": instance_config("resources_servers", "xlam_fc", domain="agent"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-agent-test",
            openai_model=model,
        ),
    }
    with ExitStack() as servers:
        for name, server_type, folder in (
            ("xlam_fc", "resources_servers", "xlam_fc"),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        config["agent"] = instance_config(
            "responses_api_agents",
            "non_executing_simple_agent",
            resources_server={"type": "resources_servers", "name": "xlam_fc"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            rollout_deadline_s=ROLLOUT_DEADLINE_S,
        )
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        yield Stack(agent.url, model, scripted_upstream)


async def run(stack: Stack, row: dict) -> tuple[int, dict]:
    response = await request("POST", stack.agent_url + "/run", json=row)
    return response.status, await get_response_json(response)


async def test_the_tool_calls_are_the_answer_and_are_verified_without_being_run(stack):
    calls = [
        function_call("live_giveaways_by_type", {"type": "beta"}),
        function_call("live_giveaways_by_type", {"type": "game"}),
    ]
    stack.script({"output": calls, "usage": {"input_tokens": 9}})
    status, result = await run(stack, ROW)
    assert status == 200, result
    assert result["reward"] == 1.0 and result["num_correct"] == 2
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call"], "no tool was run"
    assert [item["call_id"] for item in output] == [call["call_id"] for call in calls]
    assert result["response"]["usage"]["input_tokens"] == 9
    (asked,) = stack.model_requests()  # exactly one model call
    assert asked["input"] == ROW["responses_create_params"]["input"]
    assert [tool["name"] for tool in asked["tools"]] == ["live_giveaways_by_type"]


async def test_a_wrong_call_earns_nothing(stack):
    stack.script({"output": [function_call("live_giveaways_by_type", {"type": "loot"})]})
    status, result = await run(stack, ROW)
    assert status == 200 and result["reward"] == 0.0 and result["num_predicted"] == 1


async def test_an_answer_without_a_tool_call_is_verified_as_it_is(stack):
    stack.script(
        {"output": [assistant_message("Try the GamerPower site.")]},
        {"output": [function_call("live_giveaways_by_type", {"type": "beta"})]},
    )
    status, result = await run(stack, ROW)
    assert status == 200, result
    assert (result["reward"], result["num_predicted"]) == (0.0, 0)
    assert [item["type"] for item in result["response"]["output"]] == ["message"]
    assert len(stack.model_requests()) == 1, "no second turn, whatever the model would say"


async def test_a_failing_verify_is_a_clear_error_at_once(stack):
    stack.script({"output": [function_call("live_giveaways_by_type", {"type": "beta"})]})
    row = {key: value for key, value in ROW.items() if key != "expected_answers"}
    started = time.monotonic()
    status, result = await run(stack, row)
    assert time.monotonic() - started < ROLLOUT_DEADLINE_S, "no waiting for the deadline"
    assert status == 422, result
    error = result["error"]
    assert error["message"].endswith("/verify"), "the error names the failing call"
    assert error["cause"]["detail"][0]["loc"] == ["body", "expected_answers"], "and the verifier's reason"


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script({"hang": True})
    started = time.monotonic()
    status, result = await run(stack, ROW)
    assert status == 504 and result["error"]["type"] == "timeout", result
    assert ROLLOUT_DEADLINE_S <= time.monotonic() - started < ROLLOUT_DEADLINE_S + 5


async def test_responses_route_makes_one_call_and_keeps_a_string_input(stack):
    stack.script({"output": [function_call("live_giveaways_by_type", {"type": "beta"})]})
    response = await request(
        "POST",
        stack.agent_url + "/v1/responses",
        json={"input": "giveaways?", "tools": ROW["responses_create_params"]["tools"]},
        cookies={"caller": "kept"},
    )
    result = await get_response_json(response)
    assert response.status == 200, result
    assert [item["type"] for item in result["output"]] == ["function_call"]
    assert stack.model_requests()[0]["input"] == [
        {"role": "user", "content": "giveaways?", "type": "message"}
    ]
    assert response.cookies["caller"].value == "kept"


async def test_aggregate_metrics_is_answered_by_the_resources_server(stack):
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": index, "reward": r} for index, r in enumerate([1.0, 0.0])
    ]
    response = await request("POST", stack.agent_url + "/aggregate_metrics", json={"verify_responses": rows})
    metrics = await get_response_json(response)
    assert response.status == 200, metrics
    assert metrics["agent_metrics"]["mean/reward"] == 0.5
