"""arena over HTTP: the server runs as a real process and judges through a real openai_model server in front
of the scripted upstream (the one test double). Game 1 puts the policy in position A, game 2 in B."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    ScriptedJudge,
    check_environment_config,
    instance_config,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_scripted_judge,
    without_verify_flags,
)
from resources_servers.arena.pairwise import arena_elo_metrics, parse_verdict
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "arena"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[2]


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        server = servers.enter_context(run_instance(config, NAME, workdir))
        yield server.url, judge


async def verify(
    judged: tuple[str, ScriptedJudge], *judge_answers: str | dict, answer: str = "Rayleigh."
) -> dict:
    url, judge = judged
    judge.script(*judge_answers)
    items = (assistant_message(answer),) if answer else ()
    status, result = await post_json(url + "/verify", {**ROW, "response": response_with(*items)})
    assert status == 200, result
    return result


async def test_both_orders_agreeing_on_the_policy_is_a_win(judged):
    result = await verify(judged, "[[A>B]]", "[[B>A]]")
    assert (result["reward"], result["verdict_gen_base"], result["verdict_base_gen"]) == (1.0, "A>B", "B>A")
    assert (result["invalid_gen_base"], result["invalid_base_gen"], result["judge_failure"]) == (
        False,
        False,
        None,
    )
    assert result["question_id"] == ROW["question_id"] and result["policy_answer"] == "Rayleigh."
    first, second = judged[1].requests()
    assert "[Answer of assistant A]\nRayleigh." in first["input"][-1]["content"]
    assert f"[Answer of assistant A]\n{ROW['baseline_answer']}" in second["input"][-1]["content"]
    assert [m["role"] for m in first["input"]] == ["system", "user"]


async def test_both_orders_agreeing_on_the_baseline_is_a_loss(judged):
    assert (await verify(judged, "[[B>>A]]", "[[A>B]]"))["reward"] == 0.0


async def test_position_bias_averages_to_the_combined_score(judged):
    # The judge prefers whatever it reads first: one win and one loss, each counted once.
    assert (await verify(judged, "[[A>B]]", "[[A>B]]"))["reward"] == 0.5
    # A strong first-position win counts verdict_weight (3) times against one loss: 3 / 4.
    assert (await verify(judged, "[[A>>B]]", "[[A>B]]"))["reward"] == 0.75


async def test_a_malformed_verdict_in_one_order_is_flagged_and_the_other_order_scores(judged):
    result = await verify(judged, "I like the first one more.", "[[A=B]]")
    assert (result["reward"], result["verdict_gen_base"], result["invalid_gen_base"]) == (0.5, None, True)
    assert (result["invalid_base_gen"], result["judge_failure"]) == (False, None)


async def test_no_score_from_either_order_is_a_judge_failure_not_a_loss(judged):
    result = await verify(judged, "[[A>B]] or maybe [[B>A]]", "[[A?B]]")
    assert (result["invalid_gen_base"], result["invalid_base_gen"]) == (True, True)
    assert result["judge_failure"]["kind"] == "bad_response" and result["reward"] == 0.0


async def test_both_answers_bad_is_a_grade_of_zero(judged):
    result = await verify(judged, "[[BB]]", "[[BB]]")
    assert (result["reward"], result["verdict_gen_base"], result["judge_failure"]) == (0.0, "BB", None)


async def test_a_failing_judge_is_a_judge_failure(judged):
    result = await verify(
        judged, "[[A>B]]", {"status": 403, "body": {"error": {"message": "model not enabled"}}}
    )
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"], result["reward"]) == ("upstream_error", 1, 0.0)
    assert "not enabled" in failure["message"] and result["verdict_gen_base"] is None


async def test_no_answer_is_zero_without_asking_the_judge(judged):
    result = await verify(judged, "[[A>B]]", "[[B>A]]", answer="")
    assert (result["reward"], result["policy_answer"], result["games"]) == (0.0, None, [])
    assert judged[1].requests() == []


def rollout(task: int, first: str | None, second: str | None, reward: float = 0.0) -> dict:
    return {
        **ROW,
        "response": response_with(),
        "reward": reward,
        "verdict_gen_base": first,
        "verdict_base_gen": second,
        "judge_failure": None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def test_aggregate_reports_a_seeded_win_rate_with_an_interval(judged):
    rollouts = [rollout(0, "A>B", "B>A", 1.0), rollout(1, "A>B", "A>B", 0.5), rollout(2, "B>A", "A>B")]
    answers = []
    for _ in range(2):
        status, result = await post_json(judged[0] + "/aggregate_metrics", {"verify_responses": rollouts})
        assert status == 200, result
        answers.append(result)
    assert answers[0] == answers[1], "the bootstrap is seeded"
    metrics = answers[0]["agent_metrics"]
    assert metrics["arena_elo/score"] == 50.0 and metrics["arena_elo/n"] == 6.0
    assert metrics["arena_elo/ci_lower"] < 0 < metrics["arena_elo/ci_upper"]
    assert metrics["pass@1[avg-of-1]/score"] == pytest.approx(100 * 1.5 / 3)
    assert "arena_elo/score" in answers[0]["key_metrics"]


def test_more_wins_move_the_score_and_elo_up_and_the_seed_fixes_the_interval():
    def elo(pairs: list[tuple[str, str]], seed: int = 42) -> dict:
        tasks = [[{"verdict_gen_base": a, "verdict_base_gen": b, "category": "c"}] for a, b in pairs]
        return arena_elo_metrics(tasks, weight=3, rounds=100, seed=seed)

    even = [("A>B", "A>B"), ("B>A", "B>A")] * 3
    better = even + [("A>B", "B>A")] * 3
    assert elo(better)["arena_elo/score"] > elo(even)["arena_elo/score"] == 50.0
    assert elo(better)["arena_elo/elo"] > elo(even)["arena_elo/elo"] == 1000.0
    assert elo(better) == elo(better) and elo(better)["arena_elo/c/score"] == elo(better)["arena_elo/score"]
    assert elo(better, seed=1)["arena_elo/score"] == elo(better)["arena_elo/score"]
    assert elo([("A>B", None)])["arena_elo/invalid_scores"] == 1.0


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("My final verdict: [[A>>B]]", "A>>B"),
        ("[[B>A]] ... so again [[B>A]]", "B>A"),
        ("[[A>B]] then [[B>A]]", None),
        ("A is better", None),
        ("[[A=]]", None),
        ("[[BB]]", None),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text) == verdict
    assert parse_verdict("[[BB]]", allow_both_bad=True) == "BB"


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["question_id"])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    url, judge = judged
    row = next(row for row in ROWS if row["question_id"] == recorded["question_id"])
    judge.script(*(game["judge_output"] for game in recorded["games"]))
    status, result = await post_json(url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert result["reward"] == recorded["reward"]
    assert without_verify_flags(result)["games"] == recorded["games"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "rlhf")
    assert resources.model_extra["verdict_weight"] == 3
