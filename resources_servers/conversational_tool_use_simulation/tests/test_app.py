"""conversational_tool_use_simulation over HTTP: the environment, an openai_model per role (policy,
simulated user, judge + tool simulator) and the shipped gymnasium agent in user-simulator mode, each a real
server process; the scripted upstream plays every model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from nemo_gym.envkit.gymnasium_server import EnvSession
from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import read_jsonl, response_with
from resources_servers.conversational_tool_use_simulation.simulation import parse_tool_result, parse_verdict
from tests.helpers import instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

FOLDER = Path(__file__).resolve().parents[1]
NAME = "conversational_tool_use_simulation"
AGENT = f"{NAME}_gymnasium_agent"
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
BIKE, LIBRARY = ROWS[0], ROWS[1]
MAX_AGENT_STEPS = 3
STOP = "###STOP###"
MEMBER = '{"found": true, "name": "Lee Varga", "active_rental_id": "R-880"}'


@dataclass
class Stack:
    env_url: str
    agent_url: str
    upstream: ScriptedUpstream
    models: dict[str, str]
    seen: dict[str, int] = field(default_factory=dict)

    def script(self, role: str, *answers: str | dict) -> None:
        """Replace a role's script (texts become assistant messages); `requests` then shows only later ones."""
        model = self.models[role]
        self.upstream.clear(model)
        self.seen[model] = len(self.upstream.requests(model))
        steps = [_as_step(a) for a in answers]
        self.upstream.script(model, steps)

    def requests(self, role: str) -> list[dict]:
        model = self.models[role]
        return [entry["body"] for entry in self.upstream.requests(model)[self.seen.get(model, 0) :]]


def _as_step(answer: str | dict) -> dict:
    """A text or an output item becomes an answer with that output; any other dict is a raw step."""
    if isinstance(answer, str):
        return {"output": [assistant_message(answer)]}
    return {"output": [answer]} if "type" in answer else answer


def model_instance(upstream: ScriptedUpstream, model: str) -> dict:
    return instance_config(
        "responses_api_models",
        "openai_model",
        openai_base_url=upstream.base_url,
        openai_api_key="sk-cts-test",
        openai_model=model,
        max_retries=1,
    )


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp(NAME)
    models = {role: fresh_model(role) for role in ("policy", "user", "judge")}
    config: dict[str, Any] = {
        f"{role}_model": model_instance(scripted_upstream, model) for role, model in models.items()
    }
    judge_ref = {"type": "responses_api_models", "name": "judge_model"}
    env = dict(SHIPPED[NAME]["resources_servers"][NAME])
    env.update(
        judge_model_server=judge_ref,
        tool_simulator_model_server=judge_ref,
        max_agent_steps=MAX_AGENT_STEPS,
        judge_backoff_base_s=0.01,
        judge_backoff_max_s=0.02,
        judge_circuit_breaker_failures=None,
    )
    agent = dict(SHIPPED[AGENT]["responses_api_agents"]["gymnasium_agent"])
    del agent["datasets"]
    agent.update(
        max_steps=MAX_AGENT_STEPS + 2, user_model_server={**agent["user_model_server"], "name": "user_model"}
    )
    with ExitStack() as servers:
        for role in models:
            started = servers.enter_context(run_instance(config, f"{role}_model", workdir))
            config[f"{role}_model"]["responses_api_models"]["openai_model"]["port"] = started.port
        config[NAME] = instance_config("resources_servers", NAME, **env)
        env_server = servers.enter_context(run_instance(config, NAME, workdir))
        config[NAME]["resources_servers"][NAME]["port"] = env_server.port
        config[AGENT] = instance_config("responses_api_agents", "gymnasium_agent", **agent)
        agent_server = servers.enter_context(run_instance(config, AGENT, workdir))
        yield Stack(env_server.url, agent_server.url, scripted_upstream, models)


async def rollout(stack: Stack, row: dict) -> dict:
    answer = await request("POST", stack.agent_url + "/run", json=row)
    result = await get_response_json(answer)
    assert answer.status == 200, result
    return result


def texts(items: list[dict]) -> list[str]:
    return [
        item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
        for item in items
        if item.get("type", "message") == "message"
    ]


# ---- whole episodes through the agent -----------------------------------------------------------------------


async def test_the_simulated_user_stops_and_the_trajectory_is_graded(stack):
    stack.script("user", "Hi, member M-5521 here, one more hour on my bike please.", f"Thanks! {STOP}")
    stack.script(
        "policy",
        function_call("lookup_member", {"member_id": "M-5521"}),
        assistant_message("Done, the rental now ends at 18:00."),
    )
    stack.script("judge", MEMBER, "All good.\nVERDICT: PASS")
    result = await rollout(stack, BIKE)
    assert (result["reward"], result["terminated"], result["truncated"]) == (1.0, True, False)
    info = result["info"]
    assert (info["user_stopped"], info["verdict"], info["judge_failure"], info["turns"]) == (
        True,
        "pass",
        None,
        2,
    )
    assert result["responses_create_params"]["input"][-1]["content"].startswith("Hi, member M-5521")
    assert texts(result["response"]["output"]) == [
        "Done, the rental now ends at 18:00.",
        f"Thanks! {STOP}",
    ], "the simulated user's turns are part of the recorded trajectory"
    outputs = [item for item in result["response"]["output"] if item["type"] == "function_call_output"]
    assert [orjson.loads(item["output"]) for item in outputs] == [orjson.loads(MEMBER)]
    user_brief = stack.requests("user")[0]["input"][0]["content"]
    assert "M-5521" in user_brief and STOP in user_brief, "the reset observation is the user's private brief"
    assert "not overdue" not in orjson.dumps(stack.requests("policy")[0]["input"]).decode()
    judge_calls = stack.requests("judge")
    assert len(judge_calls) == 2, "the tool turn is simulated, the message is graded once"
    simulator_prompt, final_prompt = (call["input"][0]["content"] for call in judge_calls)
    assert "Tool: lookup_member" in simulator_prompt and '{"member_id": "M-5521"}' in simulator_prompt
    assert "AGENT MESSAGE: Done, the rental now ends at 18:00." in final_prompt
    assert "TOOL CALL lookup_member" in final_prompt and "R-880" in final_prompt


async def test_a_text_turn_that_does_not_satisfy_the_user_is_graded_and_the_user_answers(stack):
    stack.script("user", "Hi, one more hour on my bike please.", "M-5521", f"Bye {STOP}")
    stack.script("policy", assistant_message("What is your member ID?"), assistant_message("I cannot help."))
    stack.script("judge", "Not done yet.\nVERDICT: FAIL", "Refused without reason.\nVERDICT: FAIL")
    result = await rollout(stack, BIKE)
    assert (result["reward"], result["terminated"], result["info"]["verdict"]) == (0.0, True, "fail")
    assert texts(result["response"]["output"]) == [
        "What is your member ID?",
        "M-5521",
        "I cannot help.",
        f"Bye {STOP}",
    ]


async def test_a_policy_that_never_finishes_is_cut_off_at_max_agent_steps_and_graded(stack):
    stack.script("user", "Hi, one more hour on my bike please.")
    stack.script("policy", *(function_call("lookup_member", {"member_id": "M-5521"}) for _ in range(5)))
    stack.script("judge", MEMBER, MEMBER, MEMBER, "It never answered the customer.\nVERDICT: FAIL")
    result = await rollout(stack, BIKE)
    assert (result["reward"], result["terminated"], result["truncated"]) == (0.0, False, True)
    info = result["info"]
    assert (info["verdict"], info["turns"], info["graded_reward"]) == ("fail", MAX_AGENT_STEPS, 0.0)
    assert len(stack.requests("policy")) == MAX_AGENT_STEPS, "the environment, not the agent's cap, ended it"
    assert stack.requests("judge")[-1]["input"][0]["content"].count("TOOL CALL lookup_member") == 3


# ---- steps against the environment directly -------------------------------------------------------------------


async def start(stack: Stack, row: dict = LIBRARY) -> EnvSession:
    session = EnvSession(stack.env_url)
    reset = await session.reset(row)
    assert "2207-118" in reset.observation
    return session


async def step(session: EnvSession, *items: dict, row: dict = LIBRARY) -> dict:
    answer = await session.step(row, response_with(*items))
    return answer.model_dump()


@pytest.mark.parametrize(
    ("judge_text", "reward", "verdict"),
    [
        ("Fine.\nVERDICT: PASS", 1.0, "pass"),
        ("Skipped the lookup.\nVERDICT: FAIL", 0.0, "fail"),
        ("**VERDICT: pass**", 1.0, "pass"),
    ],
)
async def test_the_judge_verdict_is_the_reward(stack, judge_text, reward, verdict):
    session = await start(stack)
    stack.script("judge", judge_text)
    answer = await step(session, assistant_message("Your book is renewed."))
    assert (answer["reward"], answer["info"]["verdict"], answer["info"]["judge_failure"]) == (
        reward,
        verdict,
        None,
    )
    assert answer["info"]["judge_output"] == judge_text


async def test_a_later_failing_grade_takes_back_the_earlier_reward(stack):
    session = await start(stack)
    stack.script("judge", "VERDICT: PASS", "VERDICT: FAIL")
    first = await step(session, assistant_message("Renewed."))
    second = await step(session, assistant_message("Actually I also cancelled your card."))
    assert (first["reward"], second["reward"], second["info"]["graded_reward"]) == (1.0, -1.0, 0.0)


async def test_a_judge_answer_without_a_verdict_is_a_marked_failure(stack):
    session = await start(stack)
    stack.script("judge", "The agent seems helpful.")
    answer = await step(session, assistant_message("Renewed."))
    failure = answer["info"]["judge_failure"]
    assert (answer["reward"], answer["info"]["verdict"], failure["kind"]) == (0.0, None, "bad_response")
    assert "VERDICT" in failure["message"]


async def test_a_failing_judge_is_marked_not_graded(stack):
    session = await start(stack)
    stack.script("judge", *({"status": 500} for _ in range(3)))
    answer = await step(session, assistant_message("Renewed."))
    failure = answer["info"]["judge_failure"]
    assert (answer["reward"], failure["kind"], failure["attempts"]) == (0.0, "upstream_error", 3)


async def test_a_malformed_simulated_result_is_a_clear_tool_error(stack):
    session = await start(stack)
    stack.script("judge", "Sure, the patron exists and has two loans.")
    answer = await step(session, function_call("find_patron", {"card_number": "2207-118"}, call_id="c1"))
    assert answer["reward"] == 0.0 and not answer["terminated"]
    (output,) = answer["info"]["tool_outputs"]
    assert output["call_id"] == "c1"
    assert "tool find_patron failed" in orjson.loads(output["output"])["error"]
    assert answer["info"]["tool_simulator_failures"][0]["kind"] == "malformed"
    assert len(stack.requests("judge")) == 1, "a tool turn is not graded"


async def test_an_unreachable_simulator_is_a_tool_error_with_its_failure_recorded(stack):
    session = await start(stack)
    stack.script("judge", *({"status": 503} for _ in range(3)))
    answer = await step(session, function_call("find_patron", {"card_number": "2207-118"}))
    assert "unavailable" in orjson.loads(answer["info"]["tool_outputs"][0]["output"])["error"]
    assert answer["info"]["tool_simulator_failures"][0]["kind"] == "upstream_error"


async def test_results_must_fit_the_returns_schema(stack):
    session = await start(stack)
    stack.script("judge", '{"loans": []}')
    answer = await step(session, function_call("find_patron", {"card_number": "2207-118"}))
    assert "returns schema" in orjson.loads(answer["info"]["tool_outputs"][0]["output"])["error"]


@pytest.mark.parametrize(
    ("name", "arguments", "problem"),
    [
        ("delete_everything", {}, "unknown tool"),
        ("renew_loan", {"loan": "L-42"}, "do not fit its parameters"),
    ],
)
async def test_bad_calls_are_refused_without_asking_the_simulator(stack, name, arguments, problem):
    session = await start(stack)
    stack.script("judge")
    answer = await step(session, function_call(name, arguments))
    assert problem in orjson.loads(answer["info"]["tool_outputs"][0]["output"])["error"]
    assert stack.requests("judge") == []


async def test_session_state_keeps_earlier_results_for_the_simulator(stack):
    session = await start(stack)
    stack.script(
        "judge",
        '{"found": true, "loans": [{"loan_id": "L-42"}]}',
        '{"renewed": true, "due_date": "2026-12-20"}',
    )
    await step(session, function_call("find_patron", {"card_number": "2207-118"}))
    await step(session, function_call("renew_loan", {"loan_id": "L-42"}))
    second_prompt = stack.requests("judge")[1]["input"][0]["content"]
    assert (
        'find_patron({"card_number":"2207-118"}) -> {"found": true, "loans": [{"loan_id": "L-42"}]}'
        in second_prompt
    )
    other = await start(stack)
    stack.script("judge", '{"renewed": false, "reason": "on hold"}')
    await step(other, function_call("renew_loan", {"loan_id": "L-42"}))
    assert stack.requests("judge")[0]["input"][0]["content"].endswith("oldest first:\n(none)"), (
        "sessions do not share state"
    )


async def test_a_row_without_tools_or_scenario_is_refused(stack):
    status, body = await EnvSession(stack.env_url).post("/reset", {**LIBRARY, "customer_scenario": None})
    assert status == 422, body


# ---- reading answers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"found": true}', ({"found": True}, False)),
        ('```json\n{"found": true}\n```', ({"found": True}, False)),
        ('{"found": true,}', ({"found": True}, True)),
        ("no json here", (None, True)),
        ("[1, 2]", (None, False)),
    ],
)
def test_tool_results_are_json_objects_mended_when_close(text, expected):
    from resources_servers.conversational_tool_use_simulation.simulation import ToolSpec

    result, repaired, problem = parse_tool_result(ToolSpec(name="t"), text)
    assert (result, repaired) == expected
    assert (problem is None) == (result is not None)


def test_the_last_verdict_line_counts():
    assert parse_verdict("VERDICT: PASS\n...on reflection\nVERDICT: FAIL") == "fail"
    assert parse_verdict("pass") is None


def test_recorded_rollouts_cover_both_verdicts_and_carry_every_simulated_turn():
    rollouts = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
    assert sorted(rollout["reward"] for rollout in rollouts) == [0.0, 0.0, 1.0, 1.0, 1.0]
    for rollout in rollouts:
        assert rollout["info"]["user_stopped"] and rollout["info"]["judge_failure"] is None
        user_calls = rollout["user_model_calls"]
        assert all("playing the user" in orjson.dumps(call).decode() for call in user_calls)
        assert rollout["info"]["judge_evaluations"], "the tool simulator's and judge's calls, for replay"
        user_turns = [item for item in rollout["response"]["output"] if item.get("role") == "user"]
        assert len(user_calls) == 1 + len(user_turns), "the opening message and every later user turn"
