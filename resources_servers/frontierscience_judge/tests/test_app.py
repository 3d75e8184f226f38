"""frontierscience_judge over HTTP: the server runs as a real process (one per judge mode) and judges
through a real openai_model server in front of the scripted upstream (the one test double)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    ScriptedJudge,
    StartedServer,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
    without_verify_flags,
)
from resources_servers.frontierscience_judge.app import (
    DEFAULT_PROMPTS,
    FrontierScienceConfig,
    final_answer,
    load_judge_prompt,
    read_judgement,
    read_rubric_score,
)
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "frontierscience_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[2]  # Hardy-Weinberg: 0.48
RUBRIC = "4 points: q = 0.4 from q^2 = 0.16. 3 points: p = 0.6. 3 points: 2pq = 0.48."


@dataclass
class Judged:
    server: StartedServer
    judge: ScriptedJudge

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def judges(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        started = {}
        for mode in ("olympiad", "research"):
            settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF, "judge_mode": mode}
            config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
            started[mode] = Judged(servers.enter_context(run_instance(config, NAME, workdir)), judge)
        yield started


@pytest.fixture
def olympiad(judges) -> Judged:
    return judges["olympiad"]


@pytest.fixture
def research(judges) -> Judged:
    return judges["research"]


async def verify(judged: Judged, text: str, **row: Any) -> dict:
    status, result = await post_json(
        judged.url + "/verify", {**ROW, **row, "response": response_with(assistant_message(text))}
    )
    assert status == 200, result
    return result


async def test_olympiad_judge_agreeing_earns_1_and_sees_the_answer_without_thoughts(olympiad):
    olympiad.judge.script("2pq = 0.48 in both.\nJudgement: YES")
    result = await verify(olympiad, "<think>q is 0.4</think>Heterozygotes: 2pq = 0.48")
    assert (result["reward"], result["verdict"], result["judge_failure"]) == (1.0, "YES", None)
    assert result["extracted_answer"] == "Heterozygotes: 2pq = 0.48"
    assert (result["subject"], result["id"], result["rubric_score"]) == ("biology", "fs-0003", None)
    assert result["judge_output"].endswith("Judgement: YES") and len(result["judge_evaluations"]) == 1
    (sent,) = olympiad.judge.requests()
    prompt = sent["input"][-1]["content"]
    assert (
        f"Problem:\n{ROW['question']}\n" in prompt
        and f"Reference answer:\n{ROW['expected_answer']}\n" in prompt
    )
    assert "Attempted answer:\nHeterozygotes: 2pq = 0.48\n" in prompt and "q is 0.4" not in prompt
    assert (sent["temperature"], sent["max_output_tokens"], sent["top_p"]) == (0.0, 2048, 1.0)


@pytest.mark.parametrize(
    "judge_text",
    ["0.24 is half the reference.\nJudgement: NO", "Judgement: YES?\nOn reflection, Judgement: NO"],
)
async def test_olympiad_judge_disagreeing_earns_0(olympiad, judge_text):
    olympiad.judge.script(judge_text)
    result = await verify(olympiad, "2pq = 0.24")
    assert (result["reward"], result["verdict"], result["judge_failure"]) == (0.0, "NO", None)


@pytest.mark.parametrize("judge_text", ["They match.", "Score: 9/10", "Verdict: YES"])
async def test_olympiad_judge_answer_without_a_judgement_is_a_judge_failure(olympiad, judge_text):
    olympiad.judge.script(judge_text)
    result = await verify(olympiad, "2pq = 0.48")
    assert (result["reward"], result["verdict"], result["judge_evaluations"]) == (0.0, None, [])
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("bad_response", 1)
    assert "Judgement: YES/NO" in failure["message"]


async def test_a_failing_judge_is_a_judge_failure(olympiad):
    olympiad.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled for the project"}}}
    )
    result = await verify(olympiad, "2pq = 0.48")
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"]) == ("upstream_error", 1)
    assert "not enabled for the project" in failure["message"]
    assert (result["reward"], result["verdict"]) == (0.0, None)


@pytest.mark.parametrize("text", ["", "<think>still working on q"])
async def test_no_answer_earns_0_without_asking_the_judge(olympiad, text):
    olympiad.judge.script("Judgement: YES")
    result = await verify(olympiad, text)
    assert (result["reward"], result["extracted_answer"], result["judge_failure"]) == (0.0, None, None)
    assert olympiad.judge.requests() == []


@pytest.mark.parametrize(("score", "reward"), [("7/10", 1.0), ("6.5/10", 0.0), ("10/10", 1.0)])
async def test_research_score_at_the_threshold_passes(research, score, reward):
    research.judge.script(f"Item 1: 4 points. Item 2: 3 points.\nScore: {score}")
    result = await verify(research, "q = 0.4, p = 0.6, 2pq = 0.48", rubric=RUBRIC)
    assert (result["reward"], result["verdict"]) == (reward, "YES" if reward else "NO")
    assert result["rubric_score_normalized"] == pytest.approx(result["rubric_score"] / 10)
    assert result["invalid_judge_response"] is False
    prompt = research.judge.requests()[0]["input"][-1]["content"]
    assert f"Rubric:\n{RUBRIC}\n" in prompt and "Answer to grade:\nq = 0.4, p = 0.6, 2pq = 0.48\n" in prompt


async def test_research_rubric_falls_back_to_the_reference_answer(research):
    research.judge.script("Score: 3 out of 10")
    result = await verify(research, "2pq = 0.24")
    assert (result["reward"], result["rubric_score"], result["verdict"]) == (0.0, 3.0, "NO")
    assert f"Rubric:\n{ROW['expected_answer']}\n" in research.judge.requests()[0]["input"][-1]["content"]


async def test_research_judgement_without_a_score_decides_and_is_flagged(research):
    research.judge.script("Judgement: YES")
    result = await verify(research, "2pq = 0.48")
    assert (result["reward"], result["rubric_score"], result["invalid_judge_response"]) == (1.0, None, True)


async def test_research_answer_without_score_or_judgement_is_a_judge_failure(research):
    research.judge.script("A thorough answer.")
    result = await verify(research, "2pq = 0.48")
    assert (result["reward"], result["judge_failure"]["kind"]) == (0.0, "bad_response")
    assert "neither a score" in result["judge_failure"]["message"]


def rollout(
    task: int, subject: str, reward: float, failed: bool = False, rubric: float | None = None
) -> dict:
    return {
        **ROW,
        "subject": subject,
        "response": response_with(),
        "reward": reward,
        "extracted_answer": f"answer {task}",
        "rubric_score_normalized": rubric,
        "judge_failure": {"kind": "timeout", "message": "late", "attempts": 1} if failed else None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_metrics_per_subject_without_failed_judgments(olympiad):
    rollouts = [
        rollout(0, "physics", 1.0, rubric=0.8),
        rollout(1, "physics", 0.0, rubric=0.4),
        rollout(2, "biology", 1.0, rubric=0.9),
        rollout(3, "biology", 0.0, failed=True),
    ]
    status, result = await post_json(olympiad.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["pass@1/accuracy"] == pytest.approx(200 / 3)
    assert metrics["pass@1/rubric_score"] == pytest.approx(70.0)
    assert metrics["physics/pass@1/accuracy"] == pytest.approx(50.0)
    assert metrics["biology/pass@1/accuracy"] == pytest.approx(100.0)
    assert metrics["judge_failure_rate"] == pytest.approx(0.25)
    assert result["key_metrics"]["judge_failure_rate"] == pytest.approx(0.25)


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["id"])
async def test_recorded_rollouts_reproduce_their_reward(olympiad, recorded):
    row = next(row for row in ROWS if row["id"] == recorded["id"])
    olympiad.judge.script(
        *(last_text(evaluation["response"]) for evaluation in recorded["judge_evaluations"])
    )
    status, result = await post_json(olympiad.url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_judge_ids(without_verify_flags(result)) == without_judge_ids(recorded)


def without_judge_ids(record: dict) -> dict:
    """The record with each judge evaluation reduced to its request and answer text (a judge response's ids
    and times are new on every call)."""
    reduced = [
        (item["responses_create_params"], last_text(item["response"])) for item in record["judge_evaluations"]
    ]
    return {**record, "judge_evaluations": reduced}


def last_text(response: dict) -> str:
    return response["output"][-1]["content"][-1]["text"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "other")
    assert resources.model_extra["judge_mode"] == "olympiad"
    assert resources.model_extra["rubric_pass_score_threshold"] == 7.0


@pytest.mark.parametrize(
    ("key", "value"),
    [("use_chat_completions_for_judge", True), ("judge_mode", "essay"), ("rubric_pass_score_threshold", 11)],
)
def test_bad_settings_are_refused_naming_the_key(key, value):
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    with pytest.raises(ValidationError, match=key):
        FrontierScienceConfig.model_validate({**base, key: value})


@pytest.mark.parametrize(
    ("content", "problem"),
    [("user: 'Q: {question} {answer}'", "answer"), ("system: hi", "user"), ("user: '{0}'", "positional")],
)
def test_a_broken_prompt_file_is_a_config_error(tmp_path, content, problem):
    (tmp_path / "judge.yaml").write_text(content)
    with pytest.raises(ConfigError, match=f"judge_prompt_path.*{problem}"):
        load_judge_prompt(str(tmp_path / "judge.yaml"))


@pytest.mark.parametrize(("mode", "ending"), [("olympiad", "Judgement: NO"), ("research", "Score: X/10")])
def test_the_shipped_prompts_fill_and_ask_for_what_is_read(mode, ending):
    prompt = load_judge_prompt(DEFAULT_PROMPTS[mode])
    filled = prompt.user.format(question="Q", expected_answer="E", rubric="R", generation="G")
    assert "Q" in filled and "G" in filled and ending in filled


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Judgement: YES", "YES"),
        ("judgement: no", "NO"),
        ("Judgment: **YES**", "YES"),
        ("Judgement: YES\nJudgement: NO", "NO"),
        ("YES", None),
    ],
)
def test_read_judgement(text, verdict):
    assert read_judgement(text) == verdict


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("Score: 7/10", 7.0),
        ("Final score: 3.5 out of 5", 7.0),
        ("FINAL_SCORE[8] / MAX_POSSIBLE_SCORE[10]", 8.0),
        ("Score: 6", 6.0),
        ("Score: 9/10\nrevised score: 5/10", 5.0),
        ("Score: 4/0", None),
        ("7/10", None),
        ("", None),
    ],
)
def test_read_rubric_score(text, score):
    assert read_rubric_score(text, 10.0) == score


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("<think>a</think> B", "B"),
        ("<thinking>a</thinking>B <think>c</think>", "B"),
        ("reasoning without an opening tag</think>B", "B"),
        ("<think>never closed", ""),
        ("plain", "plain"),
    ],
)
def test_final_answer(text, answer):
    assert final_answer(text) == answer
