"""physics_judge over HTTP: the server runs as a real process and judges through a real openai_model server
in front of the scripted upstream (the one test double)."""

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
from resources_servers.physics_judge.app import PhysicsJudgeConfig, read_verdict
from resources_servers.physics_judge.prompting import load_judge_prompt
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "physics_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[3]  # the lens: 60 cm


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


async def test_math_verify_decides_first_and_the_judge_is_not_asked(judged):
    judged.judge.script("[Incorrect]")
    result = await verify(judged, "d_i = 60 cm, so \\boxed{60}")
    assert (result["reward"], result["library_reward"], result["extracted_answer"]) == (1.0, 1.0, "60")
    assert (result["judge_evaluations"], result["judge_verdict"], result["judge_failure"]) == (
        None,
        None,
        None,
    )
    assert result["domain"] == "optics" and judged.judge.requests() == []


async def test_the_judge_agreeing_earns_1_and_is_recorded(judged):
    judged.judge.script("0.6 m is 60 cm.\n[Correct]")
    result = await verify(judged, "The image is 0.6 m away: \\boxed{0.6\\text{ m}}")
    assert (result["reward"], result["library_reward"], result["judge_verdict"]) == (1.0, 0.0, "correct")
    (evaluation,) = result["judge_evaluations"]
    assert evaluation["response"]["output"][-1]["content"][-1]["text"].endswith("[Correct]")
    (sent,) = judged.judge.requests()
    assert [item["role"] for item in sent["input"]] == ["system", "user"]
    prompt = sent["input"][-1]["content"]
    assert f"Problem:\n{ROW['question']}\n" in prompt
    assert "Student's solution:\nThe image is 0.6 m away: \\boxed{0.6\\text{ m}}\n" in prompt
    assert f"Reference answer:\n{ROW['expected_answer']}\n" in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 2048, 1.0)


@pytest.mark.parametrize(
    "judge_text", ["Wrong magnitude.\n[Incorrect]", "[INCORRECT]", "verdict: [incorrect]"]
)
async def test_the_judge_disagreeing_earns_0(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, "\\boxed{12\\text{ cm}}")
    assert (result["reward"], result["judge_verdict"], result["judge_failure"]) == (0.0, "incorrect", None)
    assert len(result["judge_evaluations"]) == 1


async def test_a_judge_answer_without_a_verdict_is_a_judge_failure_not_a_grade(judged):
    judged.judge.script("The student's result matches the reference.")
    result = await verify(judged, "\\boxed{0.6\\text{ m}}")
    assert (result["reward"], result["judge_verdict"], result["judge_evaluations"]) == (0.0, None, [])
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no verdict" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(judged, "\\boxed{0.6\\text{ m}}")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert (result["reward"], result["judge_verdict"]) == (0.0, None)


async def test_a_row_without_question_is_a_422_naming_it(judged):
    row = {key: value for key, value in ROW.items() if key != "question"}
    status, result = await post_json(judged.url + "/verify", {**row, "response": response_with()})
    assert status == 422
    assert ["body", "question"] in [error["loc"] for error in result["detail"]]


def rollout(task: int, index: int, domain: str, reward: float, library: float, judged_by: str | None) -> dict:
    evaluations = [] if judged_by else None
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if judged_by == "failed" else None
    return {
        **ROW,
        "domain": domain,
        "response": response_with(),
        "reward": reward,
        "library_reward": library,
        "extracted_answer": str(reward),
        "judge_evaluations": evaluations,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": index,
    }


async def test_metrics_split_symbolic_and_judge_accuracy_per_domain(judged):
    rollouts = [
        rollout(0, 0, "optics", 1.0, 1.0, None),
        rollout(1, 0, "optics", 1.0, 0.0, "judge"),
        rollout(2, 0, "mechanics", 0.0, 0.0, "judge"),
        rollout(3, 0, "mechanics", 0.0, 0.0, "failed"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/symbolic_accuracy"] == pytest.approx(25.0)
    assert metrics["pass@1/judge_accuracy"] == pytest.approx(50.0)
    assert metrics["optics/pass@1/symbolic_accuracy"] == pytest.approx(50.0)
    assert metrics["optics/pass@1/judge_accuracy"] == pytest.approx(100.0)
    assert metrics["mechanics/pass@1/judge_accuracy"] == pytest.approx(0.0)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["id"])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    row = next(row for row in ROWS if row["id"] == recorded["id"])
    evaluations = recorded["judge_evaluations"] or []
    judged.judge.script(*(last_text(evaluation["response"]) for evaluation in evaluations))
    status, result = await post_json(judged.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded), (
        "the recorded line is exactly the /verify answer, the judge's request included (a replay plays it)"
    )


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (the ids and times of
    a judge's response are new on every call)."""
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
        PhysicsJudgeConfig.model_validate({**base, "use_chat_completions_for_judge": True})


@pytest.mark.parametrize(
    ("content", "problem"),
    [("user: 'Q: {problem} {answer}'", "answer"), ("system: hi", "user"), ("user: '{0}'", "positional")],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_judge_prompt(tmp_path, "judge.yaml")


def test_the_shipped_prompt_names_the_three_fields_and_the_verdicts():
    prompt = load_judge_prompt(FOLDER, SHIPPED["judge_prompt_path"])
    filled = prompt.user.format(problem="P", generation="G", expected_answer="E")
    assert "Problem:\nP\n" in filled and "Student's solution:\nG\n" in filled
    assert "Reference answer:\nE\n" in filled and "[Correct]" in filled and "[Incorrect]" in filled


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("[Correct]", "correct"),
        ("[correct]", "correct"),
        ("It is not [Incorrect]; [Correct]", "correct"),
        ("[Incorrect]", "incorrect"),
        ("Correct", None),
        ("", None),
    ],
)
def test_read_verdict(text, verdict):
    assert read_verdict(text) == verdict
