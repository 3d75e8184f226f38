"""abstention over HTTP: the server runs as a real process and judges through a real openai_model server in
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
from resources_servers.abstention.abstention_grading import (
    checked_template,
    final_answer,
    load_prompt,
    normalized,
    parse_grade,
    without_thinking,
)
from resources_servers.abstention.app import AbstentionConfig
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "abstention"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
ROW = ROWS[0]  # director of Spirited Away: Japan


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


# ---- the three tiers ------------------------------------------------------------------------------------


async def test_the_judge_agreeing_earns_1_and_the_row_is_echoed(judged):
    judged.judge.script("A")
    result = await verify(judged, assistant_message("Miyazaki was born in Tokyo, so \\boxed{Japan}"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == ("correct", 1.0, "A")
    assert (result["extracted_answer"], result["ground_truth"]) == ("Japan", "Japan")
    assert (result["is_correct"], result["is_abstain"], result["is_incorrect"]) == (1.0, 0.0, 0.0)
    assert (result["omniscience_index"], result["judge_failure"]) == (1.0, None)
    assert (result["id"], result["question"], result["answer"]) == (ROW["id"], ROW["question"], "Japan")


async def test_the_judge_disagreeing_earns_0(judged):
    judged.judge.script("B")
    result = await verify(judged, assistant_message("\\boxed{China}"))
    assert (result["verdict"], result["reward"], result["is_incorrect"]) == ("incorrect", 0.0, 1.0)
    assert (result["omniscience_index"], result["judge_failure"]) == (-1.0, None)


@pytest.mark.parametrize(
    ("judge_text", "verdict", "reward"),
    [
        ("C", "abstain", 0.5),
        ("NOT_ATTEMPTED", "abstain", 0.5),
        ("**B**", "incorrect", 0.0),
        ("A: CORRECT", "correct", 1.0),
        ("The answer is another country.\nB", "incorrect", 0.0),
    ],
)
async def test_each_grade_earns_its_tier(judged, judge_text, verdict, reward):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("\\boxed{Korea, maybe}"))
    assert (result["verdict"], result["reward"], result["judge_failure"]) == (verdict, reward, None)
    assert result[f"is_{verdict}"] == 1.0


@pytest.mark.parametrize("text", ["\\boxed{[IDK]}", "I would have to look it up. \\boxed{ idk }", "[IDK]"])
async def test_the_abstention_token_earns_the_abstention_reward_without_a_judge_call(judged, text):
    judged.judge.script("A")
    result = await verify(judged, assistant_message(text))
    assert (result["verdict"], result["reward"], result["judge_output"]) == ("abstain", 0.5, None)
    assert (result["is_abstain"], result["omniscience_index"]) == (1.0, 0.0)
    assert judged.judge.requests() == []


@pytest.mark.parametrize("items", [(), (reasoning("Japan"),)], ids=["empty_output", "no_message"])
async def test_no_answer_is_an_abstention_without_a_judge_call(judged, items):
    judged.judge.script("A")
    result = await verify(judged, *items)
    assert (result["verdict"], result["reward"], result["extracted_answer"]) == ("abstain", 0.5, None)
    assert judged.judge.requests() == []


async def test_the_judge_sees_question_target_and_the_boxed_answer_without_thinking(judged):
    judged.judge.script("A")
    await verify(
        judged, assistant_message("<think>Hayao Miyazaki, Tokyo.</think>\\boxed{Korea} no, \\boxed{Japan}")
    )
    (sent,) = judged.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert f"Question: {ROW['question']}\nGold target: Japan\nPredicted answer: Japan\n" in prompt
    assert "Miyazaki" not in prompt and "Korea" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 64, 1.0)


# ---- the judge failing ----------------------------------------------------------------------------------


async def test_a_malformed_verdict_is_a_judge_failure_not_a_wrong_answer(judged):
    judged.judge.script("The prediction matches the gold target.")
    result = await verify(judged, assistant_message("\\boxed{Japan}"))
    assert (result["verdict"], result["reward"], result["judge_output"]) == (None, 0.0, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "no grade" in failure["message"]
    assert (result["is_correct"], result["is_abstain"], result["is_incorrect"]) == (0.0, 0.0, 0.0)


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged, assistant_message("\\boxed{Japan}"))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled here" in failure["message"]
    assert (result["verdict"], result["reward"]) == (None, 0.0)


async def test_a_mistyped_field_is_a_422_naming_it(judged):
    status, result = await post_json(
        judged.url + "/verify", {**ROW, "answer": 1989, "response": response_with()}
    )
    assert status == 422
    assert ["body", "answer"] in [error["loc"] for error in result["detail"]]


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, rollout: int, verdict: str | None) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if verdict is None else None
    reward = {"correct": 1.0, "abstain": 0.5, "incorrect": 0.0, None: 0.0}[verdict]
    return {
        **ROW,
        "response": response_with(),
        "reward": reward,
        "verdict": verdict,
        "extracted_answer": verdict,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


async def test_metrics_report_each_tier_the_omniscience_index_and_judge_failures(judged):
    rollouts = [
        graded(0, 0, "correct"),
        graded(0, 1, "incorrect"),
        graded(1, 0, "abstain"),
        graded(1, 1, "correct"),
        graded(2, 0, None),  # the judgment failed: left out of the tier metrics
        graded(2, 1, "abstain"),
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert metrics["pass@1[avg-of-2]/correct"] == pytest.approx(100 * (0.5 + 0.5 + 0) / 3)
    assert metrics["pass@1[avg-of-2]/abstain"] == pytest.approx(100 * (0 + 0.5 + 1) / 3)
    assert metrics["pass@1[avg-of-2]/incorrect"] == pytest.approx(100 * 0.5 / 3)
    assert metrics["pass@1[avg-of-2]/reward"] == pytest.approx(100 * (0.5 + 0.75 + 0.5) / 3)
    assert metrics["pass@1[avg-of-2]/omniscience_index"] == pytest.approx(100 * (1 - 0.5) / 3)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 6)
    assert metrics["judge_failures/timeout"] == 1
    assert key["pass@1[avg-of-2]/omniscience_index"] == metrics["pass@1[avg-of-2]/omniscience_index"]
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


def test_the_recordings_cover_every_tier():
    assert sorted(rollout["verdict"] for rollout in ROLLOUTS) == [
        "abstain", "abstain", "correct", "correct", "incorrect",
    ]  # fmt: skip
    assert any(rollout["judge_evaluations"] == [] for rollout in ROLLOUTS)  # the [IDK] token, no judge call


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "knowledge")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert resources.model_extra["abstention_reward"] == 0.5


def base_config(**changes: Any) -> dict:
    return {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED, **changes}


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"abstention_reward": 1.0}, "incorrect_reward < abstention_reward < correct_reward"),
        ({"abstention_reward": -0.1}, "incorrect_reward < abstention_reward < correct_reward"),
        ({"abstention_token": "[ ]"}, "abstention_token"),
        ({"use_chat_completions_for_judge": True}, "use_chat_completions_for_judge"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(changes, problem):
    with pytest.raises(ValidationError, match=problem.replace("<", ".")):
        AbstentionConfig.model_validate(base_config(**changes))


def test_a_configured_template_is_used_as_nemo_gym_writes_it():
    template = checked_template("Q={question} T={target} P={predicted_answer}", "judge_prompt_template")
    assert template.format(question="q", target="t", predicted_answer="p") == "Q=q T=t P=p"
    with pytest.raises(ConfigError, match="judge_prompt_template"):
        checked_template("Q={question} G={gold}", "judge_prompt_template")


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
        question="Q?", target="G", predicted_answer="P"
    )
    assert "Question: Q?\nGold target: G\nPredicted answer: P" in filled
    assert all(grade in filled for grade in ("A: CORRECT", "B: INCORRECT", "C: NOT_ATTEMPTED"))


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("\\boxed{Japan}", "Japan"),
        ("First \\boxed{Korea}, finally \\boxed{Japan}", "Japan"),
        ("Japan", "Japan"),
        ("\\boxed{Japan", "\\boxed{Japan"),
        ("<think>maybe Korea</think> \\boxed{Japan}", "Japan"),
        ("reasoning the template opened</thinking>\n\\boxed{Japan}", "Japan"),
    ],
)
def test_the_answer_is_the_last_box_outside_thinking(text, answer):
    assert final_answer(without_thinking(text)) == answer


def test_the_abstention_token_is_compared_loosely():
    assert normalized("[IDK]") == normalized(" idk. ") == normalized("The [ IDK ]") == "idk"


@pytest.mark.parametrize(
    ("text", "grade"),
    [
        ("A", "correct"),
        ("C", "abstain"),
        ("(B)", "incorrect"),
        ("Reasoning.\n**C**", "abstain"),
        ("b", None),
        ("", None),
    ],
)
def test_parse_grade(text, grade):
    assert parse_grade(text) == grade
