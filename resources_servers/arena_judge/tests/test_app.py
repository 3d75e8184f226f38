"""arena_judge over HTTP: the server runs as a real process and judges through a real openai_model server in
front of the scripted upstream (the one test double). The gen-base call comes first, then base-gen."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from nemo_gym.config_types import ConfigError
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
from resources_servers.arena_judge.app import load_prompt, sanitize
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "arena_judge"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[3]  # hard_prompt: count the rows of `orders`


@pytest.fixture(scope="module")
def judged(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        settings = {**SHIPPED, "judge_model_server": JUDGE_MODEL_REF}
        config = {**judge.config, NAME: instance_config("resources_servers", NAME, **settings)}
        server = servers.enter_context(run_instance(config, NAME, workdir))
        yield server.url, judge


async def verify(judged: tuple[str, ScriptedJudge], *judge_answers: str | dict, **row: Any) -> dict:
    url, judge = judged
    judge.script(*judge_answers)
    body = {**ROW, **row, "response": response_with(assistant_message("SELECT COUNT(*) FROM orders;"))}
    status, result = await post_json(url + "/verify", body)
    assert status == 200, result
    return result


async def test_both_orders_agreeing_on_the_policy_is_a_win(judged):
    result = await verify(judged, "[[A>B]]", "[[B>>A]]")
    assert (result["reward"], result["combined_score"], result["judge_failure"]) == (1.0, 1.0, None)
    assert (result["verdict_gen_base"], result["verdict_base_gen"]) == ("A>B", "B>>A")
    assert (result["judgement_gen_base"], result["uid"], result["category"]) == (
        "[[A>B]]",
        ROW["uid"],
        "hard_prompt",
    )
    gen_base, base_gen = (request["input"] for request in judged[1].requests())
    assert "write your own" in gen_base[0]["content"] and gen_base[0]["role"] == "system"
    assert "<|Assistant A's Answer Begins|>\nSELECT COUNT(*) FROM orders;" in gen_base[-1]["content"]
    assert f"<|Assistant A's Answer Begins|>\n{ROW['baseline_answer']}" in base_gen[-1]["content"]


async def test_both_orders_agreeing_on_the_baseline_is_a_loss(judged):
    result = await verify(judged, "[[B>>A]]", "[[A>B]]")
    assert (result["reward"], result["combined_score"]) == (0.0, 0.0)


async def test_orders_that_disagree_show_in_the_combined_score(judged):
    # A judge that favours position A: the gen-base reward is a win, both orders together are even.
    result = await verify(judged, "[[A>B]]", "[[A>B]]")
    assert (result["reward"], result["combined_score"]) == (1.0, 0.5)
    # A strong gen-base win (3 battles) against a slight base-gen loss (1): 3 / 4.
    assert (await verify(judged, "[[A>>B]]", "[[A>B]]"))["combined_score"] == 0.75


async def test_a_tie_is_no_win(judged):
    assert (await verify(judged, "[[A=B]]", "[[A=B]]"))["reward"] == 0.0


async def test_a_malformed_base_gen_verdict_is_flagged(judged):
    result = await verify(judged, "[[A>>B]]", "B is the better one")
    assert (result["reward"], result["invalid_base_gen"], result["verdict_base_gen"]) == (1.0, True, None)
    assert result["judge_failure"] is None


async def test_a_malformed_gen_base_verdict_is_a_judge_failure_not_a_loss(judged):
    result = await verify(judged, "[[A>B]] no wait [[B>A]]", "[[B>A]]")
    assert (result["invalid_gen_base"], result["verdict_base_gen"], result["reward"]) == (True, "B>A", 0.0)
    assert result["judge_failure"]["kind"] == "bad_response"


async def test_a_failing_judge_is_a_judge_failure(judged):
    result = await verify(judged, {"status": 403, "body": {"error": {"message": "model not enabled"}}})
    failure = result["judge_failure"]
    assert (failure["kind"], failure["attempts"], result["reward"]) == ("upstream_error", 1, 0.0)
    assert len(judged[1].requests()) == 1, "no second call after the first failed"


async def test_the_category_picks_the_prompt_and_an_unknown_one_falls_back(judged):
    await verify(judged, "[[A=B]]", "[[A=B]]", category="creative_writing")
    system = judged[1].requests()[0]["input"][0]["content"]
    assert "creative writing" in system and "write your own" not in system
    result = await verify(judged, "[[A=B]]", "[[A=B]]", category="poetry")
    assert result["category"] == "hard_prompt"
    assert "write your own" in judged[1].requests()[0]["input"][0]["content"]


def rollout(task: int, first: str | None, second: str | None, category: str = "hard_prompt") -> dict:
    return {
        **ROW,
        "category": category,
        "response": response_with(),
        "reward": float(first in ("A>B", "A>>B")),
        "verdict_gen_base": first,
        "verdict_base_gen": second,
        "judge_failure": None,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
    }


async def aggregate(judged: tuple[str, ScriptedJudge], rollouts: list[dict]) -> dict:
    status, result = await post_json(judged[0] + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    return result


async def test_the_elo_aggregate_is_seeded_and_rises_with_wins(judged):
    even = [rollout(0, "A>B", "A>B"), rollout(1, "B>A", "B>A"), rollout(2, "A=B", "A=B", "creative_writing")]
    better = [*even, rollout(3, "A>B", "B>A"), rollout(4, "A>B", "B>A")]
    first, again = await aggregate(judged, better), await aggregate(judged, better)
    assert first == again, "the bootstrap is seeded"
    metrics = first["agent_metrics"]
    base = (await aggregate(judged, even))["agent_metrics"]
    assert base["arena_elo/score"] == 50.0 and base["arena_elo/elo"] == 1000.0
    assert metrics["arena_elo/score"] > 50.0 and metrics["arena_elo/elo"] > 1000.0
    assert metrics["arena_elo/ci_lower"] < 0 < metrics["arena_elo/ci_upper"]
    assert metrics["arena_elo/creative_writing/score"] == 50.0 and metrics["arena_elo/n"] == 10.0
    assert metrics["pass@1[avg-of-1]/wins"] == pytest.approx(100 * 3 / 5)
    assert metrics["hard_prompt/pass@1[avg-of-1]/double_wins"] == pytest.approx(100 * 2 / 4)
    assert {"arena_elo/score", "arena_elo/ci_lower", "arena_elo/ci_upper"} <= set(first["key_metrics"])


async def test_invalid_verdicts_are_counted_and_failed_calls_left_out(judged):
    failed = {
        **rollout(1, None, None),
        "judge_failure": {"kind": "timeout", "message": "late", "attempts": 3},
    }
    metrics = (await aggregate(judged, [rollout(0, "A>B", None), failed]))["agent_metrics"]
    assert (metrics["arena_elo/invalid_scores"], metrics["arena_elo/n"]) == (1.0, 1.0)
    assert metrics["judge_failure_rate"] == 0.5


@pytest.mark.parametrize("recorded", ROLLOUTS, ids=lambda recorded: recorded["uid"])
async def test_recorded_rollouts_reproduce_their_reward(judged, recorded):
    url, judge = judged
    row = next(row for row in ROWS if row["uid"] == recorded["uid"])
    judge.script(recorded["judgement_gen_base"], recorded["judgement_base_gen"])
    status, result = await post_json(url + "/verify", {**row, "response": recorded["response"]})
    assert status == 200, result
    assert (result["reward"], result["combined_score"]) == (recorded["reward"], recorded["combined_score"])
    assert without_verify_flags(result)["games"] == recorded["games"]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "other")
    assert set(resources.model_extra["judge_prompt_paths"]) == {"hard_prompt", "creative_writing"}


def test_a_prompt_with_an_unknown_placeholder_is_a_config_error(tmp_path):
    (tmp_path / "p.yaml").write_text("user: '{question} {answer}'")
    with pytest.raises(ConfigError, match="judge_prompt_paths"):
        load_prompt(str(tmp_path / "p.yaml"))


def test_sanitize_drops_nul_and_lone_surrogates():
    assert sanitize("a\x00b\ud800c") == "ab?c"
