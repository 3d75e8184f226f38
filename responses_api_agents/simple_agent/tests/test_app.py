"""SimpleAgent over HTTP: the session-counter environment, openai_model and the scripted upstream, each a
real server process; the upstream plays the model's turns."""

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from tests.helpers import instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call, reasoning

DATA = Path(__file__).resolve().parents[3] / "resources_servers" / "example_session_state_mgmt" / "data"
COUNTER_TOOLS = orjson.loads((DATA / "example.jsonl").read_bytes().splitlines()[0])[
    "responses_create_params"
]["tools"]
ROLLOUT_DEADLINE_S = 3.0


@dataclass
class Stack:
    agent_url: str
    one_at_a_time_agent_url: str
    unverified_agent_url: str
    model: str
    upstream: ScriptedUpstream
    requests_before_script: int = 0

    def script(self, *turns: dict) -> None:
        """Replace the model's script; `model_requests` then shows only the requests made after this call."""
        self.upstream.clear(self.model)
        self.requests_before_script = len(self.upstream.requests(self.model))
        self.upstream.script(self.model, list(turns))

    def model_requests(self) -> list[dict]:
        recorded = self.upstream.requests(self.model)[self.requests_before_script :]
        return [entry["body"] for entry in recorded]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("simple_agent")
    model = fresh_model("agent")
    resources = {
        "counter_rs": instance_config("resources_servers", "example_session_state_mgmt", domain="agent")
    }
    policy = {
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-agent-test",
            openai_model=model,
        )
    }
    with ExitStack() as servers:
        counter = servers.enter_context(run_instance(resources, "counter_rs", workdir))
        model_server = servers.enter_context(run_instance(policy, "policy_model", workdir))
        resources["counter_rs"]["resources_servers"]["example_session_state_mgmt"]["port"] = counter.port
        policy["policy_model"]["responses_api_models"]["openai_model"]["port"] = model_server.port
        agent = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server={"type": "resources_servers", "name": "counter_rs"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            max_steps=6,
            rollout_deadline_s=ROLLOUT_DEADLINE_S,
        )
        capped = {**agent["responses_api_agents"]["simple_agent"], "max_concurrent_rollouts": 1}
        unverified = {
            **agent["responses_api_agents"]["simple_agent"],
            "skip_verification": True,
            "skip_verification_reward": 0.25,
        }
        config = {
            **resources,
            **policy,
            "agent": agent,
            "one_at_a_time": {"responses_api_agents": {"simple_agent": capped}},
            "unverified": {"responses_api_agents": {"simple_agent": unverified}},
        }
        agent_server = servers.enter_context(run_instance(config, "agent", workdir))
        capped_server = servers.enter_context(run_instance(config, "one_at_a_time", workdir))
        unverified_server = servers.enter_context(run_instance(config, "unverified", workdir))
        yield Stack(agent_server.url, capped_server.url, unverified_server.url, model, scripted_upstream)


def counter_row(initial: int, expected: int) -> dict:
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": "add 1 then add 2 then get the count"}],
            "tools": COUNTER_TOOLS,
        },
        "initial_count": initial,
        "expected_count": expected,
    }


async def run(stack: Stack, row: dict) -> tuple[int, dict]:
    response = await request("POST", stack.agent_url + "/run", json=row)
    return response.status, await get_response_json(response)


def without_nulls(item: dict) -> dict:
    """An output item as the agent sends it back to the model: unset (null) fields left out."""
    return {key: value for key, value in item.items() if value is not None}


def kinds(output: list[dict]) -> list[str]:
    return [item["type"] for item in output]


def tool_outputs(output: list[dict]) -> list:
    return [orjson.loads(item["output"]) for item in output if item["type"] == "function_call_output"]


async def test_counting_rollout_threads_the_session_and_earns_reward(stack):
    stack.script(
        {"output": [function_call("increment_counter", {"count": 1})], "usage": {"input_tokens": 7}},
        {"output": [function_call("increment_counter", {"count": 2})], "usage": {"input_tokens": 11}},
        {"output": [function_call("get_counter_value", {})], "usage": {"input_tokens": 13}},
        {"output": [assistant_message("The count is 6.")], "usage": {"input_tokens": 17}},
    )
    status, result = await run(stack, counter_row(initial=3, expected=6))
    assert status == 200, result
    assert result["reward"] == 1.0
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output"] * 3 + ["message"]
    assert tool_outputs(output) == [{"success": True}, {"success": True}, {"count": 6}]
    calls = [item for item in output if item["type"] == "function_call"]
    outputs = [item for item in output if item["type"] == "function_call_output"]
    assert [c["call_id"] for c in calls] == [o["call_id"] for o in outputs]
    usage = result["response"]["usage"]
    assert usage["input_tokens"] == 7 + 11 + 13 + 17
    assert usage["output_tokens"] == 4 * 5 and usage["total_tokens"] == 48 + 20
    # Each model call saw the task's input followed by everything produced so far.
    requests = stack.model_requests()
    assert [len(body["input"]) for body in requests] == [1, 3, 5, 7]
    assert requests[3]["input"][1:] == [without_nulls(item) for item in output[:6]]


async def test_a_wrong_final_count_earns_nothing(stack):
    stack.script(
        {"output": [function_call("increment_counter", {"count": 1})]},
        {"output": [function_call("increment_counter", {"count": 1})]},
        {"output": [assistant_message("Done.")]},
    )
    status, result = await run(stack, counter_row(initial=3, expected=6))
    assert status == 200 and result["reward"] == 0.0


async def test_parallel_calls_of_one_turn_are_answered_in_order(stack):
    first, second = (
        function_call("increment_counter", {"count": 1}),
        function_call("increment_counter", {"count": 2}),
    )
    stack.script({"output": [first, second]}, {"output": [assistant_message("6")]})
    status, result = await run(stack, counter_row(initial=3, expected=6))
    assert status == 200 and result["reward"] == 1.0
    output = result["response"]["output"]
    assert kinds(output) == [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert [output[2]["call_id"], output[3]["call_id"]] == [first["call_id"], second["call_id"]]


async def test_concurrent_rollouts_keep_separate_sessions(stack):
    """Two rollouts at once, each with its own cookie: neither sees the other's counter."""
    stack.upstream.clear(stack.model)
    # Standing rules, whatever order the two rollouts' turns interleave in: a turn that already saw a tool
    # result answers, any other turn increments by 1.
    stack.upstream.script(
        stack.model,
        [
            {"match": "function_call_output", "output": [assistant_message("done")]},
            {"match": "add 1", "output": [function_call("increment_counter", {"count": 1})]},
        ],
    )
    results = await asyncio.gather(run(stack, counter_row(0, 1)), run(stack, counter_row(10, 11)))
    assert [(status, result["reward"]) for status, result in results] == [(200, 1.0), (200, 1.0)]


async def test_max_concurrent_rollouts_queues_the_rest(stack):
    """Capped at one rollout at a time, two rollouts sent together reach the model one after the other;
    without the cap their turns interleave."""
    stack.script(
        {"match": "function_call_output", "output": [assistant_message("done")], "delay_s": 0.2},
        {"match": "add 1", "output": [function_call("increment_counter", {"count": 1})], "delay_s": 0.2},
    )

    def row(label: str, initial: int) -> dict:
        row = counter_row(initial, initial + 1)
        row["responses_create_params"]["input"][0]["content"] = f"add 1 ({label})"
        return row

    def rollout_order() -> list[str]:
        asked = [orjson.dumps(body["input"][0]).decode() for body in stack.model_requests()]
        return ["first" if "(first)" in text else "second" for text in asked]

    async def both(url: str) -> None:
        runs = [
            request("POST", url + "/run", json=row(label, n)) for label, n in (("first", 0), ("second", 5))
        ]
        answers = await asyncio.gather(*runs)
        assert [(await get_response_json(answer))["reward"] for answer in answers] == [1.0, 1.0]

    await both(stack.one_at_a_time_agent_url)
    order = rollout_order()
    assert len(order) == 4 and order[0] == order[1] and order[2] == order[3] != order[0], order
    stack.requests_before_script = len(stack.upstream.requests(stack.model))  # same rules, uncapped agent
    await both(stack.agent_url)
    assert rollout_order()[:2] in (["first", "second"], ["second", "first"])


@pytest.mark.parametrize(
    ("call", "expected_error"),
    [
        (
            {"type": "function_call", "call_id": "c1", "name": "increment_counter", "arguments": "{oops"},
            "Invalid tool call arguments",
        ),
        (
            {"type": "function_call", "call_id": "c1", "name": "increment_counter", "arguments": "[1]"},
            "expected a JSON object",
        ),
        (function_call("launch_rockets", {}, "c1"), "Unknown tool 'launch_rockets'"),
        (function_call("verify", {}, "c1"), "Unknown tool 'verify'"),
    ],
)
async def test_unusable_tool_calls_are_fed_back_and_the_rollout_goes_on(stack, call, expected_error):
    stack.script({"output": [call]}, {"output": [assistant_message("sorry")]})
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200, result
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output", "message"]
    assert expected_error in tool_outputs(output)[0]["error"]
    assert output[1]["call_id"] == "c1"
    assert result["reward"] == 1.0  # the bad call changed nothing


async def test_a_tool_refusing_the_arguments_is_fed_back_verbatim(stack):
    stack.script(
        {"output": [function_call("increment_counter", {"count": "many"})]},
        {"output": [assistant_message("x")]},
    )
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200
    refusal = tool_outputs(result["response"]["output"])[0]
    assert refusal["detail"][0]["loc"] == ["body", "count"]


async def test_incomplete_turn_stops_without_running_its_calls(stack):
    stack.script(
        {
            "output": [function_call("increment_counter", {"count": 5})],
            "incomplete_details": {"reason": "max_output_tokens"},
        }
    )
    status, result = await run(stack, counter_row(initial=1, expected=1))
    assert status == 200 and result["reward"] == 1.0
    assert kinds(result["response"]["output"]) == ["function_call"]
    assert result["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_a_turn_without_tool_calls_ends_the_rollout_and_says_why_when_it_has_no_message(stack):
    stack.script({"output": [reasoning("thinking")]}, {"output": [assistant_message("never asked for")]})
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200 and kinds(result["response"]["output"]) == ["reasoning"]
    assert len(stack.model_requests()) == 1
    assert result["response"]["status"] == "incomplete"
    assert result["response"]["metadata"]["ng_termination_reason"] == "incomplete_reasoning"

    stack.script({"output": []}, {"output": [assistant_message("never asked for")]})
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200 and result["response"]["output"] == []
    assert len(stack.model_requests()) == 1
    assert result["response"]["metadata"]["ng_termination_reason"] == "empty_output"

    stack.script({"output": [reasoning("so"), assistant_message("0")]})
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200 and result["response"]["status"] != "incomplete"
    assert "ng_termination_reason" not in (result["response"]["metadata"] or {})


async def test_the_step_cap_bounds_a_model_that_never_stops_calling_tools(stack):
    stack.script({"output": [function_call("get_counter_value", {})], "repeat": 100})
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 200
    assert len(stack.model_requests()) == 6  # max_steps of the fixture


async def test_upstream_400_keeps_its_status_and_names_the_model_server(stack):
    stack.script(
        {"status": 400, "body": {"error": {"message": "context too long", "type": "invalid_request_error"}}}
    )
    status, result = await run(stack, counter_row(initial=0, expected=0))
    assert status == 400
    error = result["error"]
    assert error["status"] == 400 and error["server"] == "SimpleAgent___agent"
    assert "policy_model" in error["cause"]["server"]
    assert "context too long" in orjson.dumps(error["cause"]).decode()


async def test_a_hanging_upstream_fails_the_rollout_at_its_deadline(stack):
    stack.script({"hang": True})
    started = time.monotonic()
    status, result = await run(stack, counter_row(initial=0, expected=0))
    elapsed = time.monotonic() - started
    assert status == 504 and result["error"]["type"] == "timeout"
    assert elapsed >= ROLLOUT_DEADLINE_S, "the rollout waited for its deadline"


async def test_responses_route_runs_the_loop_and_returns_the_session_cookies(stack):
    stack.script(
        {"output": [function_call("increment_counter", {"count": 4})]}, {"output": [assistant_message("4")]}
    )
    body = {"input": "add 4", "tools": COUNTER_TOOLS}
    response = await request("POST", stack.agent_url + "/v1/responses", json=body)
    result = await get_response_json(response)
    assert response.status == 200, result
    assert kinds(result["output"]) == ["function_call", "function_call_output", "message"]
    assert stack.model_requests()[0]["input"] == [{"role": "user", "content": "add 4", "type": "message"}]
    assert any(name.endswith("___counter_rs") for name in response.cookies)


async def test_aggregate_metrics_is_answered_by_the_resources_server(stack):
    verify_responses = [
        {"_ng_task_index": 0, "_ng_rollout_index": index, "reward": reward}
        for index, reward in enumerate([1.0, 0.0])
    ]
    response = await request(
        "POST", stack.agent_url + "/aggregate_metrics", json={"verify_responses": verify_responses}
    )
    metrics = await get_response_json(response)
    assert response.status == 200
    assert metrics["agent_metrics"]["mean/reward"] == 0.5


async def test_a_row_without_responses_create_params_is_a_422(stack):
    response = await request("POST", stack.agent_url + "/run", json={"initial_count": 1})
    body = await get_response_json(response)
    assert response.status == 422
    assert body["detail"][0]["loc"] == ["body", "responses_create_params"]


async def test_training_fields_of_earlier_turns_go_back_to_the_model_unchanged(stack):
    tokens = {
        "prompt_token_ids": [1, 2, 3],
        "generation_token_ids": [4, 5],
        "generation_log_probs": [-0.5, -0.25],
    }
    first_call = {**function_call("increment_counter", {"count": 2}), **tokens}
    stack.script({"output": [first_call]}, {"output": [assistant_message("2")]})
    status, result = await run(stack, counter_row(initial=0, expected=2))
    assert status == 200 and result["reward"] == 1.0
    second_request = stack.model_requests()[1]
    replayed = second_request["input"][1]
    assert replayed["call_id"] == first_call["call_id"]
    assert {key: replayed[key] for key in tokens} == tokens
    assert {key: result["response"]["output"][0][key] for key in tokens} == tokens


async def test_skip_verification_scores_the_configured_reward_without_verifying(stack):
    stack.script(
        {"output": [function_call("increment_counter", {"count": 3})]}, {"output": [assistant_message("3")]}
    )
    response = await request(
        "POST", stack.unverified_agent_url + "/run", json=counter_row(initial=0, expected=3)
    )
    result = await get_response_json(response)
    assert response.status == 200, result
    assert (result["reward"], result["verification_skipped"]) == (0.25, True), "verify would have given 1.0"
    assert result["expected_count"] == 3 and kinds(result["response"]["output"])[-1] == "message"
