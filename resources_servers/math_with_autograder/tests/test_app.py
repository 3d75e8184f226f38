"""math_with_autograder over HTTP: the server runs as a real process and asks its autograder through a real
openai_model server in front of the scripted upstream (the one test double)."""

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
from resources_servers.math_with_autograder.app import (
    MathWithAutograderConfig,
    last_boxed,
    load_judge_prompt,
    read_verdict,
)
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "math_with_autograder"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[2]  # n^2 + n + 1 divisible by 3: n = 1 mod 3


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **SHIPPED) as started:
        yield started


async def verify(judged: JudgedServer, text: str, **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(assistant_message(text))}
    )
    assert status == 200, result
    return result


async def test_math_verify_decides_first_and_the_autograder_is_not_asked(judged):
    judged.judge.script("\\boxed{Incorrect}")
    result = await verify(judged, "The answer is \\boxed{5}", expected_answer="5")
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (1.0, 1.0, "5")
    assert (result["judge_evaluations"], result["judge_verdict"], result["judge_failure"]) == (
        None,
        None,
        None,
    )
    assert judged.judge.requests() == []


async def test_the_autograder_agreeing_earns_1_and_sees_the_raw_boxed_answer(judged):
    judged.judge.script("Same residue class.\n\\boxed{Correct}")
    text = "Checking residues mod 3 gives \\boxed{n = 3k + 1 \\text{ for } k \\ge 0}."
    result = await verify(judged, text)
    assert (result["reward"], result["library_reward"], result["judge_verdict"]) == (1.0, 0.0, "correct")
    assert result["judged_answer"] == "n = 3k + 1 \\text{ for } k \\ge 0"
    (evaluation,) = result["judge_evaluations"]
    assert evaluation["response"]["output"][-1]["content"][-1]["text"].endswith("\\boxed{Correct}")
    (sent,) = judged.judge.requests()
    assert [item["role"] for item in sent["input"]] == ["system", "user"]
    prompt = sent["input"][-1]["content"]
    assert f"Problem:\n{ROW['question']}\n" in prompt
    assert "Model's final answer:\nn = 3k + 1 \\text{ for } k \\ge 0\n" in prompt
    assert f"Golden answer:\n{ROW['expected_answer']}\n" in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 2048, 1.0)


async def test_without_a_box_the_autograder_sees_the_whole_answer(judged):
    judged.judge.script("\\boxed{Correct}")
    result = await verify(judged, "all n that leave remainder one")
    assert result["judged_answer"] == "all n that leave remainder one"
    assert (
        "Model's final answer:\nall n that leave remainder one\n"
        in judged.judge.requests()[0]["input"][-1]["content"]
    )


@pytest.mark.parametrize(
    "judge_text",
    ["n = 2 also fails.\n\\boxed{Incorrect}", "\\boxed{Incorrect}, not \\boxed{Correct}"],
)
async def test_the_autograder_disagreeing_earns_0(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, "\\boxed{n \\text{ even}}")
    assert (result["reward"], result["judge_verdict"], result["judge_failure"]) == (0.0, "incorrect", None)
    assert len(result["judge_evaluations"]) == 1


@pytest.mark.parametrize("judge_text", ["The answer is right.", "Correct", "\\boxed{correct}"])
async def test_a_judge_answer_without_a_verdict_is_a_judge_failure_not_a_grade(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, "\\boxed{n \\equiv 1 \\pmod 3}")
    assert (result["reward"], result["judge_verdict"], result["judge_evaluations"]) == (0.0, None, [])
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no verdict" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(judged, "\\boxed{n \\equiv 1 \\pmod 3}")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert (result["reward"], result["judge_verdict"]) == (0.0, None)


async def test_a_row_without_question_is_a_422_naming_it(judged):
    row = {key: value for key, value in ROW.items() if key != "question"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert ["body", "question"] in [error["loc"] for error in result["detail"]]


def rollout(task: int, reward: float, library: float, judged_by: str | None) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if judged_by == "failed" else None
    return {
        **ROW,
        "response": response_with(),
        "reward": reward,
        "library_reward": library,
        "extracted_answer": str(task),
        "judge_evaluations": [] if judged_by else None,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_metrics_split_symbolic_and_judge_accuracy(judged):
    rollouts = [rollout(0, 1.0, 1.0, None), rollout(1, 1.0, 0.0, "judge"), rollout(2, 0.0, 0.0, "judge")]
    rollouts.append(rollout(3, 0.0, 0.0, "failed"))
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/symbolic_accuracy"] == pytest.approx(25.0)
    assert metrics["pass@1/judge_accuracy"] == pytest.approx(50.0)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["id"])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    row = next(row for row in ROWS if row["id"] == recorded["id"])
    evaluations = recorded["judge_evaluations"] or []
    judged.judge.script(*(last_text(evaluation["response"]) for evaluation in evaluations))
    status, result = await post_json(judged.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded)


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (a judge response's ids
    and times are new on every call)."""
    evaluations = record["judge_evaluations"]
    if evaluations is None:
        return record
    reduced = [
        (evaluation["responses_create_params"], last_text(evaluation["response"]))
        for evaluation in evaluations
    ]
    return {**record, "judge_evaluations": reduced}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "math")
    assert resources.model_extra["should_use_judge"] is True
    assert resources.model_extra["judge_prompt_path"] == "prompts/judge.yaml"


def test_chat_completions_for_the_judge_is_refused_naming_the_key():
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match="use_chat_completions_for_judge"):
        MathWithAutograderConfig.model_validate({**base, "use_chat_completions_for_judge": True})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("user: 'Q: {problem} {generation}'", "generation"),
        ("system: hi", "user"),
        ("user: '{0}'", "positional"),
    ],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_judge_prompt(str(tmp_path / "judge.yaml"))


def test_the_shipped_prompt_names_the_three_fields_and_the_verdicts():
    prompt = load_judge_prompt(SHIPPED["judge_prompt_path"])
    filled = prompt.user.format(problem="P", predicted_answer="A", expected_answer="E")
    assert (
        "Problem:\nP\n" in filled
        and "Model's final answer:\nA\n" in filled
        and "Golden answer:\nE\n" in filled
    )
    assert "\\boxed{Correct}" in filled and "\\boxed{Incorrect}" in filled


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("\\boxed{Correct}", "correct"),
        ("\\boxed{Incorrect}", "incorrect"),
        ("\\boxed{Correct} rather than \\boxed{Incorrect}", "correct"),
        ("\\boxed{Incorrect} rather than \\boxed{Correct}", "incorrect"),
        ("\\boxed{CORRECT}", None),
        ("", None),
    ],
)
def test_read_verdict(text, verdict):
    assert read_verdict(text) == verdict


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        ("\\boxed{1} then \\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
        ("\\boxed{f(x) = \\frac{x}{2}}", "f(x) = \\frac{x}{2}"),
        ("\\fbox{7}", "7"),
        ("\\boxed{open", None),
        ("no box", None),
    ],
)
def test_last_boxed(text, boxed):
    assert last_boxed(text) == boxed
