"""longmemeval over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    JudgedServer,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_judged_server,
    run_scripted_judge,
    shipped_settings,
    without_verify_flags,
)
from resources_servers.longmemeval.longmemeval_grading import (
    RUBRICS,
    load_prompts,
    parse_verdict,
    without_reasoning,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, reasoning

FOLDER = Path(__file__).resolve().parents[1]
NAME = "longmemeval"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = shipped_settings(FOLDER)
PROMPTS = load_prompts(FOLDER, SHIPPED["judge_prompt_paths"])
ROW = ROWS[1]  # knowledge update: 5k personal best, now 24:10


@pytest.fixture(scope="module")
def judged(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[JudgedServer]:
    with run_judged_server(scripted_upstream, tmp_path_factory.mktemp(NAME), NAME, **SHIPPED) as started:
        yield started


async def verify(judged: JudgedServer, *items: dict, row: dict | None = None, **meta: Any) -> dict:
    row = row or ROW
    body = {
        **row,
        "verifier_metadata": {**row["verifier_metadata"], **meta},
        "response": response_with(*items),
    }
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 200, result
    return result


def sent_prompt(judged: JudgedServer) -> str:
    (sent,) = judged.judge.requests()
    assert [item["role"] for item in sent["input"]] == ["user"]
    return sent["input"][-1]["content"]


# ---- the judge's verdict --------------------------------------------------------------------------------


async def test_the_judge_says_yes_and_the_answer_earns_1(judged):
    judged.judge.script("yes")
    result = await verify(judged, assistant_message("Your best is now 24:10."))
    assert (result["reward"], result["judge_label"], result["judge_raw"], result["judge_failure"]) == (
        1.0,
        True,
        "yes",
        None,
    )
    assert (result["question_id"], result["question_type"], result["rubric"]) == (
        "lme_0002",
        "knowledge-update",
        "knowledge-update",
    )
    assert result["verifier_metadata"] == ROW["verifier_metadata"]
    assert len(result["judge_evaluations"]) == 1


@pytest.mark.parametrize("judge_text", ["no", "No.", "**NO** - it gives the old record"])
async def test_the_judge_says_no_and_the_answer_earns_0(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("Your best is 26 minutes."))
    assert (result["reward"], result["judge_label"], result["judge_failure"]) == (0.0, False, None)


@pytest.mark.parametrize("judge_text", ["The answer matches the reference.", "maybe", ""])
async def test_a_verdict_that_is_neither_yes_nor_no_is_a_judge_failure(judged, judge_text):
    judged.judge.script(judge_text)
    result = await verify(judged, assistant_message("Your best is now 24:10."))
    assert (result["reward"], result["judge_label"], result["judge_raw"]) == (0.0, None, None)
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "neither yes nor no" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(judged):
    judged.judge.script({"status": 403, "body": {"error": {"message": "this model is not enabled here"}}})
    result = await verify(judged, assistant_message("Your best is now 24:10."))
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled here" in failure["message"]
    assert (result["reward"], result["judge_label"]) == (0.0, None)


# ---- which rubric judges ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question_type", "question_id", "abstention", "rubric"),
    [
        ("single-session-user", "q1", False, "single-session-user"),
        ("single-session-assistant", "q2", False, "single-session-assistant"),
        ("single-session-preference", "q3", False, "single-session-preference"),
        ("multi-session", "q4", False, "multi-session"),
        ("temporal-reasoning", "q5", False, "temporal-reasoning"),
        ("knowledge-update", "q6", False, "knowledge-update"),
        ("temporal-reasoning", "q7_abs", False, "abstention"),
        ("multi-session", "q8", True, "abstention"),
    ],
)
async def test_each_question_type_is_judged_with_its_own_prompt(
    judged, question_type, question_id, abstention, rubric
):
    judged.judge.script("yes")
    result = await verify(
        judged,
        assistant_message("An answer."),
        question_type=question_type,
        question_id=question_id,
        abstention=abstention,
    )
    assert (result["rubric"], result["abstention"]) == (rubric, rubric == "abstention")
    expected = PROMPTS[rubric].format(
        question=ROW["verifier_metadata"]["question"], answer="24 minutes 10 seconds", response="An answer."
    )
    assert sent_prompt(judged) == expected


def test_the_seven_shipped_prompts_differ_and_each_fills_all_three_fields():
    assert sorted(PROMPTS) == sorted(RUBRICS)
    assert len(set(PROMPTS.values())) == len(RUBRICS)
    for prompt in PROMPTS.values():
        filled = prompt.format(question="Q-1", answer="A-2", response="R-3")
        assert all(part in filled for part in ("Q-1", "A-2", "R-3", "yes or no"))
    assert "off by exactly one" in PROMPTS["temporal-reasoning"]
    assert "latest" in PROMPTS["knowledge-update"]
    assert "cannot be answered" in PROMPTS["abstention"]


async def test_a_prompt_path_of_the_users_own_is_used(scripted_upstream, tmp_path):
    own = tmp_path / "mine.yaml"
    own.write_text("user: 'OWN RUBRIC {question} | {answer} | {response}'\n")
    paths = {**SHIPPED["judge_prompt_paths"], "knowledge-update": str(own)}
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, tmp_path))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, "judge_prompt_paths": paths}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        server = servers.enter_context(run_instance(config, NAME, tmp_path))
        judge.script("yes")
        await verify(JudgedServer(server, judge), assistant_message("24:10"))
        assert sent_prompt(JudgedServer(server, judge)) == (
            f"OWN RUBRIC {ROW['verifier_metadata']['question']} | 24 minutes 10 seconds | 24:10"
        )


# ---- what the judge is shown ------------------------------------------------------------------------------


async def test_the_judge_sees_the_last_message_without_reasoning(judged):
    judged.judge.script("yes")
    await verify(
        judged,
        assistant_message("26 minutes?"),
        reasoning("the record is 24:10"),
        {**assistant_message("<think>older was 26:00</think>It is 24:10 now."), "id": "m2"},
    )
    prompt = sent_prompt(judged)
    assert "Assistant's answer: It is 24:10 now." in prompt
    assert "26" not in prompt.split("Assistant's answer:")[1]
    sent = judged.judge.requests()
    assert (sent[0]["temperature"], sent[0]["max_output_tokens"]) == (0.0, 64)


@pytest.mark.parametrize("items", [(), (reasoning("24:10"),), (assistant_message("<think>24:10"),)])
async def test_no_answer_is_0_without_asking_the_judge(judged, items):
    judged.judge.script("yes")
    result = await verify(judged, *items)
    assert (result["reward"], result["empty_response"], result["judge_failure"]) == (0.0, True, None)
    assert judged.judge.requests() == []


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"question_type": "open-domain"}, "question_type"),
        ({"question": ""}, "question"),
        ({"abstention": "sometimes"}, "abstention"),
    ],
)
async def test_bad_metadata_is_a_422_naming_the_field(judged, meta, field):
    body = {**ROW, "verifier_metadata": {**ROW["verifier_metadata"], **meta}, "response": response_with()}
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 422
    assert ["body", "verifier_metadata", field] in [error["loc"] for error in result["detail"]]


async def test_missing_metadata_is_a_422(judged):
    body = {"responses_create_params": ROW["responses_create_params"], "response": response_with()}
    status, result = await post_json(judged.url + "/verify", body)
    assert status == 422
    assert ["body", "verifier_metadata"] in [error["loc"] for error in result["detail"]]


# ---- metrics --------------------------------------------------------------------------------------------


def graded(task: int, question_type: str, reward: float | None, abstention: bool = False) -> dict:
    failure = {"kind": "timeout", "message": "late", "attempts": 1} if reward is None else None
    return {
        **ROW,
        "response": response_with(),
        "reward": reward or 0.0,
        "question_type": question_type,
        "abstention": abstention,
        "judge_failure": failure,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_metrics_report_accuracy_per_type_abstention_and_judge_failures(judged):
    rollouts = [
        graded(0, "temporal-reasoning", 1.0),
        graded(1, "temporal-reasoning", 0.0),
        graded(2, "knowledge-update", 1.0),
        graded(3, "single-session-user", 1.0, abstention=True),
        graded(4, "multi-session", None),  # the judgment failed: left out of the accuracy
    ]
    status, result = await post_json(judged.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics, key = result["agent_metrics"], result["key_metrics"]
    assert (metrics["accuracy"], metrics["count"]) == (0.75, 4)
    assert metrics["question_type/temporal-reasoning/accuracy"] == 0.5
    assert metrics["question_type/temporal-reasoning/count"] == 2
    assert metrics["question_type/knowledge-update/accuracy"] == 1.0
    assert "question_type/multi-session/accuracy" not in metrics
    assert (metrics["abstention/accuracy"], metrics["abstention/count"]) == (1.0, 1)
    assert metrics["judge_failure_rate"] == pytest.approx(1 / 5)
    assert metrics["judge_failures/timeout"] == 1
    assert key == {"accuracy": 0.75, "abstention/accuracy": 1.0, "judge_failure_rate": pytest.approx(0.2)}


# ---- recorded data, config, helpers ----------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["question_id"])
async def test_recorded_rollouts_reproduce_their_verdict_and_reward(judged, rollout):
    row = next(row for row in ROWS if row["verifier_metadata"] == rollout["verifier_metadata"])
    judged.judge.script(rollout["judge_raw"])
    status, result = await post_json(judged.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, result
    assert (result["judge_label"], result["reward"]) == (rollout["judge_label"], rollout["reward"])
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(rollout)


def test_the_recordings_cover_both_verdicts_and_five_rubrics():
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}
    assert len({rollout["rubric"] for rollout in ROLLOUTS}) == 5


def without_judge_ids(record: dict) -> dict:
    evaluations = [
        (evaluation["responses_create_params"], evaluation["response"]["output"][-1]["content"][-1]["text"])
        for evaluation in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": evaluations}


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "long_context")
    assert resources.model_extra["judge_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }
    assert set(resources.model_extra["judge_prompt_paths"]) == set(RUBRICS)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("user: 'Q: {question} {gold}'", "gold"),
        ("system: hi", "KeyError"),
        ("user: [1, 2]", "AttributeError"),
    ],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "bad.yaml").write_text(content)
    paths = {**SHIPPED["judge_prompt_paths"], "multi-session": str(tmp_path / "bad.yaml")}
    with pytest.raises(ConfigError, match=f"judge_prompt_paths.multi-session.*{problem}"):
        load_prompts(FOLDER, paths)


def test_prompt_paths_must_name_every_rubric():
    paths = {key: value for key, value in SHIPPED["judge_prompt_paths"].items() if key != "abstention"}
    with pytest.raises(ConfigError, match="missing abstention"):
        load_prompts(FOLDER, {**paths, "open-domain": "x.yaml"})


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("yes", True),
        ("Yes.", True),
        ("NO", False),
        ("no, it is wrong", False),
        ("<think>yes</think>no", False),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) is verdict


@pytest.mark.parametrize("text", ["", "Yesterday", "I would say yes", "not sure"])
def test_parse_verdict_unreadable(text):
    assert parse_verdict(text) is None


def test_without_reasoning():
    assert without_reasoning("<think>a</think> b ") == "b"
    assert without_reasoning("b <think>unfinished") == "b"
    assert without_reasoning("stray</think>c") == "c"
