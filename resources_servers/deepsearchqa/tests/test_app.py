"""deepsearchqa over HTTP: the server runs as a real process and judges through a real openai_model server
in front of the scripted upstream (the one test double)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.prompt import load_judge_prompt_file
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
from resources_servers.deepsearchqa.app import PLACEHOLDERS
from resources_servers.deepsearchqa.deepsearchqa_grading import UnreadableJudgment, parse_judgment
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "deepsearchqa"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[4]  # the three Great Lakes besides Lake Michigan: Superior, Huron, Erie


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(
        scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **{**SHIPPED, "judge_max_attempts": 1}
    ) as started:
        yield started


def decisions(details: dict[str, bool], extra: list[str] | None = None) -> str:
    correctness: dict[str, Any] = {"Correctness Details": details}
    if extra is not None:
        correctness["Excessive Answers"] = extra
    return json.dumps({"Answer Correctness": correctness})


async def verify(judged: JudgedServer, *items: dict, **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(*items)}
    )
    assert status == 200, result
    return result


ALL_THREE = {"Lake Superior": True, "Lake Huron": True, "Lake Erie": True}


async def test_the_judge_agreeing_on_every_item_earns_1_and_the_row_is_echoed(judged):
    judged.judge.script(decisions(ALL_THREE, []))
    result = await verify(judged, assistant_message("Superior, Huron and Erie."))
    assert (result["reward"], result["precision"], result["recall"], result["f1"]) == (1.0, 1.0, 1.0, 1.0)
    assert (result["fully_correct"], result["fully_incorrect"], result["correct_with_extraneous"]) == (
        1,
        0,
        0,
    )
    assert result["judge_output"]["Correctness Details"] == ALL_THREE
    assert (result["example_id"], result["answer"], result["judge_failure"]) == (
        ROW["example_id"],
        ROW["answer"],
        None,
    )


async def test_the_judge_disagreeing_on_every_item_earns_0(judged):
    judged.judge.script(decisions(dict.fromkeys(ALL_THREE, False), ["Lake Ontario"]))
    result = await verify(judged, assistant_message("Lake Ontario."))
    assert (result["reward"], result["precision"], result["recall"]) == (0.0, 0.0, 0.0)
    assert (result["fully_correct"], result["fully_incorrect"], result["judge_failure"]) == (0, 1, None)


async def test_a_partial_answer_set_scores_its_f1(judged):
    # 2 of 3 reference items found, 1 extra item: precision 2/3, recall 2/3, F1 2/3.
    judged.judge.script(decisions({**ALL_THREE, "Lake Erie": False}, ["Lake Ontario"]))
    result = await verify(judged, assistant_message("Superior, Huron, Ontario"))
    assert (result["precision"], result["recall"]) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert result["reward"] == result["f1"] == pytest.approx(2 / 3)
    assert (result["fully_correct"], result["fully_incorrect"], result["correct_with_extraneous"]) == (
        0,
        0,
        0,
    )


async def test_every_item_plus_extras_is_correct_with_extraneous(judged):
    # 3 found, 2 extras: precision 3/5, recall 1, F1 = 2 * 0.6 / 1.6 = 0.75.
    judged.judge.script("```json\n" + decisions(ALL_THREE, ["Lake Ontario", "Lake Michigan"]) + "\n```")
    result = await verify(judged, assistant_message("All five lakes."))
    assert (result["precision"], result["recall"], result["reward"]) == (
        pytest.approx(0.6),
        1.0,
        pytest.approx(0.75),
    )
    assert (result["fully_correct"], result["correct_with_extraneous"]) == (0.0, 1.0)


async def test_the_judge_sees_problem_kind_reference_and_every_assistant_message(judged):
    judged.judge.script(decisions(ALL_THREE))
    await verify(
        judged,
        assistant_message("Superior"),
        reasoning("hmm"),
        {**assistant_message("Huron, Erie"), "id": "m2"},
    )
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert ROW["problem"] in prompt and "Set Answer" in prompt and ROW["answer"] in prompt
    assert "Superior" in prompt and "Huron, Erie" in prompt and "hmm" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"]) == (0.0, 32768)


async def test_an_empty_answer_scores_0_without_asking_the_judge(judged):
    judged.judge.script(decisions(ALL_THREE))
    result = await verify(judged, reasoning("Superior, Huron, Erie"))
    assert (result["reward"], result["fully_incorrect"], result["judge_evaluations"]) == (0.0, 1.0, [])
    assert judged.judge.requests() == []


@pytest.mark.parametrize(
    "judge_text",
    [
        "The answer names all three lakes.",
        json.dumps({"Answer Correctness": {"Correctness Details": {}}}),
        json.dumps({"Answer Correctness": {"Correctness Details": {"Lake Erie": "yes"}}}),
        json.dumps({"Correctness Details": ALL_THREE}),
    ],
    ids=["prose", "no_items", "not_boolean", "no_wrapper"],
)
async def test_a_malformed_verdict_is_a_judge_failure_not_a_score(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("Superior, Huron and Erie."))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "not the expected JSON" in failure["message"]
    assert (result["reward"], result["judge_output"], result["fully_incorrect"]) == (0.0, None, 0.0)


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled"}}})
    result = await verify(judged, assistant_message("Superior, Huron and Erie."))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled" in failure["message"]
    assert result["reward"] == 0.0 and result["judge_output"] is None


async def test_a_missing_field_is_a_422_naming_it(judged):
    row = {key: value for key, value in ROW.items() if key != "answer_type"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert ["body", "answer_type"] in [error["loc"] for error in result["detail"]]


def graded(task: int, rollout: int, f1: float | None) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if f1 is None else None
    return {
        **ROW,
        "response": response_with(),
        "reward": f1 or 0.0,
        "f1": f1,
        "precision": f1,
        "recall": f1,
        "fully_correct": float(f1 == 1.0),
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_average_the_set_scores_of_judged_rollouts_and_count_failures(judged):
    rollouts = [graded(0, 0, 1.0), graded(0, 1, 0.5), graded(1, 0, None), graded(1, 1, 0.0)]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    # JudgedServer rollouts: task 0 -> [1.0, 0.5], task 1 -> [0.0] (its failed rollout is left out).
    assert metrics["pass@1[avg-of-1]/f1"] == pytest.approx(100 * (1.0 + 0.0) / 2)
    assert metrics["pass@1[avg-of-1]/fully_correct"] == pytest.approx(50.0)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 4)
    assert metrics["judge_failures/timeout"] == 1
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(1 / 4)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["example_id"])
async def test_recorded_rollouts_reproduce_their_scores(judged, rollout):
    row = next(row for row in ROWS if row["example_id"] == rollout["example_id"])
    (evaluation,) = rollout["judge_evaluations"]
    judged.judge.script(evaluation["response"]["output"][-1]["content"][-1]["text"])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    for key in ("reward", "precision", "recall", "f1", "fully_correct", "judge_output"):
        assert result[key] == rollout[key], key
    assert (
        without_verify_flags(result)["judge_evaluations"][0]["responses_create_params"]
        == (evaluation["responses_create_params"])
    )


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["judge_prompt_path"] == "prompts/judge.yaml"


def test_the_shipped_prompt_fills_with_the_row_fields():
    prompt = load_judge_prompt_file(FOLDER, SHIPPED["judge_prompt_path"], PLACEHOLDERS)
    filled = prompt.user.format(problem="P?", answer_type="Set Answer", answer="A, B", response="R")
    assert all(part in filled for part in ("P?", "Set Answer", "A, B", "R", '"Correctness Details"'))


def test_a_prompt_with_an_unknown_placeholder_is_a_config_error(tmp_path):
    (tmp_path / "judge.yaml").write_text("user: '{problem} {gold}'")
    with pytest.raises(ConfigError, match="judge_prompt_path.*gold"):
        load_judge_prompt_file(tmp_path, "judge.yaml", PLACEHOLDERS)


@pytest.mark.parametrize(
    ("text", "details"),
    [
        ('{"Answer Correctness": {"Correctness Details": {"a": true}}}', {"a": True}),
        ('```json\n{"Answer Correctness": {"Correctness Details": {"a": false}}}\n```', {"a": False}),
        ("[]", None),
        ('{"Answer Correctness": {"Correctness Details": {"a": true}, "Excessive Answers": "b"}}', None),
    ],
)
def test_parse_judgment(text, details):
    if details is None:
        with pytest.raises(UnreadableJudgment):
            parse_judgment(text)
    else:
        assert parse_judgment(text)["Correctness Details"] == details
