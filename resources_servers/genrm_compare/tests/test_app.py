"""genrm_compare over HTTP: real server processes judging through a real openai_model server in front of
the scripted upstream (the one test double). Cohort members are sent concurrently, as a collector does;
which member index an answer gets depends on arrival order, so expectations are computed from the answers'
own scripted preferences."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.http.client import get_response_json, request
from nemo_gym.http.deadlines import DEADLINE_HEADER
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
)
from resources_servers.genrm_compare.app import GenRMCompareConfig
from resources_servers.genrm_compare.grading import (
    Verdict,
    comparison_pairs,
    load_prompt,
    parse_verdict,
    simple_tiebreaker,
)
from tests.upstream_script import ScriptedUpstream, assistant_message

FOLDER = Path(__file__).resolve().parents[1]
NAME = "genrm_compare"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SHIPPED = yaml.safe_load((FOLDER / "configs" / f"{NAME}.yaml").read_text())[NAME]["resources_servers"][NAME]
ROW = ROWS[0]

# name -> settings of one server instance; every instance judges with the same scripted judge.
INSTANCES: dict[str, dict[str, Any]] = {
    "circular2": {"num_rollouts_per_prompt": 2, "genrm_parse_retries": 2, "genrm_parse_retry_sleep_s": 0},
    "circular3": {"num_rollouts_per_prompt": 3},
    "circular4": {"num_rollouts_per_prompt": 4},
    "all_pairs4": {"num_rollouts_per_prompt": 4, "comparison_strategy": "all_pairs"},
    "two_judges3": {"num_rollouts_per_prompt": 3, "num_judges_per_comparison": 2},
    "short_deadline2": {"num_rollouts_per_prompt": 2, "cohort_deadline_s": 2},
}


class Servers:
    def __init__(self, judge: ScriptedJudge, started: dict[str, StartedServer]) -> None:
        self.judge, self.started = judge, started

    def url(self, instance: str) -> str:
        return self.started[instance].url


@pytest.fixture(scope="module")
def servers(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    workdir = tmp_path_factory.mktemp(NAME)
    with ExitStack() as stack:
        judge = stack.enter_context(run_scripted_judge(scripted_upstream, workdir))
        started = {}
        for instance, settings in INSTANCES.items():
            merged = {
                **SHIPPED,
                "genrm_model_server": JUDGE_MODEL_REF,
                "cohort_deadline_s": 60,
                "judge_backoff_base_s": 0.01,
                "judge_backoff_max_s": 0.01,
                **settings,
            }
            config = {**judge.config, instance: instance_config("resources_servers", NAME, **merged)}
            started[instance] = stack.enter_context(run_instance(config, instance, workdir))
        yield Servers(judge, started)


def verdict_text(score_1: float, score_2: float, ranking: float) -> str:
    return f'Reasoning.\n{{"score_1": {score_1}, "score_2": {score_2}, "ranking": {ranking}}}'


def pair_fragment(first: str, second: str) -> str:
    """How the pair (first as response_1, second as response_2) appears in the judge request's JSON."""
    text = f"<response_1>\n{first}\n</response_1>\n\n<response_2>\n{second}\n</response_2>"
    return json.dumps(text)[1:-1]


def script_preferences(
    judge: ScriptedJudge, table: dict[tuple[str, str], tuple[float, float, float]]
) -> None:
    judge.script(
        *(
            {"match": pair_fragment(first, second), "output": [message(verdict_text(*verdict))]}
            for (first, second), verdict in table.items()
        )
    )


def message(text: str) -> dict:
    return assistant_message(text)


async def verify_all(url: str, answers: list[str], **row: Any) -> list[dict]:
    async def one(answer: str) -> dict:
        body = {**ROW, **row, "response": response_with(assistant_message(answer))}
        status, result = await post_json(url + "/verify", body)
        assert status == 200, result
        return result

    return list(await asyncio.gather(*(one(answer) for answer in answers)))


def expected_rewards(results: list[dict], answers: list[str], table: dict) -> dict[str, float]:
    """Each answer's reward recomputed from the comparisons the server reports and the scripted verdicts."""
    by_member = {result["cohort_member"]: answer for result, answer in zip(results, answers, strict=True)}
    seen = {
        (c["response_i"], c["response_j"], c["judge_idx"])
        for result in results
        for c in result["comparisons"]
    }
    verdicts = [(i, j, Verdict(*table[(by_member[i], by_member[j])])) for i, j, _ in sorted(seen)]
    rewards, _ = simple_tiebreaker(len(answers), verdicts, 3.0)
    return {by_member[index]: reward for index, reward in enumerate(rewards)}


def all_orders(scores: dict[str, float], ties: dict[frozenset, float]) -> dict:
    """A judge preferring answers by `scores`; for equal scores, `ties` says how strongly (ranking) the
    alphabetically first answer wins whichever slot it is in."""
    table = {}
    for first in scores:
        for second in scores:
            if first == second:
                continue
            ranking = 3.5
            if frozenset((first, second)) in ties:
                lead = ties[frozenset((first, second))]  # ranking when the earlier name is response_1
                ranking = lead if first < second else 7 - lead
            table[(first, second)] = (scores[first], scores[second], ranking)
    return table


# ---- a cohort fills and is graded --------------------------------------------------------------------------


async def test_a_full_cohort_gives_each_member_its_aggregate_of_the_scripted_preferences(servers):
    answers = ["ALPHA", "BRAVO", "CHARLIE"]
    table = all_orders({"ALPHA": 5, "BRAVO": 3, "CHARLIE": 3}, {frozenset(("BRAVO", "CHARLIE")): 2})
    script_preferences(servers.judge, table)
    results = await verify_all(servers.url("circular3"), answers)
    rewards = {answer: result["reward"] for answer, result in zip(answers, results, strict=True)}
    assert rewards == pytest.approx(expected_rewards(results, answers, table))
    assert rewards["ALPHA"] == 5.0  # best in both of its comparisons
    # BRAVO and CHARLIE tie at 3; the ranking (BRAVO better) splits them: 3 + 1.5 vs 3 - 1.5. Each also
    # scored 3 against ALPHA.
    assert rewards["BRAVO"] == pytest.approx((3 + 4.5) / 2) and rewards["CHARLIE"] == pytest.approx(
        (3 + 1.5) / 2
    )
    assert sorted(result["cohort_member"] for result in results) == [0, 1, 2]
    assert {result["cohort_size"] for result in results} == {3}
    assert all(not result["mask_sample"] and result["judge_failure"] is None for result in results)
    assert all(len(result["judge_evaluations"]) == 2 for result in results)  # its two comparisons
    assert [result["tiebreak_usage_rate"] for result in results] == [pytest.approx(1 / 3)] * 3
    question = ROW["responses_create_params"]["input"][0]["content"]
    assert all(result["responses_create_params"]["input"][0]["content"] == question for result in results)


async def test_the_genrm_sees_the_prompt_and_both_candidates_as_a_user_message(servers):
    table = all_orders({"ALPHA": 4, "BRAVO": 2}, {})
    script_preferences(servers.judge, table)
    await verify_all(servers.url("circular2"), ["ALPHA", "BRAVO"])
    sent = servers.judge.requests()
    assert len(sent) == 2  # circular over two: (0, 1) and (1, 0)
    for body in sent:
        assert [item["role"] for item in body["input"]] == ["user"]
        prompt = body["input"][0]["content"]
        assert "user: " + ROW["responses_create_params"]["input"][0]["content"] in prompt
        assert (body["temperature"], body["max_output_tokens"]) == (0.0, 4096)
    pairs = {
        (body["input"][0]["content"].find("ALPHA") < body["input"][0]["content"].find("BRAVO"))
        for body in sent
    }
    assert pairs == {True, False}  # each answer is response_1 once


@pytest.mark.parametrize(
    ("instance", "comparisons"), [("circular4", 4), ("all_pairs4", 6), ("two_judges3", 6)]
)
async def test_the_strategy_decides_how_many_comparisons_run(servers, instance, comparisons):
    answers = ["ALPHA", "BRAVO", "CHARLIE", "DELTA"][: INSTANCES[instance]["num_rollouts_per_prompt"]]
    table = all_orders(dict.fromkeys(answers, 4), {})
    script_preferences(servers.judge, table)
    results = await verify_all(servers.url(instance), answers)
    assert len(servers.judge.requests()) == comparisons
    reported = {(c["response_i"], c["response_j"], c["judge_idx"]) for r in results for c in r["comparisons"]}
    assert len(reported) == comparisons
    assert all(result["reward"] == 4.0 for result in results)  # ties at the tie point move nothing


# ---- failures are marked, never scored -------------------------------------------------------------------


async def test_a_verdict_without_json_is_asked_again_then_the_cohort_is_masked(servers):
    servers.judge.script({"match": "<response_1>", "output": [message("Both are fine, I think.")]})
    results = await verify_all(servers.url("circular2"), ["ALPHA", "BRAVO"])
    assert len(servers.judge.requests()) == 2 * 3  # two comparisons, each asked 1 + genrm_parse_retries times
    for result in results:
        assert (result["mask_sample"], result["failure_kind"], result["reward"]) == (
            True,
            "judge_failed",
            0.0,
        )
        failure = result["judge_failure"]
        assert (failure["kind"], failure["attempts"]) == ("bad_response", 3)
        assert "Both are fine" in failure["message"]


async def test_a_malformed_verdict_then_a_good_one_grades_normally(servers):
    servers.judge.script(
        {"output": [message("no verdict yet")]},
        {"output": [message(verdict_text(5, 1, 1))]},
        {"output": [message(verdict_text(5, 1, 1))]},
    )
    results = await verify_all(servers.url("circular2"), ["ALPHA", "BRAVO"])
    assert len(servers.judge.requests()) == 3
    # Whatever the slot, response_1 scored 5: each member was response_1 once and response_2 once.
    assert [result["reward"] for result in results] == [3.0, 3.0]
    assert all(result["judge_failure"] is None and not result["mask_sample"] for result in results)


async def test_a_failing_judge_masks_the_cohort_with_the_failure(servers):
    servers.judge.script(
        {"status": 403, "body": {"error": {"message": "this model is not enabled"}}},
        {"status": 403, "body": {"error": {"message": "this model is not enabled"}}},
    )
    results = await verify_all(servers.url("circular2"), ["ALPHA", "BRAVO"])
    for result in results:
        assert (result["mask_sample"], result["failure_kind"]) == (True, "judge_failed")
        assert result["judge_failure"]["kind"] == "upstream_error"
        assert "not enabled" in result["judge_failure"]["message"]


async def test_an_unfilled_cohort_is_masked_at_its_deadline_without_asking_the_judge(servers):
    servers.judge.script()
    (result,) = await verify_all(servers.url("short_deadline2"), ["ALPHA"])
    assert (result["mask_sample"], result["failure_kind"]) == (True, "cohort_incomplete")
    assert "1 of 2" in result["failure_reason"]
    assert servers.judge.requests() == []
    # The dead cohort is gone: the next two members form a fresh, complete one.
    script_preferences(servers.judge, all_orders({"ALPHA": 4, "BRAVO": 2}, {}))
    results = await verify_all(servers.url("short_deadline2"), ["ALPHA", "BRAVO"])
    assert sorted(result["reward"] for result in results) == [2.0, 4.0]


async def test_a_member_whose_caller_runs_out_of_time_stops_waiting_and_the_cohort_fills_later(servers):
    """A caller's announced deadline (X-Gym-Deadline-S) ends that member's wait, masked; the cohort (whose
    own deadline is 60 s here) stays open and grades when its last member arrives."""
    url = servers.url("circular2") + "/verify"
    body = {**ROW, "_ng_task_index": 7, "response": response_with(assistant_message("ALPHA"))}
    answer = await request("POST", url, json=body, headers={DEADLINE_HEADER: "0.5"})
    early = await get_response_json(answer)
    assert answer.status == 200, early
    assert (early["mask_sample"], early["failure_kind"]) == (True, "cohort_incomplete")
    assert "before the caller's deadline" in early["failure_reason"]
    script_preferences(servers.judge, all_orders({"ALPHA": 4, "BRAVO": 2}, {}))
    (late,) = await verify_all(servers.url("circular2"), ["BRAVO"], _ng_task_index=7)
    assert (late["mask_sample"], late["reward"]) == (False, 2.0)


async def test_interleaved_cohorts_of_two_tasks_do_not_mix(servers):
    scores = {"ALPHA": 5, "BRAVO": 1, "CHARLIE": 2, "DELTA": 4}
    script_preferences(servers.judge, all_orders(scores, {}))
    url = servers.url("circular2")
    results = await asyncio.gather(
        verify_all(url, ["ALPHA"], _ng_task_index=0),
        verify_all(url, ["CHARLIE"], _ng_task_index=1),
        verify_all(url, ["BRAVO"], _ng_task_index=0),
        verify_all(url, ["DELTA"], _ng_task_index=1),
    )
    rewards = [result["reward"] for (result,) in results]
    assert rewards == [5.0, 2.0, 1.0, 4.0]  # each answer against its own cohort only
    for body in servers.judge.requests():
        text = body["input"][0]["content"]
        assert ("ALPHA" in text) == ("BRAVO" in text) and ("CHARLIE" in text) == ("DELTA" in text)


# ---- metrics, recorded data, config, pure pieces ----------------------------------------------------------


async def test_masked_members_stay_out_of_the_reward_statistics_and_are_counted(servers):
    def row(task: int, rollout: int, reward: float, **fields: Any) -> dict:
        fields = {"_ng_task_index": task, "_ng_rollout_index": rollout, **fields}
        return {**ROW, "response": response_with(), "reward": reward, **fields}

    masked = {"mask_sample": True, "failure_kind": "judge_failed"}
    rollouts = [row(0, 0, 4.0), row(0, 1, 2.0), row(1, 0, 0.0, **masked), row(1, 1, 0.0, **masked)]
    url = servers.url("circular2") + "/aggregate_metrics"
    status, result = await post_json(url, {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["mean/reward"] == pytest.approx(3.0)  # the masked zeros are not rewards
    assert (metrics["coverage/masked_rollouts"], metrics["coverage/fully_masked_tasks"]) == (2, 1)


def test_the_recorded_rollouts_are_one_complete_cohort_with_its_judge_calls():
    assert sorted(rollout["cohort_member"] for rollout in ROLLOUTS) == list(
        range(SHIPPED["num_rollouts_per_prompt"])
    )
    assert len({rollout["_ng_task_index"] for rollout in ROLLOUTS}) == 1
    for rollout in ROLLOUTS:
        assert not rollout["mask_sample"] and len(rollout["judge_evaluations"]) == 2
        texts = [e["response"]["output"][-1]["content"][-1]["text"] for e in rollout["judge_evaluations"]]
        verdicts = [parse_verdict(text, 3.0, 3.5) for text in texts]
        expected, _ = simple_tiebreaker(2, [(0, 1, verdicts[0]), (1, 0, verdicts[1])], 3.0)
        assert rollout["reward"] == expected[0]


def test_config_declares_the_environment():
    _, resources, _ = check_environment_config(FOLDER, NAME, "rlhf")
    assert resources.model_extra["genrm_model_server"] == {
        "type": "responses_api_models",
        "name": "policy_model",
    }


def test_bad_settings_are_refused_naming_the_key():
    base = {"name": NAME, "host": "127.0.0.1", "port": 0, **SHIPPED}
    for key, value in [
        ("comparison_strategy", "round_robin"),
        ("aggregator_method", "mean"),
        ("num_rollouts_per_prompt", 0),
        ("use_principle", True),
        ("reasoning_bonus", 0.5),
    ]:
        with pytest.raises(ValidationError, match=key):
            GenRMCompareConfig.model_validate({**base, key: value})
    config = GenRMCompareConfig.model_validate(base)
    assert config.judge_model_server == config.genrm_model_server  # the GenRM is asked through nemo_gym.judge


def test_a_broken_prompt_file_is_a_config_error(tmp_path):
    (tmp_path / "p.yaml").write_text("user: '{conversation} {answer}'")
    with pytest.raises(ConfigError, match="comparison_prompt_path"):
        load_prompt(tmp_path, "p.yaml")


@pytest.mark.parametrize(
    ("strategy", "size", "pairs"),
    [
        ("circular", 4, [(0, 1), (1, 2), (2, 3), (3, 0)]),
        ("all_pairs", 4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]),
        ("circular", 2, [(0, 1), (1, 0)]),
        ("circular", 1, []),
    ],
)
def test_comparison_pairs(strategy, size, pairs):
    assert comparison_pairs(strategy, size) == pairs


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"score_1": 4, "score_2": 2, "ranking": 2}', Verdict(4, 2, 2)),
        (
            'think {"a": 1}\n```json\n{"score_1": 1, "score_2": 5, "ranking": 6}\n```\n{"ranking": 1}',
            Verdict(1, 5, 6),
        ),
        ('draft {"score_1": 1} final {"score_1": 5, "score_2": 4, "ranking": 3}', Verdict(5, 4, 3)),
        ('{"ranking": 5}', Verdict(3.0, 3.0, 5)),
        ('{"overall": {"score_1": 2, "score_2": 3, "ranking": 4}}', Verdict(2, 3, 4)),
        ('{"note": "a } brace", "score_1": 3, "score_2": 3, "ranking": 3.5}', Verdict(3, 3, 3.5)),
        ("no json here", None),
        ('{"score_1": "high"}', None),
        ('{"score_1": 4, ', None),
    ],
)
def test_parse_verdict(text, verdict):
    assert parse_verdict(text, 3.0, 3.5) == verdict


def test_simple_tiebreaker_breaks_equal_scores_by_ranking_and_defaults_the_uncompared():
    rewards, ties = simple_tiebreaker(3, [(0, 1, Verdict(4, 4, 1.5)), (0, 1, Verdict(5, 3, 4))], 3.0)
    assert rewards == [(6 + 5) / 2, (2 + 3) / 2, 3.0]
    assert ties == 0.5
