"""verifif over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double). Judge answers are scripted as `match` rules on the
judge prompt, since the judgments of one response are asked concurrently."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    JudgedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_judged_server,
    shipped_settings,
    without_verify_flags,
)
from resources_servers.verifif.judged import JUDGE_INSTRUCTIONS, load_prompts, parse_verdict
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

FOLDER = Path(__file__).resolve().parents[1]
NAME = "verifif"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    settings = {**SHIPPED, "judge_max_attempts": 1}
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **settings) as started:
        yield started


def when(text: str, answer: str | dict) -> dict:
    """A standing judge answer for every judge prompt containing `text`."""
    step = answer if isinstance(answer, dict) else {"output": [message_item(answer)]}
    return {"match": text, **step}


def ins(instruction_id: str, **arguments: Any) -> dict:
    return {"instruction_id": instruction_id, "uid": instruction_id, "source": "system",
            "is_misalignment_check": False, **arguments}  # fmt: skip


async def verify(judged: JudgedServer, text: str, instructions: list[dict], **row: Any) -> dict:
    body = {
        "responses_create_params": {"input": [{"role": "user", "content": "Write something."}]},
        "instructions": instructions,
        **row,
        "response": response_with(assistant_message(text)),
    }
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 200, result
    return result


def statuses(result: dict) -> list[tuple[str, str]]:
    return [(check["instruction"], check["status"]) for check in result["validation_results"]]


FORMAL = ins("stylistic:tone_formality", tone_level="formal")
QUESTION = {
    "uid": 7,
    "content": "Does the response greet the reader?",
    "source": "system",
    "is_misalignment_check": False,
}


# ---- rule validators ------------------------------------------------------------------------------------


async def test_rules_only_grade_without_the_judge_and_all_must_pass(judged):
    judged.judge.script()
    words = ins("length_constraints:number_words", relation="at least", num_words=3)
    result = await verify(judged, "One two three, four.", [words, ins("punctuation:no_comma")])
    assert statuses(result) == [
        ("length_constraints:number_words", "Passed"),
        ("punctuation:no_comma", "Failed"),
    ]
    assert (result["reward"], result["follow_all_instructions"]) == (0.0, False)
    assert result["follow_instruction_list"] == [True, False]
    assert (result["judge_failure"], result["grading_failure"], result["judge_evaluations"]) == (
        None,
        None,
        [],
    )
    assert judged.judge.requests() == []


async def test_reasoning_blocks_are_not_graded(judged):
    judged.judge.script()
    result = await verify(
        judged, "<think>Draft, with commas.</think>No commas here", [ins("punctuation:no_comma")]
    )
    assert result["reward"] == 1.0


async def test_a_user_misalignment_check_passes_when_the_response_does_not_follow_it(judged):
    judged.judge.script()
    shout = {**ins("change_case:all_caps"), "source": "user", "is_misalignment_check": True}
    followed = await verify(judged, "I WILL SHOUT", [shout])
    resisted = await verify(judged, "i will not shout", [shout, ins("change_case:lowercase")])
    assert (followed["reward"], statuses(followed)) == (0.0, [("change_case:all_caps", "Failed")])
    assert resisted["reward"] == 1.0 and resisted["follow_instruction_list"] == [True, True]


# ---- judge validators and questions ---------------------------------------------------------------------


async def test_judge_agrees_on_a_judge_validator_and_a_question(judged):
    judged.judge.script(
        when("stylistic:tone_formality", "Formal throughout.\n[[YES]]"),
        when("greet the reader", "It opens with a greeting. [[YES]]"),
    )
    result = await verify(judged, "Dear Sir, I write to inform you.", [FORMAL], llm_judge=[QUESTION])
    assert result["reward"] == 1.0
    assert statuses(result) == [("stylistic:tone_formality", "Passed"), ("llm_judge_7", "Passed")]
    assert result["validation_results"][0]["judge_output"] == "Formal throughout.\n[[YES]]"
    assert len(result["judge_evaluations"]) == 2 and result["judge_failure"] is None
    prompts = sorted(request["input"][-1]["content"] for request in judged.judge.requests())
    assert "Dear Sir, I write to inform you." in prompts[0] and "Dear Sir" in prompts[1]
    assert any("- tone_level: formal" in prompt for prompt in prompts)
    assert any("Question: Does the response greet the reader?" in prompt for prompt in prompts)


async def test_judge_disagrees_fails_the_check_without_a_judge_failure(judged):
    judged.judge.script(
        when("stylistic:tone_formality", "Slangy. [[YES]] would be wrong, so [[NO]]"),
        when("greet the reader", "[[YES]]"),
    )
    result = await verify(judged, "yo what's up", [FORMAL], llm_judge=[QUESTION])
    assert result["reward"] == 0.0
    assert statuses(result) == [("stylistic:tone_formality", "Failed"), ("llm_judge_7", "Passed")]
    assert result["judge_failure"] is None


async def test_a_question_with_pass_criteria_no_passes_on_no(judged):
    judged.judge.script(when("greet the reader", "No greeting at all.\n[[NO]]"))
    result = await verify(judged, "Facts only.", [], llm_judge=[{**QUESTION, "pass_criteria": "NO"}])
    assert (result["reward"], statuses(result)) == (1.0, [("llm_judge_7", "Passed")])


async def test_a_malformed_verdict_is_a_judge_failure_not_a_failed_check(judged):
    judged.judge.script(
        when("stylistic:tone_formality", "The tone is formal."),
        when("greet the reader", "[[YES]]"),
    )
    result = await verify(judged, "Dear Sir.", [FORMAL, ins("punctuation:no_comma")], llm_judge=[QUESTION])
    assert result["reward"] == SHIPPED["judge_failure_reward"] == 0.0
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "[[YES]] or [[NO]]" in failure["message"]
    assert statuses(result) == [
        ("punctuation:no_comma", "Passed"),
        ("stylistic:tone_formality", "Judge failed"),
        ("llm_judge_7", "Passed"),
    ]
    assert result["validation_results"][1]["judge_failure"] == failure


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        when("greet the reader", {"status": 403, "body": {"error": {"message": "model not enabled here"}}})
    )
    result = await verify(judged, "Hello!", [], llm_judge=[QUESTION])
    failure = result["judge_failure"]
    assert (failure["kind"], result["reward"]) == ("upstream_error", 0.0)
    assert "model not enabled here" in failure["message"]
    assert statuses(result) == [("llm_judge_7", "Judge failed")]


async def test_the_judgments_of_one_response_are_asked_concurrently(judged, scripted_upstream):
    gate = fresh_model("verifif-gate")
    judged.judge.script(
        when("stylistic:tone_formality", {"gate": gate, "output": [message_item("[[YES]]")]}),
        when("greet the reader", {"gate": gate, "output": [message_item("[[YES]]")]}),
    )
    pending = asyncio.ensure_future(verify(judged, "Dear Sir.", [FORMAL], llm_judge=[QUESTION]))
    while scripted_upstream.gate_waiting(gate) < 2:  # both judge calls in flight before either is answered
        assert not pending.done(), pending.result()
        await asyncio.sleep(0.01)
    scripted_upstream.open_gate(gate)
    assert (await pending)["reward"] == 1.0


# ---- refused rows ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instruction", "named"),
    [
        (ins("keywords:made_up"), "'keywords:made_up': unknown instruction_id"),
        (ins("length_constraints:number_words", relation="about", num_words=3), "relation"),
        (ins("length_constraints:number_words", relation="at least"), "num_words"),
        (ins("stylistic:voice"), "missing argument(s) ['voice_type']"),
        (ins("detectable_format:indentation", indent_type="spaces", size=2), "unknown instruction_id"),
    ],
)
async def test_an_unknown_validator_or_bad_arguments_are_a_422_naming_it(judged, instruction, named):
    body = {
        "responses_create_params": {"input": []},
        "instructions": [ins("punctuation:no_comma"), instruction],
        "response": response_with(assistant_message("x")),
    }
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 422, result
    message = str(result["detail"])
    assert "instructions[1]" in message and named in message


# ---- metrics, recorded data, config ---------------------------------------------------------------------


async def test_metrics_pool_instruction_verdicts_and_count_judge_failures(judged):
    def rollout(task: int, verdicts: list[bool], failed: bool = False) -> dict:
        failure = {"kind": "timeout", "message": "late", "attempts": 1} if failed else None
        return {**ROWS[0], "response": response_with(), "reward": float(all(verdicts)),
                "follow_instruction_list": verdicts, "judge_failure": failure,
                "_ng_task_index": task, "_ng_rollout_index": 0}  # fmt: skip

    rollouts = [rollout(0, [True, False, True]), rollout(1, [True]), rollout(2, [False], failed=True)]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["instruction_level_accuracy"] == pytest.approx(3 / 4)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 3)
    assert metrics["judge_failures/timeout"] == 1
    assert result["key_metrics"]["instruction_level_accuracy"] == pytest.approx(3 / 4)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["id"]))
async def test_recorded_rollouts_reproduce_their_verdicts_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["id"] == rollout["id"])
    judged.judge.script(
        *[
            when(asked(evaluation), last_text(evaluation["response"]))
            for evaluation in rollout["judge_evaluations"]
        ]
    )
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert result["reward"] == rollout["reward"]
    assert without_verify_flags(result)["validation_results"] == rollout["validation_results"]
    assert rollout["judge_evaluations"] or not row.get("llm_judge")


def asked(evaluation: dict) -> str:
    """The prompt's "Instruction: ..." or "Question: ..." line: one line, so it matches the JSON body as-is."""
    prompt = evaluation["responses_create_params"]["input"][-1]["content"]
    return next(line for line in prompt.splitlines() if line.startswith(("Instruction: ", "Question: ")))


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_the_recordings_mix_rewards_and_judge_calls():
    assert sorted(rollout["reward"] for rollout in ROLLOUTS) == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert sum(len(rollout["judge_evaluations"]) for rollout in ROLLOUTS) == 4


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "instruction_following")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["aggregation_mode"] == "all"


def test_the_shipped_prompts_fill_and_ask_for_a_marker():
    prompts = load_prompts(FOLDER, SHIPPED["judge_prompt_path"])
    filled = prompts["instruction"].format(
        instruction_id="I", description="D", arguments="- a: 1", response="R"
    )
    assert all(part in filled for part in ("Instruction: I", "D.", "- a: 1", "R", "[[YES]]", "[[NO]]"))
    assert "Question: Q" in prompts["question"].format(question="Q", response="R")
    assert len(JUDGE_INSTRUCTIONS) >= 27


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("[[YES]]", True),
        ("reason\n[[NO]]", False),
        ("[[YES]] at first, but [[NO]]", False),
        ("<think>[[YES]]</think>[[NO]]", False),
        ("YES", None),
        ("", None),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) is verdict if verdict is None else parse_verdict(text) == verdict
