"""The DeepAgents agent over HTTP: the shipped counter environment (example_session_state_mgmt, whose tools
the graph calls) and reasoning_gym (through its shipped pairing config), the policy model (openai_model) and
the agents are real server processes on 127.0.0.1, and the real deepagents/LangGraph libraries run the graph;
the scripted upstream (the one test double) plays the model's every call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config, shipped_instance, start_refusal
from tests.helpers import RoleStack, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, assistant_message, function_call

FOLDER = Path(__file__).resolve().parents[1]
REPO = FOLDER.parents[1]
COUNTER_DATA = REPO / "resources_servers" / "example_session_state_mgmt" / "data" / "example.jsonl"
COUNTER_TOOLS = orjson.loads(COUNTER_DATA.read_bytes().splitlines()[0])["responses_create_params"]["tools"]
REASONING = REPO / "resources_servers" / "reasoning_gym"
PAIRING = "reasoning_gym_langchain_deepagents_agent_model_server"
REASONING_ROW = orjson.loads((REASONING / "data" / "example.jsonl").read_bytes().splitlines()[0])
# Generous for the rollouts that finish (a loaded machine); the hang test uses an agent of its own with a
# short deadline, since it waits for all of it.
ROLLOUT_DEADLINE_S = 60.0
HANG_DEADLINE_S = 3.0
MAX_STEPS = 3
TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3, 4], "generation_log_probs": [-0.1, -0.2]}


def template_agent(resources: str, **settings: object) -> dict:
    """The shipped template, its resources server named."""
    agent = shipped_instance(
        FOLDER / "configs" / "langchain_deepagents_agent.yaml", "langchain_deepagents_agent"
    )
    agent["responses_api_agents"]["langchain_deepagents_agent"] |= settings
    agent["responses_api_agents"]["langchain_deepagents_agent"]["resources_server"]["name"] = resources
    return agent


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("langchain_deepagents_agent")
    with ExitStack() as servers:
        config, models = run_role_models(servers, scripted_upstream, ["policy"], workdir)
        config |= {
            "counter_rs": instance_config("resources_servers", "example_session_state_mgmt", domain="agent"),
            "reasoning_gym": instance_config("resources_servers", "reasoning_gym", domain="other"),
            "counter": template_agent(
                "counter_rs", rollout_deadline_s=ROLLOUT_DEADLINE_S, max_steps=MAX_STEPS
            ),
            "reasoning": shipped_instance(REASONING / "configs" / f"{PAIRING}.yaml", PAIRING),
            "impatient": template_agent("counter_rs", rollout_deadline_s=HANG_DEADLINE_S),
            # Less than DeepAgents' own system prompt: no conversation fits.
            "small_context": template_agent("counter_rs", max_input_tokens=500),
        }
        started = {name: run_with_port(servers, config, name, workdir) for name in list(config)[1:]}
        agents = ("counter", "reasoning", "impatient", "small_context")
        yield RoleStack(scripted_upstream, models, urls={name: started[name].url for name in agents})


def counter_row(initial: int, expected: int, tools: list[dict] = COUNTER_TOOLS) -> dict:
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": "add 2, then report the count"}],
            "tools": tools,
        },
        "initial_count": initial,
        "expected_count": expected,
    }


def kinds(output: list[dict]) -> list[str]:
    return [item["type"] for item in output]


def tool_names(body: dict) -> set[str]:
    return {tool["name"] for tool in body.get("tools") or []}


async def test_the_graph_calls_the_resources_server_tools_in_the_session_and_earns_reward(stack):
    increment = function_call("increment_counter", {"count": 2})
    read = function_call("get_counter_value", {})
    final = {**assistant_message("The count is 5."), **TOKENS}
    stack.script(
        "policy",
        {"output": [increment]},
        {"output": [read]},
        {"output": [final], "usage": {"input_tokens": 30}},
    )
    status, result = await stack.run("counter", counter_row(initial=3, expected=5))
    assert status == 200, result
    assert result["reward"] == 1.0, (
        "the counter of this session reached 5: the tools ran in the seeded session"
    )
    output = result["response"]["output"]
    assert kinds(output) == [
        "function_call",
        "function_call_output",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert [orjson.loads(item["output"]) for item in output if item["type"] == "function_call_output"] == [
        {"success": True},
        {"count": 5},
    ]
    assert output[1]["call_id"] == increment["call_id"] and output[3]["call_id"] == read["call_id"]
    assert {key: output[-1][key] for key in TOKENS} == TOKENS, "token ids come through"
    assert result["response"]["usage"]["input_tokens"] == 10 + 10 + 30
    first, second, third = stack.requests("policy")
    assert {"increment_counter", "get_counter_value", "write_file", "task"} <= tool_names(first), (
        "task and DeepAgents tools"
    )
    assert (
        first["input"][0]["role"] == "system"
        and first["input"][-1]["content"] == "add 2, then report the count"
    )
    # The model's own items go back to it unchanged, followed by the tool's answer.
    assert (
        third["input"][-4]["call_id"] == increment["call_id"]
        and third["input"][-1]["type"] == "function_call_output"
    )


async def test_a_malformed_tool_call_is_answered_with_the_refusal_and_the_model_retries(stack):
    broken = {**function_call("increment_counter", {}), "arguments": "{count: 2"}
    stack.script(
        "policy",
        {"output": [broken]},
        {"output": [function_call("increment_counter", {"count": 2})]},
        {"output": [assistant_message("done")]},
    )
    status, result = await stack.run("counter", counter_row(initial=0, expected=2))
    assert status == 200 and result["reward"] == 1.0, result
    refusal = result["response"]["output"][1]
    assert refusal["call_id"] == broken["call_id"] and "count" in refusal["output"], (
        "the route's 422 names it"
    )
    retry = stack.requests("policy")[1]["input"]
    assert any(item.get("arguments") == "{count: 2" for item in retry), (
        "the model's own call goes back as it was"
    )


async def test_deepagents_own_tools_run_inside_the_graph(stack):
    """Its scratch file system lives in the graph's state: a file written by one call is read by the next."""
    write = function_call("write_file", {"file_path": "/plan.md", "content": "step: add 2"})
    read = function_call("read_file", {"file_path": "/plan.md"})
    stack.script(
        "policy",
        {"output": [write]},
        {"output": [read]},
        {"output": [function_call("increment_counter", {"count": 2})]},
        {"output": [assistant_message("done")]},
    )
    status, result = await stack.run("counter", counter_row(initial=0, expected=2))
    assert status == 200 and result["reward"] == 1.0, result
    answers = {item["call_id"]: item["output"] for item in result["response"]["output"] if "output" in item}
    assert "step: add 2" in answers[read["call_id"]]


async def test_a_sub_agent_works_in_the_same_session_and_its_calls_count(stack):
    """DeepAgents' `task` tool: a sub-agent on the same model and tools, whose tool call reaches the same
    seeded session; the main agent reads its report as the tool's result."""
    delegate = function_call(
        "task", {"description": "Add 2 to the counter.", "subagent_type": "general-purpose"}
    )
    stack.script(
        "policy",
        {"output": [delegate]},
        {"output": [function_call("increment_counter", {"count": 2})]},
        {"output": [assistant_message("Added 2.")]},
        {"output": [assistant_message("done")]},
    )
    status, result = await stack.run("counter", counter_row(initial=1, expected=3))
    assert status == 200 and result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output", "message"]
    assert output[1]["call_id"] == delegate["call_id"] and "Added 2." in output[1]["output"]
    assert result["response"]["usage"]["input_tokens"] == 4 * 10, "the sub-agent's calls are in the usage"
    sub_agent_first_call = stack.requests("policy")[1]
    assert sub_agent_first_call["input"][-1]["content"] == "Add 2 to the counter."


async def test_the_shipped_reasoning_gym_pairing_is_verified_for_real(stack):
    stack.script(
        "policy",
        {"output": [assistant_message(f"Worked it out. <answer>{REASONING_ROW['answer']}</answer>")]},
    )
    status, result = await stack.run("reasoning", REASONING_ROW)
    assert status == 200, result
    assert (result["reward"], result["extracted_answer"]) == (1.0, REASONING_ROW["answer"])
    (asked,) = stack.requests("policy")
    assert "<answer></answer> tags" in asked["input"][0]["content"], "the pairing's system prompt is sent"


async def test_the_model_call_cap_ends_the_rollout_incomplete_and_verified(stack):
    stack.script("policy", {"output": [function_call("get_counter_value", {})], "repeat": 10})
    status, result = await stack.run("counter", counter_row(initial=0, expected=0))
    assert status == 200, result
    assert len(stack.requests("policy")) == MAX_STEPS
    response = result["response"]
    assert response["status"] == "incomplete" and response["metadata"]["ng_termination_reason"] == "max_steps"
    assert kinds(response["output"]) == ["function_call", "function_call_output"] * MAX_STEPS, (
        "no made-up turn"
    )
    assert result["reward"] == 1.0, "verified as it stands"


async def test_a_model_error_mid_graph_fails_the_rollout_clearly(stack):
    refusal = {
        "status": 400,
        "body": {"error": {"message": "context too long", "type": "invalid_request_error"}},
    }
    stack.script("policy", {"output": [function_call("get_counter_value", {})]}, refusal)
    status, result = await stack.run("counter", counter_row(initial=0, expected=0))
    assert status == 400, result
    assert "policy_model" in result["error"]["cause"]["server"]
    assert "context too long" in orjson.dumps(result["error"]).decode()


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", {"hang": True})
    started = time.monotonic()
    status, result = await stack.run("impatient", counter_row(initial=0, expected=0))
    assert status == 504 and result["error"]["type"] == "timeout", result
    assert time.monotonic() - started >= HANG_DEADLINE_S


async def test_a_conversation_beyond_max_input_tokens_is_a_400_naming_the_key(stack):
    stack.script("policy")
    status, result = await stack.run("small_context", counter_row(initial=0, expected=0))
    assert status == 400 and result["error"]["type"] == "context_length_exceeded", result
    assert "max_input_tokens (500)" in result["error"]["message"]
    assert stack.requests("policy") == [], "DeepAgents refused before calling the model"


async def test_a_tool_named_like_a_reserved_route_is_a_422(stack):
    stack.script("policy")
    tools = [{**COUNTER_TOOLS[0], "name": "verify"}]
    status, result = await stack.run("counter", counter_row(initial=0, expected=0, tools=tools))
    assert status == 422 and "tools[0].name 'verify'" in result["error"]["message"], result
    assert stack.requests("policy") == []


async def test_responses_route_runs_the_graph_without_verifying(stack):
    stack.script("policy", {"output": [assistant_message("hello")]})
    response = await request("POST", stack.urls["counter"] + "/v1/responses", json={"input": "say hello"})
    result = await get_response_json(response)
    assert response.status == 200, result
    assert kinds(result["output"]) == ["message"] and result["output"][0]["content"][0]["text"] == "hello"


def test_a_tavily_key_is_refused_at_start_in_one_line(tmp_path: Path):
    agent = template_agent(
        "reasoning_gym", entrypoint="reasoning_search_agent.py", tavily_api_key="tvly-secret"
    )
    [line] = start_refusal({"agent": agent}, "agent", tmp_path)
    assert line.startswith("Error: invalid config for server instance 'agent': ")
    assert "tavily_api_key" in line and "needs the internet" in line
    assert "tvly-secret" not in line, "the key is never shown"


async def test_malformed_rows_are_refused_with_a_4xx(stack):
    stack.script("policy")
    for row in [
        {"initial_count": 1},
        {"responses_create_params": {"input": 5}},
        {"responses_create_params": {"input": [], "tools": [{"type": "function", "name": 3}]}},
        {"responses_create_params": {"input": [], "tools": [{"type": "function", "name": "has space"}]}},
    ]:
        status, result = await stack.run("counter", row)
        assert 400 <= status < 500, (row, result)
    assert stack.requests("policy") == []
