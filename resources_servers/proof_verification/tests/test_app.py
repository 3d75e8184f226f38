"""proof_verification over HTTP: the server runs as a real process and asks its meta-verifier through a real
openai_model server in front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    JudgedServer,
    check_environment_config,
    post_json,
    read_jsonl,
    response_with,
    run_judged_server,
    shipped_settings,
    without_verify_flags,
)
from resources_servers.proof_verification.app import ProofVerificationConfig
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "proof_verification"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[1]  # a wrong proof: gold score 0
ANALYSIS = "The factor a need not be prime (8 = 4 * 2), so the argument fails."


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    settings = {
        **SHIPPED,
        "max_verification_chars": 500,
        "max_proof_chars": 2000,
    }
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **settings) as started:
        yield started


async def post_verify(
    judged: JudgedServer, text: str, row: dict | None = None, **fields: Any
) -> tuple[int, dict]:
    body = {**(row or ROW), **fields, "response": response_with(assistant_message(text))}
    return await post_json(judged.url + "/verify", body)


async def verify(judged: JudgedServer, text: str, row: dict | None = None, **fields: Any) -> dict:
    status, result = await post_verify(judged, text, row, **fields)
    assert status == 200, result
    return result


async def test_a_right_grade_the_meta_verifier_approves_earns_1(judged):
    judged.judge.script("The analysis finds the decisive flaw.\n\\boxed{1}")
    result = await verify(judged, f"<think>try n = 8</think>{ANALYSIS}\n\\boxed{{0}}")
    assert (result["reward"], result["predicted_score"], result["r_score"], result["r_meta"]) == (
        1.0,
        0.0,
        1.0,
        1.0,
    )
    assert (result["format_error"], result["judge_failure"], len(result["judge_evaluations"])) == (
        None,
        None,
        1,
    )
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert f"Problem:\n{ROW['problem']}\n" in prompt and f"Proof under review:\n{ROW['proof']}\n" in prompt
    assert f"Reference grading:\n{ROW['ground_truth_judgement']}\n" in prompt
    assert f"Grader's analysis:\n{ANALYSIS}\n\\boxed{{0}}" in prompt and "try n = 8" not in prompt
    assert (sent["temperature"], sent["top_p"], sent["max_output_tokens"]) == (1.0, 1.0, 100000)


@pytest.mark.parametrize(
    ("predicted", "gold", "meta", "reward"),
    [
        ("1", 0, "1", 0.0),  # opposite grade: nothing, whatever the meta-verifier says
        ("0.5", 0, "1", 0.5),  # half a step off
        ("1", 0.5, "0.5", 0.25),  # half a step off, analysis half right
        ("0", 0, "0", 0.0),  # right grade for the wrong reasons
        ("0.5", 0.5, "0.5", 0.5),
    ],
)
async def test_a_grade_off_the_gold_or_a_doubted_analysis_earns_the_formulas_value(
    judged, predicted, gold, meta, reward
):
    judged.judge.script(f"Comparison.\n\\boxed{{{meta}}}")
    result = await verify(judged, f"{ANALYSIS}\n\\boxed{{{predicted}}}", ground_truth_verify_score=gold)
    assert result["reward"] == pytest.approx(reward)
    assert result["reward"] == pytest.approx((1 - abs(float(predicted) - gold)) * float(meta))
    assert (result["predicted_score"], result["r_meta"]) == (float(predicted), float(meta))


@pytest.mark.parametrize("judge_text", ["The analysis is good.", "\\boxed{0.25}", "\\boxed{good}"])
async def test_a_meta_verifier_answer_without_a_score_is_a_judge_failure(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, f"{ANALYSIS}\n\\boxed{{0}}")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no \\boxed{} score" in failure["message"]
    assert (result["reward"], result["r_meta"], result["judge_evaluations"]) == (0.0, None, [])
    assert (result["predicted_score"], result["r_score"]) == (0.0, 1.0), (
        "the policy's grade is still recorded"
    )


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(judged, f"{ANALYSIS}\n\\boxed{{0}}")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert result["reward"] == SHIPPED["judge_failure_reward"] == 0.0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty_response"),
        (ANALYSIS, "invalid_boxed_score"),
        (f"{ANALYSIS}\n\\boxed{{0.3}}", "invalid_boxed_score"),
        (f"{ANALYSIS}\n\\boxed{{wrong}}", "invalid_boxed_score"),
        ("<think>\\boxed{0}</think>So the proof fails.", "invalid_boxed_score"),
        ("x" * 600 + "\\boxed{0}", "verification_too_long"),
    ],
)
async def test_a_malformed_policy_answer_earns_0_without_asking_the_judge(judged, text, reason):
    judged.judge.script("\\boxed{1}")
    result = await verify(judged, text)
    assert (result["reward"], result["r_format"], result["format_error"]) == (0.0, 0.0, reason)
    assert (result["predicted_score"], result["judge_failure"], result["judge_evaluations"]) == (
        None,
        None,
        [],
    )
    assert judged.judge.requests() == []


async def test_a_proof_over_max_proof_chars_is_not_graded(judged):
    judged.judge.script("\\boxed{1}")
    result = await verify(judged, f"{ANALYSIS}\n\\boxed{{0}}", proof="y" * 2001)
    assert (result["reward"], result["format_error"], judged.judge.requests()) == (0.0, "proof_too_long", [])


@pytest.mark.parametrize(
    ("field", "value"),
    [("ground_truth_verify_score", 0.7), ("ground_truth_verify_score", None), ("problem", 3)],
)
async def test_a_bad_row_is_a_422_naming_the_field(judged, field, value):
    status, result = await post_verify(judged, f"{ANALYSIS}\n\\boxed{{0}}", **{field: value})
    assert status == 422 and field in str(result), result


async def test_a_row_without_the_gold_fields_is_a_422(judged):
    row = {key: value for key, value in ROW.items() if key != "ground_truth_judgement"}
    status, result = await post_verify(judged, f"{ANALYSIS}\n\\boxed{{0}}", row=row)
    assert status == 422 and "ground_truth_judgement" in str(result), result


def rollout(task: int, reward: float, predicted: float | None, r_meta: float | None, **fields: Any) -> dict:
    return {
        **ROW,
        "response": response_with(),
        "reward": reward,
        "predicted_score": predicted,
        "r_score": None if predicted is None else 1 - abs(predicted - ROW["ground_truth_verify_score"]),
        "r_meta": r_meta,
        "judge_failure": None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
        **fields,
    }


async def test_metrics(judged):
    rollouts = [
        rollout(0, 1.0, 0.0, 1.0),
        rollout(1, 0.25, 0.5, 0.5),
        rollout(2, 0.0, None, None, format_error="invalid_boxed_score"),
        rollout(3, 0.0, 0.0, None, judge_failure={"kind": "timeout", "message": "late", "attempts": 1}),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/accuracy"] == pytest.approx(125 / 3)
    assert metrics["pass@1/meta_score"] == pytest.approx(75.0)
    assert metrics["pass@1/exact_score"] == pytest.approx(50.0)
    assert metrics["pass@1/score_agreement"] == pytest.approx(62.5)
    assert metrics["pass@1[avg-of-1]/no_answer"] == pytest.approx(25.0)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["problem"][:30])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    row = next(row for row in ROWS if row["problem"] == recorded["problem"])
    judged.judge.script(*(last_text(evaluation["response"]) for evaluation in recorded["judge_evaluations"]))
    status, result = await post_json(judged.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded)


def test_the_recordings_cover_agreement_disagreement_and_a_malformed_answer():
    assert sorted(recorded["reward"] for recorded in ROLLOUTS) == [0.0, 0.0, 0.25, 0.5, 1.0]
    assert [recorded["format_error"] for recorded in ROLLOUTS].count("invalid_boxed_score") == 1


def without_judge_ids(record: dict) -> dict:
    reduced = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": reduced}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "math")
    assert resources.model_extra["meta_verifier_prompt_path"] == "prompts/meta_verifier.yaml"


def test_nemo_gyms_keys_are_accepted_with_its_defaults():
    base = {
        "name": NAME,
        "host": "127.0.0.1",
        "port": 0,
        "entrypoint": "app.py",
        "judge_model_server": JUDGE_MODEL_REF,
    }
    config = ProofVerificationConfig.model_validate({**base, "top_p": 0.9, "judge_model_name": "judge-x"})
    params = config.judge_responses_create_params
    assert (params.top_p, params.model, params.temperature) == (0.9, "judge-x", None)
    assert (config.max_proof_chars, config.max_verification_chars, config.assert_think_end) == (
        40_000,
        20_000,
        False,
    )
