"""AviaryAgent over HTTP: the shipped aviary environment (a real fhaviary Environment), openai_model and the
scripted upstream, each a real server process; the upstream plays the model's turns."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.testing import read_jsonl
from responses_api_agents.aviary_agent.app import AviaryAgentConfig
from tests.helpers import RoleStack, instance_config, run_role_models, run_with_port
from tests.upstream_script import (
    ScriptedUpstream,
    assistant_message,
    function_call,
)

AVIARY = Path(__file__).resolve().parents[3] / "resources_servers" / "aviary"
ROWS = read_jsonl(AVIARY / "data" / "example.jsonl")  # row 0: 14 trays of 12 muffins, 97 sold -> 71
ROLLOUT_DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("aviary_agent")
    agent = {
        "resources_server": {"type": "resources_servers", "name": "aviary_env"},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
        "max_steps": 5,
        "rollout_deadline_s": ROLLOUT_DEADLINE_S,
    }
    nudging = {
        **agent,
        "done_if_no_tool_calls": False,
        "max_total_sequence_length": 1000,
        "return_transitions": False,
    }
    with ExitStack() as servers:
        config, models = run_role_models(servers, scripted_upstream, ["policy"], workdir)
        config["aviary_env"] = instance_config("resources_servers", "aviary", domain="math")
        run_with_port(servers, config, "aviary_env", workdir)
        config["agent"] = instance_config("responses_api_agents", "aviary_agent", **agent)
        config["nudging"] = instance_config("responses_api_agents", "aviary_agent", **nudging)
        urls = {name: run_with_port(servers, config, name, workdir).url for name in ("agent", "nudging")}
        yield RoleStack(scripted_upstream, models, urls=urls)


def kinds(output: list[dict]) -> list[str]:
    return [item["type"] for item in output]


async def test_an_episode_is_stepped_through_the_environment_and_earns_its_reward(stack):
    calculate = function_call("calculator", {"expr": "14*12-97"})
    submit = function_call("submit_answer", {"answer": "71"})
    stack.script(
        "policy",
        {"output": [calculate], "usage": {"input_tokens": 40}},
        {"output": [submit], "usage": {"input_tokens": 60}},
        {"output": [assistant_message("never asked for")]},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200, result
    assert (result["reward"], result["episode_done"], result["steps"]) == (1.0, True, 2)
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output"] * 2
    # The model reads the tool's text, not the step's bookkeeping.
    assert [item["output"] for item in output[1::2]] == ["71", "Correct."]
    assert [item["call_id"] for item in output[1::2]] == [calculate["call_id"], submit["call_id"]]
    # Two model calls, in order, each seeing the prompt and everything before it; the done step ended it.
    requests = stack.requests("policy")
    assert [len(body["input"]) for body in requests] == [2, 4]
    assert requests[1]["input"][2]["call_id"] == calculate["call_id"]
    assert result["response"]["usage"]["input_tokens"] == 100
    assert [len(transition) for transition in result["transitions"]] == [4, 6]


async def test_a_wrong_answer_earns_nothing_from_the_environment(stack):
    stack.script("policy", {"output": [function_call("submit_answer", {"answer": "70"})]})
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and (result["reward"], result["episode_done"]) == (0.0, True)
    assert result["response"]["output"][1]["output"] == "Incorrect."


async def test_a_refused_tool_call_is_fed_back_and_the_episode_goes_on(stack):
    stack.script(
        "policy",
        {"output": [function_call("calculator", {"expression": "1+1"})]},
        {"output": [function_call("submit_answer", {"answer": "71"})]},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 1.0
    refusal = orjson.loads(result["response"]["output"][1]["output"])
    assert "unknown argument 'expression'" in refusal["detail"]


async def test_a_turn_without_tool_calls_ends_or_is_nudged(stack):
    stack.script("policy", {"output": [assistant_message("71")]})
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and (result["reward"], result["episode_done"]) == (0.0, False)

    stack.script(
        "policy",
        {"output": [assistant_message("71")]},
        {"output": [function_call("submit_answer", {"answer": "71"})]},
    )
    status, result = await stack.run("nudging", ROWS[0])
    assert status == 200 and result["reward"] == 1.0
    assert kinds(result["response"]["output"]) == [
        "message",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert "call a tool" in stack.requests("policy")[1]["input"][-1]["content"]
    assert "transitions" not in result


async def test_a_spent_context_budget_ends_the_episode_incomplete(stack):
    stack.script(
        "policy", {"output": [function_call("calculator", {"expr": "2+2"})], "usage": {"input_tokens": 995}}
    )
    status, result = await stack.run("nudging", ROWS[0])
    assert status == 200 and (result["reward"], result["episode_done"], result["steps"]) == (0.0, False, 1)
    assert len(stack.requests("policy")) == 1
    assert result["response"]["status"] == "incomplete"
    assert result["response"]["metadata"]["ng_termination_reason"] == "max_total_sequence_length"


async def test_a_model_error_mid_episode_fails_the_rollout_and_names_the_model_server(stack):
    stack.script(
        "policy",
        {"output": [function_call("calculator", {"expr": "2+2"})]},
        {"status": 400, "body": {"error": {"message": "context too long", "type": "invalid_request_error"}}},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 400, result
    assert "policy_model" in result["error"]["cause"]["server"]
    assert "context too long" in orjson.dumps(result["error"]["cause"]).decode()


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", {"hang": True})
    status, result = await stack.run("agent", ROWS[0])
    assert status == 504 and result["error"]["type"] == "timeout"


def test_collapsing_environment_states_is_refused_with_the_fix():
    with pytest.raises(ValidationError, match="collapse_old_env_states: false") as refused:
        AviaryAgentConfig.model_validate(
            {
                "name": "agent",
                "host": "127.0.0.1",
                "port": 0,
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": "aviary_env"},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
                "collapse_old_env_states": True,
            }
        )
    assert [error["loc"] for error in refused.value.errors()] == [("collapse_old_env_states",)]
