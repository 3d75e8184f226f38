"""The simulation stage over HTTP, every server a real process: the shipped
conversational_tool_use_simulation environment, an openai_model per role in front of the scripted upstream
(policy, simulated customer, judge + tool simulator), and the agent as the environment's pairing config
ships it, plus a second instance that does not seed the first customer message and has a short deadline."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from nemo_gym.testing import instance_config, read_jsonl, run_instance
from responses_api_agents.conversational_tool_use.scenario_generation import ScenarioRequest, simulation_rows
from responses_api_agents.gymnasium_agent.user_simulator import message_text
from tests.helpers import RoleStack, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, function_call

ROOT = Path(__file__).resolve().parents[3]
ENV = "conversational_tool_use_simulation"
ENV_FOLDER = ROOT / "resources_servers" / ENV
PAIRING = yaml.safe_load((ENV_FOLDER / "configs" / f"{ENV}_agent.yaml").read_text())
BIKE = read_jsonl(ENV_FOLDER / "data" / "example.jsonl")[0]
STOP = "###STOP###"
MEMBER = '{"found": true, "name": "Lee Varga", "active_rental_id": "R-880"}'
DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("conversational_tool_use")
    judge = {"type": "responses_api_models", "name": "judge_model"}
    env = dict(PAIRING[ENV]["resources_servers"][ENV], judge_model_server=judge, tool_simulator_model_server=judge,
               judge_backoff_base_s=0.01, judge_backoff_max_s=0.02)  # fmt: skip
    agent = copy.deepcopy(
        PAIRING["conversational_tool_use_agent"]["responses_api_agents"]["conversational_tool_use"]
    )
    del agent["datasets"]
    agent["user_model_server"] = {"type": "responses_api_models", "name": "user_model"}
    with ExitStack() as servers:
        roles = ["policy", "user", "judge"]
        config, models = run_role_models(
            servers, scripted_upstream, roles, workdir, max_retries=1, timeout_s=DEADLINE_S + 0.5
        )
        config[ENV] = instance_config("resources_servers", ENV, **env)
        run_with_port(servers, config, ENV, workdir)
        config["shipped"] = instance_config("responses_api_agents", "conversational_tool_use", **agent)
        config["unseeded"] = instance_config(
            "responses_api_agents", "conversational_tool_use",
            **{**agent, "seed_first_user_message": False, "max_agent_steps": 2}, rollout_deadline_s=DEADLINE_S,
        )  # fmt: skip
        urls = {
            name: servers.enter_context(run_instance(config, name, workdir)).url
            for name in ("shipped", "unseeded")
        }
        yield RoleStack(scripted_upstream, models, urls=urls)


def texts(items: list[dict]) -> list[str]:
    return [message_text(item) for item in items if item.get("type", "message") == "message"]


async def test_the_customer_opens_the_policy_uses_a_tool_answers_and_the_customer_stops(stack):
    stack.script("user", "Hi, member M-5521, one more hour on my bike please.", f"Thanks! {STOP}")
    stack.script("policy", function_call("lookup_member", {"member_id": "M-5521"}), "Extended to 18:00.")
    stack.script("judge", MEMBER, "Verified, then extended.\nVERDICT: PASS")
    status, result = await stack.run("shipped", BIKE)
    assert status == 200, result
    assert (result["reward"], result["terminated"], result["info"]["user_stopped"]) == (1.0, True, True)
    assert result["id"] == BIKE["id"] and result["customer_scenario"] == BIKE["customer_scenario"], "the row"
    assert result["responses_create_params"]["input"][-1]["content"].startswith("Hi, member M-5521"), (
        "the seeded first customer message opens the prompt"
    )
    output = result["response"]["output"]
    assert [item.get("role") or item["type"] for item in output] == [
        "function_call", "function_call_output", "assistant", "user"
    ]  # fmt: skip
    assert "Lee Varga" in output[1]["output"], "the simulator's tool result reached the policy"
    assert texts(output) == ["Extended to 18:00.", f"Thanks! {STOP}"]
    assert "not overdue" in str(stack.requests("user")[0]["input"]), "the customer's brief is its notes"
    assert all("not overdue" not in str(body) for body in stack.requests("policy")), "hidden from the policy"


async def test_a_given_first_message_is_used_and_the_customer_is_not_asked_to_open(stack):
    stack.script("user", f"Great. {STOP}")
    stack.script("policy", "Which rental?")
    stack.script("judge", "Asked politely.\nVERDICT: PASS")
    row = {**BIKE, "initial_user_message": "One more hour on R-880, please."}
    status, result = await stack.run("shipped", row)
    assert status == 200, result
    assert result["responses_create_params"]["input"][-1]["content"] == "One more hour on R-880, please."
    assert len(stack.requests("user")) == 1, "the customer spoke once: after the policy's question"


async def test_an_unseeded_agent_refuses_a_row_without_a_first_message(stack):
    status, result = await stack.run("unseeded", BIKE)
    assert status == 422 and "seed_first_user_message" in result["error"]["message"], result
    conflicting = {**BIKE, "initial_user_message": "Hello", "responses_create_params": {
        **BIKE["responses_create_params"], "input": [*BIKE["responses_create_params"]["input"], {"role": "user", "content": "Hi"}]}}  # fmt: skip
    status, result = await stack.run("shipped", conflicting)
    assert status == 422 and "initial_user_message" in result["error"]["message"], result


async def test_the_conversation_is_cut_off_at_max_agent_steps(stack):
    stack.script("policy", *(function_call("lookup_member", {"member_id": "M-5521"}) for _ in range(5)))
    stack.script("judge", MEMBER, MEMBER, MEMBER)
    stack.script("user")
    row = {**BIKE, "initial_user_message": "One more hour please."}
    status, result = await stack.run("unseeded", row)
    assert status == 200, result
    assert (result["terminated"], result["truncated"]) == (False, True)
    assert len(stack.requests("policy")) == 2 and stack.requests("user") == []


async def test_a_hanging_policy_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", {"hang": True})
    status, result = await stack.run("unseeded", {**BIKE, "initial_user_message": "Hello?"})
    assert status == 504 and result["error"]["type"] == "timeout", result


async def test_a_row_from_scenario_generation_plays_in_the_environment(stack):
    source = ScenarioRequest.model_validate(
        {"id": "bike", "domain_name": BIKE["domain_name"], "policy": BIKE["policy"], "tools": BIKE["tools"]}
    )
    scenario = {**BIKE["customer_scenario"], "unknown_info": None, "outside_policy_scope": False}
    (row,) = simulation_rows(source, [scenario])
    stack.script("user", "Hi, M-5521 here. One more hour?", f"Bye {STOP}")
    stack.script("policy", "Done.")
    stack.script("judge", "Extended without verifying.\nVERDICT: FAIL")
    status, result = await stack.run("shipped", row)
    assert status == 200, result
    assert (result["reward"], result["info"]["verdict"]) == (0.0, "fail"), "a real judged 0, not a failure"
    assert [tool["name"] for tool in stack.requests("policy")[0]["tools"]] == [
        t["name"] for t in BIKE["tools"]
    ]
