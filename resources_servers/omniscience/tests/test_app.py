"""omniscience over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    JudgedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    response_with,
    run_judged_server,
    shipped_settings,
    without_verify_flags,
)
from resources_servers.omniscience.app import OmniscienceConfig
from resources_servers.omniscience.omniscience_grading import (
    checked_template,
    final_answer,
    load_prompt,
    parse_grade,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "omniscience"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[0]  # chemical symbol of tungsten: W


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **SHIPPED) as started:
        yield started


async def verify(judged: JudgedServer, *items: dict, **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(*items)}
    )
    assert status == 200, result
    return result


# ---- the four grades ------------------------------------------------------------------------------------


async def test_the_judge_agreeing_earns_1_and_the_row_is_echoed(judged):
    judged.judge.script("A")
    result = await verify(judged, assistant_message("The symbol is W."))
    assert (result["verdict"], result["reward"], result["judge_output"]) == ("correct", 1.0, "A")
    assert (result["extracted_answer"], result["expected_answer"]) == ("The symbol is W.", "W")
    assert (result["is_correct"], result["is_incorrect"], result["is_hallucination"]) == (1.0, 0.0, 0.0)
    assert (result["omniscience_index"], result["judge_failure"]) == (1.0, None)
    assert (result["id"], result["domain"], result["topic"]) == (ROW["id"], ROW["domain"], "Chemistry")


async def test_the_judge_disagreeing_earns_0_and_is_a_hallucination(judged):
    judged.judge.script("B")
    result = await verify(judged, assistant_message("Tu"))
    assert (result["verdict"], result["reward"], result["is_incorrect"]) == ("incorrect", 0.0, 1.0)
    assert (result["omniscience_index"], result["is_hallucination"], result["judge_failure"]) == (
        -1.0, 1.0, None,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("judge_text", "verdict", "flag"),
    [
        ("C", "partial", "is_partial"),
        ("PARTIAL_ANSWER", "partial", "is_partial"),
        ("D", "not_attempted", "is_not_attempted"),
        ("NOT_ATTEMPTED", "not_attempted", "is_not_attempted"),
        ("**B**", "incorrect", "is_incorrect"),
        ("A: CORRECT", "correct", "is_correct"),
        ("The answer names another element.\nB", "incorrect", "is_incorrect"),
    ],
)
async def test_each_grade_sets_its_flag_and_only_correct_earns_reward(judged, judge_text, verdict, flag):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("Probably W or Wo"))
    assert (result["verdict"], result["judge_failure"], result[flag]) == (verdict, None, 1.0)
    assert result["reward"] == (1.0 if verdict == "correct" else 0.0)
    if verdict in ("partial", "not_attempted"):
        assert (result["omniscience_index"], result["is_hallucination"]) == (0.0, 0.0)


@pytest.mark.parametrize(
    "items",
    [(), (reasoning("W"),), (assistant_message("<think>It is W, I think, but"),)],
    ids=["empty_output", "no_message", "unfinished_thinking"],
)
async def test_no_answer_is_not_attempted_without_a_judge_call(judged, items):
    judged.judge.script("A")
    result = await verify(judged, *items)
    assert (result["verdict"], result["reward"], result["extracted_answer"]) == ("not_attempted", 0.0, None)
    assert (result["is_not_attempted"], result["omniscience_index"]) == (1.0, 0.0)
    assert judged.judge.requests() == []


async def test_the_judge_sees_question_reference_and_the_answer_without_thinking(judged):
    judged.judge.script("A")
    await verify(judged, assistant_message("<think>Wolfram, so maybe Wo.</think>\nW"))
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert f"Question: {ROW['question']}\nReference answer: W\nAnswer to grade: W\n" in prompt
    assert "Wolfram" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 64, 1.0)


# ---- the judge failing ----------------------------------------------------------------------------------


async def test_a_malformed_verdict_is_a_judge_failure_not_a_wrong_answer(judged):
    judged.judge.script("The answer matches the reference.")
    result = await verify(judged, assistant_message("W"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == (None, 0.0, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no grade" in failure["message"]
    assert (result["is_correct"], result["is_incorrect"], result["is_hallucination"]) == (0.0, 0.0, 0.0)


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged, assistant_message("W"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled here" in failure["message"]
    assert (result["verdict"], result["reward"]) == (None, 0.0)


async def test_a_mistyped_field_is_a_422_naming_it(judged):
    status, result = await post_json(
        judged.url + "/verify", {**ROW, "expected_answer": 74, "response": response_with()}
    )
    assert status == 422
    assert ["body", "expected_answer"] in [error["loc"] for error in result["detail"]]


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, verdict: str | None) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if verdict is None else None
    return {
        **ROW,
        "response": response_with(),
        "reward": float(verdict == "correct"),
        "verdict": verdict,
        "extracted_answer": verdict,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_each_grade_the_index_the_hallucination_rate_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, "correct"),
        graded(0, 1, "incorrect"),
        graded(1, 0, "partial"),
        graded(1, 1, "correct"),
        graded(2, 0, None),  # the judgment failed: left out of the grade metrics
        graded(2, 1, "not_attempted"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    family = "pass@1[avg-of-2]"
    assert metrics[f"{family}/correct"] == pytest.approx(100 * (0.5 + 0.5 + 0) / 3)
    assert metrics[f"{family}/incorrect"] == pytest.approx(100 * 0.5 / 3)
    assert metrics[f"{family}/partial"] == pytest.approx(100 * 0.5 / 3)
    assert metrics[f"{family}/not_attempted"] == pytest.approx(100 * 1 / 3)
    assert metrics[f"{family}/reward"] == metrics[f"{family}/correct"]
    assert metrics[f"{family}/omniscience_index"] == pytest.approx(100 * (1 - 0.5) / 3)
    assert metrics[f"{family}/hallucination_rate"] == pytest.approx(100 * 0.5 / (0.5 + 0.5 + 1))
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 6)
    assert metrics["judge_failures/timeout"] == 1
    assert key[f"{family}/omniscience_index"] == metrics[f"{family}/omniscience_index"]
    assert key["judge_failure_rate"] == pytest.approx(1 / 6)


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["id"])
async def test_recorded_rollouts_reproduce_their_verdict_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["id"] == rollout["id"])
    judged.judge.script(*([rollout["judge_output"]] if rollout["judge_output"] is not None else []))
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (result["verdict"], result["reward"]) == (rollout["verdict"], rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (the ids and times of a
    judge's response are new on every call)."""
    evaluations = [
        (evaluation["responses_create_params"], evaluation["response"]["output"][-1]["content"][-1]["text"])
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def test_the_recordings_cover_every_grade():
    assert sorted(rollout["verdict"] for rollout in ROLLOUTS) == [
        "correct", "correct", "incorrect", "not_attempted", "partial",
    ]  # fmt: skip
    assert all(len(rollout["judge_evaluations"]) == 1 for rollout in ROLLOUTS)


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_prompt_path"] == "prompts/judge.yaml"


def base_config(**changes: Any) -> dict:
    return {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED, **changes}


def test_chat_completions_for_the_judge_is_refused_naming_the_key():
    with pytest.raises(ValidationError, match="use_chat_completions_for_judge"):
        OmniscienceConfig.model_validate(base_config(use_chat_completions_for_judge=True))


def test_a_template_with_an_unknown_placeholder_is_refused():
    template = checked_template("Q={question} R={expected_answer} G={generation}", "here")
    assert template.format(question="q", expected_answer="r", generation="g") == "Q=q R=r G=g"
    with pytest.raises(ConfigError, match="here"):
        checked_template("Q={question} T={target}", "here")


@pytest.mark.parametrize(
    ("content", "problem"),
    [("system: hi", "`user` prompt"), ("user: 'x {answer}'", "answer"), ("[", "not YAML")],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_prompt(tmp_path, "judge.yaml")


def test_the_shipped_prompt_asks_for_a_letter_grade():
    filled = load_prompt(FOLDER, SHIPPED["judge_prompt_path"]).format(
        question="Q?", expected_answer="R", generation="G"
    )
    assert "Question: Q?\nReference answer: R\nAnswer to grade: G" in filled
    assert all(
        grade in filled for grade in ("A: CORRECT", "B: INCORRECT", "C: PARTIAL_ANSWER", "D: NOT_ATTEMPTED")
    )


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("W", "W"),
        ("<think>maybe Tu</think> W", "W"),
        ("reasoning the template opened</thinking>\nW", "W"),
        ("<think>still thinking about Tu", ""),
        ("  ", ""),
    ],
)
def test_the_answer_is_the_reply_without_reasoning(text, answer):
    assert final_answer(text) == answer


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("A", "correct"),
        ("D", "not_attempted"),
        ("(C)", "partial"),
        ("Reasoning.\n**B**", "incorrect"),
        ("d", None),
        ("", None),
    ],
)
def test_parse_grade(text, grade):
    assert parse_grade(text) == grade
