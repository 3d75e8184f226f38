"""imo_proofbench_judge over HTTP: the server runs as a real process and judges through a real openai_model
server in front of the scripted upstream (the one test double)."""

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
from resources_servers.imo_proofbench_judge.app import ImoProofBenchConfig
from resources_servers.imo_proofbench_judge.grading import (
    last_boxed,
    read_points,
    read_verdict,
    without_reasoning,
)
from resources_servers.imo_proofbench_judge.prompting import load_judge_prompt
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "imo_proofbench_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[2]  # five integers, three with a sum divisible by 3
ANSWER_ROW = ROWS[1]  # n + 1 | n^2 + 1: expected_answer 1
PROOF = "Look at residues mod 3; either all three occur or one occurs three times."


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **SHIPPED) as started:
        yield started


async def verify(judged: JudgedServer, text: str, row: dict | None = None, **fields: Any) -> dict:
    body = {**(row or ROW), **fields, "response": response_with(assistant_message(text))}
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 200, result
    return result


@pytest.mark.parametrize("points", [6, 7])
async def test_the_judge_awarding_6_or_7_points_earns_1(judged, points):
    judged.judge.script(f"Both cases are handled.\n<points>{points} out of 7</points>")
    result = await verify(judged, f"<think>residues</think>Proof: \\boxed{{{PROOF}}}")
    assert (result["reward"], result["judge_points"], result["judge_correct"]) == (1.0, points, 1.0)
    assert (result["any_correct"], result["symbolic_correct"], result["extracted_answer"]) == (
        1.0,
        0.0,
        PROOF,
    )
    (evaluation,) = result["judge_evaluations"]
    assert evaluation["response"]["output"][-1]["content"][-1]["text"].endswith("</points>")
    (sent,) = judged.judge.requests()
    assert [item["role"] for item in sent["input"]] == ["system", "user"]
    prompt = sent["input"][-1]["content"]
    assert f"Problem:\n{ROW['problem']}\n" in prompt
    assert f"Reference solution:\n{ROW['reference_solution']}\n" in prompt
    assert f"Marking scheme:\n{ROW['rubric']}\n" in prompt
    assert f"Contestant's submission:\n{PROOF}\n" in prompt and "residues</think>" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 4096, 1.0)


@pytest.mark.parametrize(
    ("judge_text", "points"),
    [
        ("Only one case.\n<points>1 out of 7</points>", 1),
        ("<points>5 out of 7</points>", 5),
        ("<points>0 out of 7</points>", 0),
        ("Judgement: No\n<points>7 out of 7</points>", 7),
    ],
)
async def test_the_judge_awarding_less_than_6_points_earns_0(judged, judge_text, points):
    judged.judge.script(judge_text)
    result = await verify(judged, f"\\boxed{{{PROOF}}}")
    assert (result["reward"], result["judge_points"], result["judge_correct"]) == (0.0, points, 0.0)
    assert (result["judge_failure"], len(result["judge_evaluations"])) == (None, 1)


@pytest.mark.parametrize(
    "judge_text", ["The proof is fine.", "<points>9 out of 7</points>", "<points>seven out of 7</points>"]
)
async def test_a_judge_answer_without_a_verdict_is_a_judge_failure_not_a_grade(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, f"\\boxed{{{PROOF}}}")
    assert (result["reward"], result["judge_points"], result["judge_evaluations"]) == (0.0, None, [])
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no verdict" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(judged, f"\\boxed{{{PROOF}}}")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert (result["reward"], result["judge_correct"], result["any_correct"]) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    "text", ["A proof without a box.", "<think>\\boxed{draft}</think>no box after thinking", "<think>cut off"]
)
async def test_no_boxed_answer_earns_0_without_asking_the_judge(judged, text):
    judged.judge.script("<points>7 out of 7</points>")
    result = await verify(judged, text)
    assert (result["reward"], result["extracted_answer"], result["judge_evaluations"]) == (0.0, None, [])
    assert judged.judge.requests() == []


async def test_an_answer_math_verify_accepts_earns_1_without_the_judge(judged):
    judged.judge.script("<points>0 out of 7</points>")
    result = await verify(judged, "Only n = 1 works: \\boxed{n = 1}", row=ANSWER_ROW)
    assert (result["reward"], result["symbolic_correct"], result["any_correct"]) == (1.0, 1.0, 1.0)
    assert (result["judge_evaluations"], result["problem_id"]) == ([], "proof-0002")
    assert judged.judge.requests() == []


async def test_an_answer_math_verify_rejects_goes_to_the_judge(judged):
    judged.judge.script("<points>0 out of 7</points>")
    result = await verify(judged, "\\boxed{3}", row=ANSWER_ROW)
    assert (result["reward"], result["symbolic_correct"], result["judge_points"]) == (0.0, 0.0, 0)
    assert len(judged.judge.requests()) == 1


def rollout(task: int, category: str, reward: float, points: int | None, failed: bool = False) -> dict:
    return {
        **ROW,
        "category": category,
        "response": response_with(),
        "reward": reward,
        "extracted_answer": f"answer {task}",
        "judge_points": points,
        "judge_correct": reward,
        "any_correct": reward,
        "symbolic_correct": 0.0,
        "judge_failure": {"kind": "timeout", "message": "late", "attempts": 1} if failed else None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_metrics_per_category_and_level_and_per_rubric_score(judged):
    rollouts = [
        rollout(0, "Algebra", 1.0, 7),
        rollout(1, "Algebra", 0.0, 1),
        rollout(2, "Geometry", 1.0, 6),
        rollout(3, "Geometry", 0.0, None, failed=True),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/any_correct"] == pytest.approx(200 / 3)
    assert metrics["pass@1/judge_score_7"] == pytest.approx(100 / 3)
    assert metrics["Algebra/pass@1/any_correct"] == pytest.approx(50.0)
    assert metrics["Geometry/pass@1/judge_correct"] == pytest.approx(100.0)
    assert metrics["pre-IMO/pass@1/any_correct"] == pytest.approx(200 / 3)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["problem_id"])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    row = next(row for row in ROWS if row["problem_id"] == recorded["problem_id"])
    judged.judge.script(*(last_text(evaluation["response"]) for evaluation in recorded["judge_evaluations"]))
    status, result = await post_json(judged.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (the ids and times of
    a judge's response are new on every call)."""
    reduced = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": reduced}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "math")
    assert resources.model_extra["judge_prompt_path"] == "prompts/judge.yaml"


def test_chat_completions_for_the_judge_is_refused_naming_the_key():
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match="use_chat_completions_for_judge"):
        ImoProofBenchConfig.model_validate({**base, "use_chat_completions_for_judge": True})


@pytest.mark.parametrize(
    ("content", "problem"),
    [("user: 'Q: {problem} {answer}'", "answer"), ("system: hi", "user"), ("user: '{0}'", "positional")],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_judge_prompt(tmp_path, "judge.yaml")


def test_the_shipped_prompt_names_the_four_fields_and_the_points_line():
    prompt = load_judge_prompt(FOLDER, SHIPPED["judge_prompt_path"])
    filled = prompt.user.format(problem="P", reference_solution="S", rubric="R", predicted_answer="A")
    assert "Problem:\nP\n" in filled and "Reference solution:\nS\n" in filled
    assert "Marking scheme:\nR\n" in filled and "Contestant's submission:\nA\n" in filled
    assert filled.endswith("<points>N out of 7</points>")


@pytest.mark.parametrize(
    ("text", "verdict", "points"),
    [
        ("<points>6 out of 7</points>", True, 6),
        ("< points > 7 OUT OF 7 </points>", None, None),
        ("<points> 5 out of 7 </points>", False, 5),
        ("**Judgement**: Yes <points>0 out of 7</points>", True, 0),
        ("judgement: no", False, None),
        ("\\boxed{Correct} <points>1 out of 7</points>", True, 1),
        ("\\boxed{ incorrect }", False, None),
        ("<points>8 out of 7</points>", None, None),
        ("", None, None),
    ],
)
def test_read_verdict_and_points(text, verdict, points):
    assert (read_verdict(text), read_points(text)) == (verdict, points)


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        ("\\boxed{a} then \\boxed{b{c}d}", "b{c}d"),
        ("\\boxed {x}", "x"),
        ("\\boxed{open", None),
        ("no box", None),
        ("\\boxedx{y}", None),
    ],
)
def test_last_boxed(text, boxed):
    assert last_boxed(text) == boxed


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<think>a</think> b", "b"),
        ("reasoning</think>answer", "answer"),
        ("<thinking>x</thinking>y<think>z</think>", "y"),
        ("<think>never closed", ""),
        ("plain", "plain"),
    ],
)
def test_without_reasoning(text, kept):
    assert without_reasoning(text) == kept
