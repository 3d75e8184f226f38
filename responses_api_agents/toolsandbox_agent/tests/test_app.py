"""ToolSandboxAgent over HTTP, every server a real process: the shipped toolsandbox environment, two
openai_model servers in front of the scripted upstream (one plays the policy, one the simulated user), and
the agent as toolsandbox's pairing config ships it (plus a second instance with a small max_steps,
transitions on, and a short rollout deadline)."""

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from nemo_gym.testing import instance_config, read_jsonl, run_instance
from responses_api_agents.toolsandbox_agent.app import transitions
from tests.helpers import RoleStack, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, function_call, reasoning

ROOT = Path(__file__).resolve().parents[3]
ENV_FOLDER = ROOT / "resources_servers" / "toolsandbox"
PAIRING = ENV_FOLDER / "configs" / "toolsandbox_toolsandbox_agent.yaml"
MAYA, TOM_CELLULAR, *_ = read_jsonl(ENV_FOLDER / "data" / "example.jsonl")
STOP = "###STOP###"
SMALL_MAX_STEPS = 3
DEADLINE_S = 3.0


def shipped_agent() -> dict:
    shipped = yaml.safe_load(PAIRING.read_text())["toolsandbox_toolsandbox_agent"]
    agent = copy.deepcopy(shipped["responses_api_agents"]["toolsandbox_agent"])
    del agent["datasets"]
    return {**agent, "user_model_server": {"type": "responses_api_models", "name": "user_model"}}


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("toolsandbox_agent")
    with ExitStack() as servers:
        config, models = run_role_models(
            servers, scripted_upstream, ["policy", "user"], workdir, timeout_s=DEADLINE_S + 0.5
        )
        config["toolsandbox"] = instance_config("resources_servers", "toolsandbox", domain="agent")
        run_with_port(servers, config, "toolsandbox", workdir)
        config["shipped"] = instance_config("responses_api_agents", "toolsandbox_agent", **shipped_agent())
        config["small"] = instance_config(
            "responses_api_agents", "toolsandbox_agent",
            **{**shipped_agent(), "max_steps": SMALL_MAX_STEPS, "return_transitions": True, "rollout_deadline_s": DEADLINE_S},
        )  # fmt: skip
        urls = {
            name: servers.enter_context(run_instance(config, name, workdir)).url
            for name in ("shipped", "small")
        }
        yield RoleStack(scripted_upstream, models, urls=urls)


def kinds(output: list[dict]) -> list[str]:
    return [item.get("role") or item["type"] for item in output]


async def test_a_reply_goes_to_the_user_and_the_episode_goes_on_to_verify(stack):
    send = {"phone_number": "+14155550142", "content": "I'm running 10 minutes late"}
    stack.script(
        "policy",
        "Which Maya do you mean, and what should the text say?",
        function_call("search_contacts", {"name": "Maya"}, call_id="c1"),
        function_call("send_message_with_phone_number", send, call_id="c2"),
        "Done: Maya Chen has your text.",
    )
    stack.script("user", "Maya Chen. Say I'm running 10 minutes late.", f"Great, thanks! {STOP}")
    status, result = await stack.run("shipped", MAYA)
    assert status == 200, result
    output = result["response"]["output"]
    assert kinds(output) == [
        "assistant", "user", "function_call", "function_call_output", "function_call",
        "function_call_output", "assistant", "user",
    ]  # fmt: skip
    assert output[1]["content"] == "Maya Chen. Say I'm running 10 minutes late.", (
        "the user's answer is the next turn"
    )
    assert '"person_maya"' in output[3]["output"], "the tool ran in the environment's world"
    assert result["reward"] == 1.0 and result["milestone_similarity"] == 1.0, "graded by /verify"
    assert (result["terminated"], result["truncated"], result["info"]["user_stopped"]) == (True, False, True)
    assert (result["response"]["group_id"], result["response"]["contains_transitions"]) == ("0", False)
    assert result["response"]["env_id"].startswith("toolsandbox-")
    assert result["user_notes"] == MAYA["user_notes"], "the verify answer carries the row"
    policy_inputs = stack.requests("policy")
    assert len(policy_inputs) == 4
    assert "Maya Chen. Say I'm running" in str(policy_inputs[1]["input"]), "the policy heard the user"
    assert all(MAYA["user_notes"] not in str(body) for body in policy_inputs), "notes are the user's alone"
    user_inputs = stack.requests("user")
    assert len(user_inputs) == 2 and MAYA["user_notes"] in str(user_inputs[0]["input"])
    assert "Which Maya do you mean" in str(user_inputs[0]["input"]), "the user heard the policy's question"
    assert len(result["user_model_calls"]) == 2, "kept for an offline replay of the user's side"


async def test_a_reply_sent_to_the_wrong_person_is_graded_zero_by_verify(stack):
    send = {"phone_number": "+14155550177", "content": "I'm running 10 minutes late"}
    stack.script("policy", function_call("send_message_with_phone_number", send), "Sent to Tom.")
    stack.script("user", f"Fine. {STOP}")
    status, result = await stack.run("shipped", MAYA)
    assert status == 200, result
    assert (result["reward"], result["minefield_hit"]) == (0.0, True), "texting Tom is a minefield"


async def test_a_policy_that_never_stops_is_cut_off_at_max_steps_with_transitions(stack):
    stack.script("policy", {"output": [function_call("get_device_settings", {})], "repeat": 50})
    stack.script("user")
    status, result = await stack.run("small", TOM_CELLULAR)
    assert status == 200, result
    assert (result["terminated"], result["truncated"]) == (False, True)
    snapshots = result["response"]["output"]
    assert result["response"]["contains_transitions"] is True and len(snapshots) == SMALL_MAX_STEPS
    assert [len(snapshot) for snapshot in snapshots] == [
        len(TOM_CELLULAR["responses_create_params"]["input"]) + 2 * n for n in (1, 2, 3)
    ]
    assert stack.requests("user") == [], "the user waits while the policy works with its tools"
    assert result["reward"] == 0.0 and "milestone_similarity" in result, "a real grade of 0, not a failure"


async def test_a_turn_with_nothing_to_act_on_ends_the_episode(stack):
    stack.script("policy", reasoning("Hmm."))
    stack.script("user")
    status, result = await stack.run("shipped", MAYA)
    assert status == 200, result
    assert (result["terminated"], result["info"]) == (True, {"policy_stopped": True})
    assert len(stack.requests("policy")) == 1 and stack.requests("user") == []
    assert result["reward"] == 0.0


async def test_a_hanging_user_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", "Who is Maya?")
    stack.script("user", {"hang": True})
    status, result = await stack.run("small", MAYA)
    assert status == 504 and result["error"]["type"] == "timeout", result


async def test_a_row_the_environment_cannot_play_is_a_422_naming_the_field(stack):
    row = {key: value for key, value in MAYA.items() if key != "user_notes"}
    status, result = await stack.run("shipped", row)
    assert status == 422 and "user_notes" in str(result), result


def test_transitions_are_cut_after_each_steps_observations():
    call, result = {"type": "function_call"}, {"type": "function_call_output"}
    reply, user = {"type": "message", "role": "assistant"}, {"type": "message", "role": "user"}
    prompt = [{"role": "system"}]
    assert transitions(prompt, [call, result, reply, user, reply]) == [
        [*prompt, call, result],
        [*prompt, call, result, reply, user],
        [*prompt, call, result, reply, user, reply],
    ]
