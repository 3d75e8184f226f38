"""simpleqa over HTTP: the server runs as a real process and judges through a real openai_model server in
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
from resources_servers.simpleqa.app import SimpleQAConfig
from resources_servers.simpleqa.simpleqa_grading import load_prompt, parse_grade
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "simpleqa"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[2]  # capital of Australia: Canberra


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


# ---- grades ---------------------------------------------------------------------------------------------


async def test_a_correct_answer_earns_1_and_the_row_is_echoed(judged):
    judged.judge.script("A")
    result = await verify(judged, assistant_message("Canberra."))
    assert (result["verdict"], result["reward"], result["judge_output"]) == ("correct", 1.0, "A")
    assert (result["is_correct"], result["is_incorrect"], result["is_not_attempted"]) == (1.0, 0.0, 0.0)
    assert (result["extracted_answer"], result["expected_answer"]) == ("Canberra.", "Canberra")
    assert (result["id"], result["question"], result["judge_failure"]) == (ROW["id"], ROW["question"], None)


@pytest.mark.parametrize(
    ("judge_text", "verdict"),
    [
        ("B", "incorrect"),
        ("C", "not_attempted"),
        ("**B**", "incorrect"),
        ("A: CORRECT", "correct"),
        ("The answer names another city.\nB", "incorrect"),
        ("NOT_ATTEMPTED", "not_attempted"),
    ],
)
async def test_only_correct_earns_a_reward(judged, judge_text, verdict):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("Sydney, I think."))
    assert (result["verdict"], result["reward"], result["judge_failure"]) == (
        verdict,
        float(verdict == "correct"),
        None,
    )
    assert result[f"is_{verdict}"] == 1.0


async def test_the_judge_sees_question_gold_target_and_the_last_message(judged):
    judged.judge.script("A")
    await verify(
        judged, assistant_message("Perth?"), reasoning("hmm"), {**assistant_message("Canberra"), "id": "m2"}
    )
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert [item["role"] for item in sent["input"]] == ["user"]
    assert f"Question: {ROW['question']}\nGold target: Canberra\nPredicted answer: Canberra\n" in prompt
    assert "Perth" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 2048, 1.0)


@pytest.mark.parametrize("items", [(), (reasoning("Canberra"),)], ids=["empty_output", "no_message"])
async def test_no_answer_is_not_attempted_without_asking_the_judge(judged, items):
    judged.judge.script("A")
    result = await verify(judged, *items)
    assert (result["verdict"], result["reward"], result["extracted_answer"], result["judge_output"]) == (
        "not_attempted",
        0.0,
        None,
        None,
    )
    assert judged.judge.requests() == []


async def test_a_judge_answer_without_a_grade_is_a_judge_failure_not_a_grade(judged):
    judged.judge.script("The predicted answer matches the gold target.")
    result = await verify(judged, assistant_message("Canberra"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == (None, 0.0, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no grade" in failure["message"]
    assert (result["is_correct"], result["is_incorrect"], result["is_not_attempted"]) == (0.0, 0.0, 0.0)


async def test_a_failing_judge_is_a_judge_failure(judged):
    # (Not a refused key: that would stop the judge's client for good, and the tests after this one.)
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    failure = (await verify(judged, assistant_message("Canberra")))["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]


async def test_a_mistyped_field_is_a_422_naming_it(judged):
    status, result = await post_json(
        judged.url + "/verify", {**ROW, "expected_answer": 206, "response": response_with()}
    )
    assert status == 422
    assert ["body", "expected_answer"] in [error["loc"] for error in result["detail"]]


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, verdict: str | None, answer: str | None = "x") -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if verdict is None else None
    return {
        **ROW,
        "response": response_with(),
        "reward": float(verdict == "correct"),
        "verdict": verdict,
        "extracted_answer": answer,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_accuracy_abstention_accuracy_given_attempted_f1_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, "correct"),
        graded(0, 1, "incorrect"),
        graded(1, 0, "not_attempted", None),
        graded(1, 1, "correct"),
        graded(2, 0, None),  # the judgment failed: no grade, left out of the grade metrics
        graded(2, 1, "correct"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    # Graded, per task: [1, 0], [0, 1], [1] correct; [0, 1], [0, 0], [0] incorrect; [0, 0], [1, 0], [0] abstained.
    assert metrics["pass@1[avg-of-1]/correct"] == pytest.approx(100 * 2 / 3)
    assert metrics["pass@1[avg-of-2]/correct"] == pytest.approx(100 * (0.5 + 0.5 + 1) / 3)
    assert metrics["pass@1[avg-of-2]/not_attempted"] == pytest.approx(100 * 0.5 / 3)
    correct, incorrect = metrics["pass@1[avg-of-2]/correct"], metrics["pass@1[avg-of-2]/incorrect"]
    given_attempted = 100 * correct / (correct + incorrect)
    assert metrics["pass@1[avg-of-2]/accuracy_given_attempted"] == pytest.approx(given_attempted)
    f1 = 2 * given_attempted * correct / (given_attempted + correct)
    assert metrics["pass@1[avg-of-2]/f1"] == pytest.approx(f1)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 6)
    assert metrics["judge_failures/timeout"] == 1
    assert key["pass@1[avg-of-2]/f1"] == pytest.approx(f1)
    assert key["judge_failure_rate"] == pytest.approx(1 / 6)
    assert "pass@2/correct" in key and not any(
        name.endswith("/no_answer") and "pass@2" in name for name in key
    )


# ---- recorded data, config ------------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["id"])
async def test_recorded_rollouts_reproduce_their_grade_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["id"] == rollout["id"])
    judged.judge.script(rollout["judge_output"])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (result["verdict"], result["reward"]) == (rollout["verdict"], rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (the ids and times
    of a judge's response are new on every call)."""
    evaluations = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_prompt_path"] == "prompts/judge.yaml"


def test_chat_completions_for_the_judge_is_refused_naming_the_key():
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match="use_chat_completions_for_judge"):
        SimpleQAConfig.model_validate({**base, "use_chat_completions_for_judge": True})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("user: 'Q: {question} {answer}'", "answer"),
        ("system: hi", "KeyError"),
        ("user: [1, 2]", "AttributeError"),
    ],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_prompt(tmp_path, "judge.yaml")


def test_the_shipped_prompt_asks_for_a_letter_grade():
    prompt = load_prompt(FOLDER, SHIPPED["judge_prompt_path"])
    filled = prompt.format(question="Q?", expected_answer="G", generation="P")
    assert "Question: Q?\nGold target: G\nPredicted answer: P" in filled
    assert all(grade in filled for grade in ("A: CORRECT", "B: INCORRECT", "C: NOT_ATTEMPTED"))


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("A", "correct"),
        ("  b", None),
        ("(C)", "not_attempted"),
        ("Reasoning first.\n\nGrade:\n**A**", "correct"),
        ("INCORRECT - it says 1991", "incorrect"),
        ("This is not correct", None),
        ("", None),
        ("Answer: B", None),
    ],
)
def test_parse_grade(text, grade):
    assert parse_grade(text) == grade
