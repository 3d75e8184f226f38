"""toolsandbox over HTTP. The environment alone (one real server, driven through /reset and /step as the
gymnasium agent drives it) for the grading: milestones met fully and in part, a minefield zeroing the
reward, malformed tool calls answered with tool errors. Then the whole stack as shipped (the server,
gymnasium_agent in user-simulator mode from configs/toolsandbox.yaml, two openai_model servers in front of
the scripted upstream playing the policy and the user) for how an episode ends: the user's stop marker,
and the agent's max_steps for a policy that never stops."""

import copy
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from nemo_gym.envkit.gymnasium_server import EnvSession, EnvStepResponse
from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    StartedServer,
    function_call_item,
    instance_config,
    message_item,
    read_jsonl,
    response_with,
    run_instance,
    run_resources_server,
)
from resources_servers.toolsandbox.grading import Milestone, Snapshot, evaluate, rows_similarity
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
MAYA, TOM_CELLULAR, DENTIST, PRIYA, GUS = ROWS
STOP = "###STOP###"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "toolsandbox", tmp_path_factory.mktemp("toolsandbox"), domain="agent"
    ) as server:
        yield server


async def play(env: StartedServer, row: dict, *turns: tuple[dict, ...]) -> list[EnvStepResponse]:
    session = EnvSession(env.url)
    reset = await session.reset(row)
    assert reset.observation == row["user_notes"], "the simulated user's notes, hidden from the policy"
    return [await session.step(row, response_with(*items)) for items in turns]


def total(steps: list[EnvStepResponse]) -> float:
    return sum(step.reward for step in steps)


def send(phone: str, content: str, call_id: str = "c1") -> dict:
    return function_call_item(
        "send_message_with_phone_number", {"phone_number": phone, "content": content}, call_id=call_id
    )


async def test_a_milestone_fully_met_earns_1(env):
    steps = await play(
        env,
        MAYA,
        (function_call_item("search_contacts", {"name": "Maya"}),),
        (send("+14155550142", "I'm running 10 minutes late"),),
        (message_item("Sent."),),
    )
    assert [step.reward for step in steps] == [0.0, 1.0, 0.0]
    assert '"person_maya"' in steps[0].info["tool_outputs"][0]["output"]
    last = steps[-1].info
    assert (last["milestone_similarity"], last["minefield_hit"], last["similarity"]) == (1.0, False, 1.0)
    assert last["milestone_mapping"] == [[3, 1.0]], "met from the send on; ties go to the latest snapshot"
    assert not any(step.terminated or step.truncated for step in steps), "only the user ends an episode"


async def test_milestones_partly_met_earn_their_mean_similarity(env):
    steps = await play(
        env,
        TOM_CELLULAR,
        (send("+14155550177", "Happy birthday!", "c1"),),
        (function_call_item("set_device_setting", {"setting": "cellular", "on": True}, call_id="c2"),),
        (send("+14155550177", "Happy bday Tom, have fun", "c3"),),
    )
    assert steps[0].info["tool_outputs"] == [
        {"call_id": "c1", "output": "Error: cannot send: cellular service is turned off"}
    ]
    assert steps[0].reward == 0.0 and steps[1].reward == pytest.approx(0.5), "first milestone of two"
    similarity = steps[-1].info["similarity"]
    assert 0.5 < similarity < 1.0, "the message went to Tom but its words only partly match"
    assert total(steps) == pytest.approx(similarity), "the step rewards add up to the grade"


async def test_milestones_count_only_in_order(env):
    reply = "Priya's number is +12125550199."
    out_of_order = {
        **PRIYA,
        "minefields": [],
        "milestones": [
            {"constraints": [{"kind": "agent_reply", "text": "+12125550199", "measure": "contains"}]},
            {"constraints": [{"kind": "tool_trace", "tool_name": "search_contacts", "arguments": {}}]},
        ],
    }
    steps = await play(
        env, out_of_order, (message_item(reply),), (function_call_item("get_current_timestamp", {}),)
    )
    assert total(steps) == pytest.approx(0.5), "a search before the reply was required, there was none"


async def test_hitting_a_minefield_makes_the_reward_0_whatever_was_met(env):
    steps = await play(
        env,
        PRIYA,
        (message_item("Priya's number is +12125550199."),),
        (send("+12125550199", "hello"),),
    )
    assert steps[0].reward == 1.0, "the milestone is met first"
    assert steps[1].reward == -1.0 and total(steps) == 0.0, "then the forbidden message takes it all back"
    assert (steps[1].info["minefield_hit"], steps[1].info["milestone_similarity"]) == (True, 1.0)


async def test_removing_the_wrong_contact_is_a_minefield(env):
    wrong = function_call_item("remove_contact", {"person_id": "person_gus_r"}, call_id="w")
    right = function_call_item("remove_contact", {"person_id": "person_gus_h"}, call_id="r")
    assert total(await play(env, GUS, (right,))) == 1.0
    assert total(await play(env, GUS, (wrong, right))) == 0.0


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("add_reminder", "{not json", "are not valid JSON"),
        ("add_reminder", "[1, 2]", "must be a JSON object"),
        ("add_reminder", '{"content": "x"}', "missing required argument 'reminder_timestamp'"),
        ("add_reminder", '{"content": 5, "reminder_timestamp": 1}', "argument 'content' must be a string"),
        (
            "add_reminder",
            '{"content": "x", "reminder_timestamp": "9am"}',
            "'reminder_timestamp' must be a number",
        ),
        (
            "add_reminder",
            '{"content": "x", "reminder_timestamp": 1, "when": 2}',
            "unexpected argument(s) when",
        ),
        ("set_device_setting", '{"setting": "wifi", "on": "yes"}', "'on' must be a boolean"),
        ("set_device_setting", '{"setting": "bluetooth", "on": true}', "unknown setting 'bluetooth'"),
        ("remove_contact", '{"person_id": "nobody"}', "no contact entry with person_id 'nobody'"),
        ("launch_rocket", "{}", "unknown tool 'launch_rocket'"),
    ],
)
async def test_malformed_tool_calls_answer_a_tool_error_and_change_nothing(env, name, arguments, error):
    bad = {"type": "function_call", "name": name, "arguments": arguments, "call_id": "bad"}
    search = function_call_item("search_reminder", {}, call_id="s")
    (step,) = await play(env, DENTIST, (bad, search))
    (answer, listing) = step.info["tool_outputs"]
    assert answer["call_id"] == "bad" and answer["output"].startswith("Error: ") and error in answer["output"]
    assert listing == {"call_id": "s", "output": "[]"}, "the world is as it was and the episode goes on"
    assert (step.info["tool_errors"], step.terminated, step.reward) == (1, False, 0.0)


async def test_the_message_cap_truncates_the_episode_and_it_is_still_graded(env):
    row = {**GUS, "max_messages": 4}
    remove = function_call_item("remove_contact", {"person_id": "person_gus_h"})
    steps = await play(env, row, (remove,), (function_call_item("search_contacts", {}),))
    assert [step.truncated for step in steps] == [False, True]
    assert (total(steps), steps[-1].info["message_cap_reached"]) == (1.0, 4)
    status, _ = await EnvSession(env.url).post("/step", {**row, "response": response_with(remove)})
    assert status == 409


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"milestones": []}, "milestones"),
        ({"user_notes": ""}, "user_notes"),
        ({"milestones": [{"constraints": [{"kind": "teleport"}]}]}, "kind"),
    ],
)
async def test_a_row_that_does_not_fit_is_a_422_naming_the_field(env, change, field):
    status, answer = await EnvSession(env.url).post("/reset", {**MAYA, **change})
    assert status == 422 and field in str(answer)


def test_row_sets_of_different_sizes_do_not_match_and_rows_pair_up_best():
    constraint = Milestone.model_validate(
        {"constraints": [{"kind": "state", "database": "contact", "rows": [{"name": "A"}, {"name": "B"}]}]}
    ).constraints[0]
    assert rows_similarity([{"name": "B"}, {"name": "A"}], constraint.rows, constraint) == 1.0
    assert rows_similarity([{"name": "A"}], constraint.rows, constraint) == 0.0
    initial = Snapshot({"contact": [{"name": "A"}, {"name": "B"}]})
    assert evaluate([initial], [Milestone(constraints=[constraint])], []).reward == 1.0


# ---- the shipped stack: how episodes end -------------------------------------------------------------------


class Stack:
    def __init__(self, agent_url: str, upstream: ScriptedUpstream, policy: str, user: str) -> None:
        self.agent_url, self.upstream, self.policy, self.user = agent_url, upstream, policy, user

    def script(self, policy_turns: list[dict], user_turns: list[dict]) -> None:
        """Replace both models' scripts; `requests` then shows only the requests made after this call."""
        self.seen = {}
        for model, turns in ((self.policy, policy_turns), (self.user, user_turns)):
            self.upstream.clear(model)
            self.seen[model] = len(self.upstream.requests(model))
            self.upstream.script(model, turns)

    def requests(self, model: str) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(model)[self.seen[model] :]]

    async def run(self, row: dict) -> dict:
        answer = await request("POST", self.agent_url + "/run", json=row)
        assert answer.status == 200
        return await get_response_json(answer)


def model_block(upstream: ScriptedUpstream, model: str) -> dict:
    return instance_config(
        "responses_api_models",
        "openai_model",
        openai_base_url=upstream.base_url,
        openai_api_key="sk-t",
        openai_model=model,
    )


@pytest.fixture(scope="module")
def stack(
    env: StartedServer, scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("toolsandbox_stack")
    policy, user = fresh_model("policy"), fresh_model("user")
    shipped = yaml.safe_load((FOLDER / "configs" / "toolsandbox.yaml").read_text())["toolsandbox_agent"]
    agent = copy.deepcopy(shipped["responses_api_agents"]["gymnasium_agent"])
    del agent["datasets"]
    agent["user_model_server"]["name"] = "user_model"
    config = {
        "toolsandbox": instance_config("resources_servers", "toolsandbox", domain="agent", port=env.port),
        "policy_model": model_block(scripted_upstream, policy),
        "user_model": model_block(scripted_upstream, user),
    }
    with ExitStack() as servers:
        for name in ("policy_model", "user_model"):
            started = servers.enter_context(run_instance(config, name, workdir))
            (inner,) = config[name]["responses_api_models"].values()
            inner["port"] = started.port
        config["toolsandbox_agent"] = instance_config("responses_api_agents", "gymnasium_agent", **agent)
        started = servers.enter_context(run_instance(config, "toolsandbox_agent", workdir))
        yield Stack(started.url, scripted_upstream, policy, user)


async def test_the_users_stop_marker_ends_the_episode_and_it_is_graded(stack):
    stack.script(
        [
            {
                "output": [
                    function_call(
                        "send_message_with_phone_number",
                        {"phone_number": "+14155550142", "content": "I'm running 10 minutes late"},
                    )
                ]
            },
            {"output": [assistant_message("Should I also tell Tom?")]},
            {"output": [assistant_message("Done, I texted Maya.")]},
        ],
        [
            {"output": [assistant_message("No, just Maya.")]},
            {"output": [assistant_message(f"Thanks! {STOP}")]},
        ],
    )
    result = await stack.run(MAYA)
    assert (result["terminated"], result["truncated"], result["info"]["user_stopped"]) == (True, False, True)
    assert result["reward"] == 1.0
    users = [item["content"] for item in result["response"]["output"] if item.get("role") == "user"]
    assert users == ["No, just Maya.", f"Thanks! {STOP}"], "the simulated user's turns are in the rollout"
    assert MAYA["user_notes"] in str(stack.requests(stack.user)[-1]["input"]), (
        "the notes reach the user model"
    )
    assert all(MAYA["user_notes"] not in str(body) for body in stack.requests(stack.policy))


async def test_a_policy_that_never_finishes_is_cut_off_at_max_steps_and_graded(stack):
    remove = function_call("remove_contact", {"person_id": "person_gus_h"})
    stack.script(
        [
            {"output": [remove]},
            {"output": [function_call("search_contacts", {"name": "Gus"})], "repeat": 100},
        ],
        [],
    )
    result = await stack.run(GUS)
    assert (result["terminated"], result["truncated"]) == (False, True)
    assert result["reward"] == 1.0, "the removal it made before looping still counts"
    calls = [item for item in result["response"]["output"] if item.get("type") == "function_call"]
    shipped = yaml.safe_load((FOLDER / "configs" / "toolsandbox.yaml").read_text())
    assert len(calls) == shipped["toolsandbox_agent"]["responses_api_agents"]["gymnasium_agent"]["max_steps"]
    assert stack.requests(stack.user) == [], "the user never spoke: the policy only used tools"


async def test_a_grade_past_its_deadline_is_marked_not_a_silent_0(tmp_path):
    with run_resources_server("toolsandbox", tmp_path, domain="agent", grading_timeout_s=1e-9) as hurried:
        session = EnvSession(hurried.url)
        await session.reset(MAYA)
        step = await session.step(MAYA, response_with(send("+14155550142", "I'm running 10 minutes late")))
        answer = await request("POST", hurried.url + "/verify", json={**MAYA, "response": response_with()})
        verdict = await get_response_json(answer)
    assert (answer.status, verdict["reward"], verdict["mask_sample"]) == (200, 0.0, True), (
        "marked in /verify too"
    )
    assert (step.reward, step.truncated, step.info["mask_sample"]) == (0.0, True, True)
    assert "grading did not finish within" in step.info["grading_failure"]
    assert step.info["tool_outputs"][0]["output"] == '"message_0002"', "the tool call itself was answered"


async def test_verify_grades_a_recorded_conversation_as_its_steps_did(env):
    """`/verify` replays a whole conversation on a fresh world: each recorded rollout (graded step by step
    when it was recorded) gets the same reward again, with no episode open."""
    for rollout in read_jsonl(FOLDER / "data" / "example_rollouts.jsonl"):
        row = ROWS[rollout["_ng_task_index"]]
        answer = await request("POST", env.url + "/verify", json={**row, "response": rollout["response"]})
        verdict = await get_response_json(answer)
        assert answer.status == 200, verdict
        assert verdict["reward"] == pytest.approx(rollout["reward"]), row["scenario"]
        assert (
            verdict["scenario"] == row["scenario"] and verdict["response"]["id"] == rollout["response"]["id"]
        )


async def test_verify_refuses_a_row_without_its_task_fields(env):
    row = {key: value for key, value in MAYA.items() if key != "milestones"}
    answer = await request(
        "POST", env.url + "/verify", json={**row, "response": response_with(message_item("Hi"))}
    )
    assert answer.status == 422 and "milestones" in str(await get_response_json(answer))
