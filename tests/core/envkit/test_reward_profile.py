import math
import statistics
from typing import Any

import pytest
from fastapi import HTTPException

from nemo_gym.http.client import get_response_json, request
from nemo_gym.reward_profile import (
    AggregateMetricsBody,
    AggregateMetricsMixin,
    add_avg_sample_std_dev,
    column_statistics,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    count_of,
    failure_counts,
    highest_k_metrics,
    numeric_record,
)


def rollout(task: int, index: int, reward: float, input_tokens: int | None = None) -> dict:
    row = {"_ng_task_index": task, "_ng_rollout_index": index, "reward": reward, "agent_ref": {"name": "a"}}
    if input_tokens is not None:
        row["response"] = {
            "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0}}
        }
    return row


def failure(task: int, index: int, failure_class: str) -> dict:
    """A failure record as the collector writes it; its reward 0 must not reach any statistic."""
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": index,
        "_ng_failure_class": failure_class,
        "reward": 0.0,
        "agent_ref": {"name": "a"},
    }


WORKED_EXAMPLE = [rollout(0, 0, 1.0, 10), rollout(0, 1, 0.0, 12), rollout(1, 0, 1.0), rollout(1, 1, 1.0)]


async def aggregate(server, verify_responses: list[dict]):
    response = await request(
        "POST", server.url + "/aggregate_metrics", json={"verify_responses": verify_responses}
    )
    return response.status, await get_response_json(response)


# ---------------------------------------------------------------------------------------------------------
# /aggregate_metrics over HTTP


async def test_aggregate_metrics_of_the_worked_example(counter_server):
    status, metrics = await aggregate(counter_server, WORKED_EXAMPLE)
    assert status == 200
    agent = metrics["agent_metrics"]
    assert agent["mean/reward"] == 0.75
    assert agent["median/reward"] == 1.0
    assert agent["std/reward"] == 0.5
    assert (agent["min/reward"], agent["max/reward"]) == (0.0, 1.0)
    assert agent["mean/input_tokens"] == 11.0
    assert math.isclose(agent["std/input_tokens"], math.sqrt(2))
    assert agent["num_failed_rollouts"] == 0
    assert not any(key.endswith(("_ng_task_index", "_ng_rollout_index")) for key in agent)
    assert metrics["key_metrics"] == {key: value for key, value in agent.items() if key.startswith("mean/")}
    groups = metrics["group_level_metrics"]
    assert [group["_ng_task_index"] for group in groups] == [0, 1]
    assert "mean/input_tokens" not in groups[1]
    assert groups[1]["mean/reward"] == 1.0
    assert groups[1]["std/reward"] == 0.0
    for group in groups:
        assert (group["num_rollouts"], group["expected_num_rollouts"], group["missing_num_rollouts"]) == (
            2,
            2,
            0,
        )
        assert group["reward_profile_completion_pct"] == 100.0
        assert group["num_failed_rollouts"] == 0
        assert group["sample"] == {"agent_ref": {"name": "a"}}
    assert groups[0]["rollout_infos"] == [
        {"rollout_id": "0:0", "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0, "input_tokens": 10},
        {"rollout_id": "0:1", "_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 0.0, "input_tokens": 12},
    ]
    assert [info["rollout_id"] for info in groups[1]["rollout_infos"]] == ["1:0", "1:1"]


async def test_expected_rollouts_is_the_largest_task_and_infos_are_sorted(counter_server):
    extra_numbers = {**rollout(0, 2, 0.5), "turns": 3, "passed": True, "answer": "x"}
    request_body = [extra_numbers, rollout(1, 0, 1.0), rollout(0, 0, 1.0), rollout(0, 1, 0.0)]
    status, metrics = await aggregate(counter_server, request_body)
    assert status == 200
    task0, task1 = metrics["group_level_metrics"]
    assert [info["_ng_rollout_index"] for info in task0["rollout_infos"]] == [0, 1, 2]
    assert task0["rollout_infos"][2] == {
        "rollout_id": "0:2",
        "_ng_task_index": 0,
        "_ng_rollout_index": 2,
        "reward": 0.5,
        "turns": 3,
        "passed": 1,
    }
    assert (task0["num_rollouts"], task0["expected_num_rollouts"], task0["missing_num_rollouts"]) == (3, 3, 0)
    assert (task1["num_rollouts"], task1["expected_num_rollouts"], task1["missing_num_rollouts"]) == (1, 3, 2)
    assert math.isclose(task1["reward_profile_completion_pct"], 100 / 3)
    assert task1["std/reward"] == 0.0
    assert "std/turns" not in task0  # one value among three rollouts: no spread to report


async def test_failed_rollouts_are_counted_not_profiled(counter_server):
    request_body = [
        rollout(0, 0, 1.0, 10),
        failure(0, 1, "http_500"),
        rollout(1, 0, 0.5),
        failure(1, 1, "timeout"),
        failure(1, 1, "timeout"),  # a second attempt at the same rollout is no duplicate
        failure(2, 0, "connection"),
    ]
    status, metrics = await aggregate(counter_server, request_body)
    assert status == 200
    agent = metrics["agent_metrics"]
    assert agent["mean/reward"] == 0.75
    assert agent["min/reward"] == 0.5
    assert {key: value for key, value in agent.items() if key.startswith("num_failed")} == {
        "num_failed_rollouts": 4,
        "num_failed_rollouts/connection": 1,
        "num_failed_rollouts/http_500": 1,
        "num_failed_rollouts/timeout": 2,
    }
    groups = {group["_ng_task_index"]: group for group in metrics["group_level_metrics"]}
    assert groups[0]["mean/reward"] == 1.0
    assert [info["rollout_id"] for info in groups[0]["rollout_infos"]] == ["0:0"]
    assert (groups[0]["num_rollouts"], groups[0]["num_failed_rollouts"]) == (1, 1)
    assert (groups[0]["expected_num_rollouts"], groups[0]["missing_num_rollouts"]) == (2, 1)
    assert groups[0]["reward_profile_completion_pct"] == 50.0
    assert groups[1]["num_failed_rollouts"] == 2
    assert groups[2]["num_rollouts"] == 0
    assert groups[2]["reward_profile_completion_pct"] == 0.0
    assert not any(key.startswith("mean/") for key in groups[2])


def masked(task: int, index: int, reward: float) -> dict:
    """A result its resources server masked: its reward could not be measured."""
    return {**rollout(task, index, reward), "mask_sample": True, "failure_kind": "verifier_error"}


async def test_masked_rollouts_are_left_out_and_coverage_says_how_many(counter_server):
    request_body = [
        rollout(0, 0, 1.0),
        masked(0, 1, 0.0),
        masked(1, 0, 0.0),
        masked(1, 1, 0.0),
        rollout(2, 0, 0.5),
    ]
    status, metrics = await aggregate(counter_server, request_body)
    assert status == 200
    agent = metrics["agent_metrics"]
    assert (agent["mean/reward"], agent["min/reward"]) == (0.75, 0.5)  # the masked zeros are not in it
    coverage = {
        "coverage/measured_rollouts": 2,
        "coverage/masked_rollouts": 3,
        "coverage/measured_tasks": 2,
        "coverage/fully_masked_tasks": 1,
    }
    assert {key: value for key, value in agent.items() if key.startswith("coverage/")} == coverage
    assert {
        key: value for key, value in metrics["key_metrics"].items() if key.startswith("coverage/")
    } == coverage
    assert "mean/mask_sample" not in agent


async def test_when_every_rollout_is_masked_only_coverage_is_reported(counter_server):
    status, metrics = await aggregate(counter_server, [masked(0, 0, 0.0), masked(1, 0, 1.0)])
    assert status == 200
    coverage = {
        "coverage/measured_rollouts": 0,
        "coverage/masked_rollouts": 2,
        "coverage/measured_tasks": 0,
        "coverage/fully_masked_tasks": 2,
    }
    assert metrics["agent_metrics"] == metrics["key_metrics"] == coverage


async def test_without_masked_rollouts_there_is_no_coverage(counter_server):
    status, metrics = await aggregate(counter_server, [{**rollout(0, 0, 1.0), "mask_sample": False}])
    assert status == 200 and not any(key.startswith("coverage/") for key in metrics["agent_metrics"])


async def test_each_group_samples_its_task_row_without_heavy_or_per_rollout_fields(counter_server):
    row = {
        "agent_ref": {"type": "responses_api_agents", "name": "math_agent"},
        "id": "q-17",
        "expected_answer": "42",
        "responses_create_params": {"input": "What is 6 x 7?"},
        "judge_evaluations": [{"verdict": "equal"}],
        "initial_count": 3,
    }
    request_body = [
        {**rollout(0, 1, 1.0, 10), **row, "extracted_answer": "42"},
        {**failure(0, 0, "timeout"), **row, "_ng_failure_message": "read timed out"},
        {**failure(1, 0, "http_500"), "agent_ref": {"name": "math_agent"}},
    ]
    status, metrics = await aggregate(counter_server, request_body)
    assert status == 200
    first, all_failed = metrics["group_level_metrics"]
    assert first["sample"] == {
        "agent_ref": {"type": "responses_api_agents", "name": "math_agent"},
        "id": "q-17",
        "expected_answer": "42",
        "extracted_answer": "42",
    }
    assert all_failed["sample"] == {"agent_ref": {"name": "math_agent"}}


async def test_empty_and_duplicate_inputs(counter_server):
    assert await aggregate(counter_server, []) == (
        200,
        {
            "group_level_metrics": [],
            "agent_metrics": {},
            "key_metrics": {},
            "repeat_level_metrics": [],
            "perf_summary": None,
        },
    )
    status, body = await aggregate(counter_server, [rollout(0, 0, 1.0), rollout(0, 0, 0.0)])
    assert status == 422
    assert "Duplicate rollout" in body["detail"]
    status, body = await aggregate(
        counter_server, [rollout(0, 0, 1.0), {**rollout(1, 0, 1.0), "_ng_task_index": "x"}]
    )
    assert status == 422
    assert "verify_responses[1]._ng_task_index must be an integer" in body["detail"]
    status, body = await aggregate(counter_server, [{**failure(0, 0, "timeout"), "_ng_rollout_index": 1.5}])
    assert status == 422
    assert "verify_responses[0]._ng_rollout_index must be an integer" in body["detail"]


async def post_raw(server, body: bytes):
    """POST JSON text as is: the client's encoder cannot write NaN or integers beyond 64 bits."""
    response = await request(
        "POST", server.url + "/aggregate_metrics", data=body, headers={"Content-Type": "application/json"}
    )
    return response.status, await get_response_json(response)


@pytest.mark.parametrize(
    "reward, error_type",
    [("NaN", "finite_number"), ("1e308", "number_too_large"), ("true", "float_type"), ("null", "missing")],
)
async def test_a_reward_statistics_cannot_use_is_a_422_naming_it(counter_server, reward, error_type):
    status, body = await post_raw(counter_server, b'{"verify_responses":[{"reward":%s}]}' % reward.encode())
    assert status == 422
    [problem] = body["detail"]
    assert (problem["loc"], problem["type"]) == (["body", "verify_responses", 0, "reward"], error_type)


async def test_numbers_too_large_to_sum_are_left_out_and_failure_records_need_no_reward(counter_server):
    huge = b'"huge":1e308,"huger":1' + b"0" * 305  # orjson reads an integer this long as a float
    body = b'{"verify_responses":[{"reward":1,%s},{"reward":0,"_ng_rollout_index":1,%s},%s]}' % (
        huge,
        huge,
        b'{"_ng_failure_class":"timeout","_ng_rollout_index":2}',
    )
    status, metrics = await post_raw(counter_server, body)
    assert status == 200
    assert metrics["agent_metrics"]["mean/reward"] == 0.5
    assert metrics["agent_metrics"]["num_failed_rollouts"] == 1
    assert not any("huge" in key for key in metrics["agent_metrics"])


class RecordingAggregator(AggregateMetricsMixin):
    """Keeps what `compute_metrics` was given and answers with pass@k plus one per-task entry."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        self.seen = tasks
        per_task = [{"_ng_task_index": task[0]["_ng_task_index"], "solved": True} for task in tasks]
        return {**compute_pass_majority_metrics(tasks)[0], "per_task_metrics": per_task}


async def test_compute_metrics_gets_only_successful_rollouts_and_merges_per_task_entries():
    aggregator = RecordingAggregator()
    body = AggregateMetricsBody(
        verify_responses=[
            rollout(0, 1, 0.0),
            failure(0, 0, "timeout"),
            rollout(0, 0, 1.0),
            failure(1, 0, "x"),
        ]
    )
    metrics = await aggregator.aggregate_metrics(body)
    assert aggregator.seen == [[rollout(0, 0, 1.0), rollout(0, 1, 0.0)]]
    assert metrics.agent_metrics["pass@1[avg-of-2]/accuracy"] == 50.0
    assert "per_task_metrics" not in metrics.agent_metrics
    assert [group.get("solved") for group in metrics.group_level_metrics] == [True, None]


# ---------------------------------------------------------------------------------------------------------
# Building blocks


def test_numeric_record_counts_bools_and_skips_text():
    assert numeric_record({"reward": True, "answer": "4", "n": 2, "nested": {"x": 1}}) == {
        "reward": 1.0,
        "n": 2.0,
    }


def test_numeric_record_orders_reward_usage_then_others_and_drops_non_finite():
    record = numeric_record(
        {
            "turns": 2,
            "bad": math.nan,
            "worse": -math.inf,
            "reward": 0.5,
            "response": {"usage": {"output_tokens": 7, "x": None}},
        }
    )
    assert list(record.items()) == [("reward", 0.5), ("output_tokens", 7), ("turns", 2)]
    assert numeric_record({"reward": 1.0, "response": "not an object"}) == {"reward": 1.0}
    assert numeric_record({"reward": 1.0, "huge": 1e301, "huger": -(10**400), "fits": 1e300}) == {
        "reward": 1.0,
        "fits": 1e300,
    }


@pytest.mark.parametrize("rewards, expected_std", [([1.0], 0.0), ([1.0, 0.0], math.sqrt(0.5))])
def test_single_rollout_groups_report_zero_std(rewards, expected_std):
    stats = column_statistics([{"reward": r} for r in rewards])
    assert math.isclose(stats["std/reward"], expected_std)


def test_failure_counts_returns_exactly_the_agent_metric_keys():
    records = [
        failure(0, 0, "timeout"),
        rollout(0, 1, 1.0),
        failure(1, 0, "timeout"),
        failure(2, 0, "http_500"),
    ]
    assert failure_counts(records) == {
        "num_failed_rollouts": 3,
        "num_failed_rollouts/http_500": 1,
        "num_failed_rollouts/timeout": 2,
    }
    assert failure_counts([rollout(0, 0, 1.0), {**rollout(0, 1, 1.0), "_ng_failure_class": ""}]) == {
        "num_failed_rollouts": 0
    }


# ---------------------------------------------------------------------------------------------------------
# pass@k and majority@k: NeMo Gym's functions, their shapes and numbers (expected values worked out by hand)


def scored(task: int, rewards: list[float], answers: list[Any] | None = None) -> list[dict]:
    answers = answers if answers is not None else [None] * len(rewards)
    return [
        {**rollout(task, i, r), "answer": a} for i, (r, a) in enumerate(zip(rewards, answers, strict=True))
    ]


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The unbiased estimator, written out: 1 - C(n - c, k) / C(n, k)."""
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


# Task 0: right, wrong, right (answers 4, 5, 4). Task 1: no answer, wrong, right (answers -, 3, 7).
WORKED_TASKS = [scored(0, [1, 0, 1], ["4", "5", "4"]), scored(1, [0, 0, 1], [None, "3", "7"])]


def test_pass_majority_returns_metrics_score_dicts_score_names_and_max_k():
    metrics, score_dicts, score_names, max_k = compute_pass_majority_metrics(
        WORKED_TASKS, answer_key="answer"
    )
    assert (score_names, max_k) == (["accuracy", "no_answer"], 3)
    assert score_dicts == [
        [
            {"accuracy": 1.0, "no_answer": 0.0},
            {"accuracy": 0.0, "no_answer": 0.0},
            {"accuracy": 1.0, "no_answer": 0.0},
        ],
        [
            {"accuracy": 0.0, "no_answer": 1.0},
            {"accuracy": 0.0, "no_answer": 0.0},
            {"accuracy": 1.0, "no_answer": 0.0},
        ],
    ]
    per_sample = metrics.pop("per_sample_aggregate")
    # Rollout i over both tasks: accuracy (1+0)/2, (0+0)/2, (1+1)/2; no_answer (0+1)/2, 0, 0.
    assert per_sample == {"accuracy": [50.0, 0.0, 100.0], "no_answer": [50.0, 0.0, 0.0]}
    expected = {}
    for k in (1, 2, 3):
        expected[f"pass@{k}/accuracy"] = 100 * (pass_at_k(3, 2, k) + pass_at_k(3, 1, k)) / 2
        expected[f"pass@{k}/no_answer"] = 100 * (pass_at_k(3, 0, k) + pass_at_k(3, 1, k)) / 2
    expected |= {
        "pass@1[avg-of-1]/accuracy": 100 * (1 + 0) / 2,
        "pass@1[avg-of-2]/accuracy": 100 * (1 / 2 + 0) / 2,
        "pass@1[avg-of-3]/accuracy": 100 * (2 / 3 + 1 / 3) / 2,
        "pass@1[avg-of-1]/no_answer": 100 * (0 + 1) / 2,
        "pass@1[avg-of-2]/no_answer": 100 * (0 + 1 / 2) / 2,
        "pass@1[avg-of-3]/no_answer": 100 * (0 + 1 / 3) / 2,
        # First k votes: k=1 "4" right | none; k=2 "4"/"5" tie | "3" wrong; k=3 "4" twice | "3"/"7" tie.
        "majority@1/accuracy": 100 * (1 + 0) / 2,
        "majority@2/accuracy": 100 * ((1 + 0) / 2 + 0) / 2,
        "majority@3/accuracy": 100 * (1 + (0 + 1) / 2) / 2,
        "majority@1/no_answer": 0.0,
        "majority@2/no_answer": 0.0,
        "majority@3/no_answer": 0.0,
    }
    for name, runs in per_sample.items():
        for k in (2, 3):
            std = statistics.stdev(runs[:k])
            expected[f"pass@1[avg-of-{k}]/{name}/std_dev_across_runs"] = std
            expected[f"pass@1[avg-of-{k}]/{name}/std_err_across_runs"] = std / math.sqrt(k)
    assert metrics == pytest.approx(expected)
    assert expected["pass@2/accuracy"] == pytest.approx(100 * (1 + 2 / 3) / 2)  # the formula, checked once


def test_no_tasks_give_the_empty_result():
    assert compute_pass_majority_metrics([]) == ({}, [], [], 0)
    assert compute_pass_majority_metrics([], answer_key="answer") == ({}, [], [], 0)


def test_bool_rewards_count_as_0_and_1():
    as_bools = [[{"reward": True}, {"reward": False}], [{"reward": False}, {"reward": False}]]
    as_ints = [[{"reward": 1}, {"reward": 0}], [{"reward": 0}, {"reward": 0}]]
    metrics, score_dicts, _, _ = compute_pass_majority_metrics(as_bools)
    assert score_dicts == [[{"accuracy": 1.0}, {"accuracy": 0.0}], [{"accuracy": 0.0}, {"accuracy": 0.0}]]
    assert metrics == compute_pass_majority_metrics(as_ints)[0]
    assert metrics["pass@2/accuracy"] == 50.0 and metrics["pass@1/accuracy"] == 100 * pass_at_k(2, 1, 1) / 2


def test_without_answer_key_there_is_no_majority_and_no_no_answer():
    metrics, _, score_names, _ = compute_pass_majority_metrics(WORKED_TASKS)
    assert score_names == ["accuracy"]
    assert not [key for key in metrics if key.startswith("majority@") or "no_answer" in key]


def test_add_avg_sample_std_dev_adds_the_mean_within_task_spread_on_the_score_scale():
    metrics, score_dicts, score_names, max_k = compute_pass_majority_metrics(WORKED_TASKS)
    before = dict(metrics)
    assert add_avg_sample_std_dev(metrics, score_dicts, score_names, max_k) is None
    added = {key: value for key, value in metrics.items() if key not in before}
    assert added == pytest.approx(
        {
            "pass@1[avg-of-2]/accuracy/avg_sample_std_dev": (statistics.stdev([1, 0]) + 0.0) / 2,
            "pass@1[avg-of-3]/accuracy/avg_sample_std_dev": (math.sqrt(1 / 3) + math.sqrt(1 / 3)) / 2,
        }
    )
    one_rollout, *rest = compute_pass_majority_metrics([scored(0, [1])])
    add_avg_sample_std_dev(one_rollout, *rest)
    assert not any(key.endswith("avg_sample_std_dev") for key in one_rollout)


def test_the_k_metrics_but_pass_at_k_look_at_the_first_k_rollouts_even_where_a_score_is_missing():
    """A score some rollouts lack (a judge that only ran on some): averages, runs and votes are by rollout
    position, as NeMo Gym computes them; pass@k uses the scores there are."""

    def judged(rollout: dict) -> dict:
        return {"judge": rollout["reward"]} if rollout["answer"] == "judged" else {}

    tasks = [scored(0, [1, 1], ["x", "judged"]), scored(1, [0, 0], ["x", "judged"])]
    metrics, *_ = compute_pass_majority_metrics(tasks, score_fn=judged, answer_key="answer")
    assert "pass@1[avg-of-1]/judge" not in metrics, "no task's first rollout has a judge score"
    assert metrics["pass@1[avg-of-2]/judge"] == 100 * (1 + 0) / 2
    assert metrics["pass@1/judge"] == 50.0 and "pass@2/judge" not in metrics
    assert metrics["majority@1/judge"] == 0.0 and metrics["majority@2/judge"] == 50.0
    assert metrics["per_sample_aggregate"]["judge"] == [50.0]


def test_binary_pass_at_k_uses_all_rollouts_but_continuous_takes_the_best_of_the_first_k():
    binary, *_ = compute_pass_majority_metrics([scored(0, [0, 1, 0])])
    assert [binary[f"pass@{k}/accuracy"] for k in (1, 2, 3)] == pytest.approx(
        [100 * pass_at_k(3, 1, k) for k in (1, 2, 3)]
    )
    continuous, *_ = compute_pass_majority_metrics([scored(0, [0.0, 0.5, 1.0])])
    assert [continuous[f"pass@{k}/accuracy"] for k in (1, 2, 3)] == [0.0, 50.0, 100.0]


def test_only_pass_at_k_needs_k_rollouts_the_other_metrics_use_each_tasks_first_k():
    tasks = [scored(0, [0], ["a"]), scored(1, [0, 1, 1], ["b", "c", "c"])]
    metrics, *_ = compute_pass_majority_metrics(tasks, answer_key="answer")
    assert metrics["pass@3/accuracy"] == 100.0  # task 1 alone
    assert metrics["pass@1[avg-of-3]/accuracy"] == pytest.approx(100 * (0 + 2 / 3) / 2)
    assert metrics["majority@3/accuracy"] == 50.0  # task 0 votes with its single (wrong) answer
    assert metrics["per_sample_aggregate"]["accuracy"] == [0.0, 100.0, 100.0]
    assert metrics["pass@1[avg-of-3]/accuracy/std_dev_across_runs"] == pytest.approx(100 / math.sqrt(3))


def test_majority_counts_answer_and_score_together():
    task = scored(0, [0, 0, 1], ["b", "c", "c"])  # ("c", 0) and ("c", 1) are different votes: a 3-way tie
    metrics, *_ = compute_pass_majority_metrics([task], answer_key="answer")
    assert metrics["majority@3/accuracy"] == pytest.approx(100 / 3)


def test_score_fn_names_the_scores_and_bools_count_as_ints():
    def score(row: dict) -> dict:
        return {"exact": row["reward"] == 1, "partial": row["reward"] / 2}

    metrics, _, score_names, _ = compute_pass_majority_metrics([scored(0, [1, 0])], score_fn=score)
    assert score_names == ["exact", "partial"]
    assert metrics["pass@2/exact"] == 100.0
    assert metrics["pass@1[avg-of-2]/partial"] == 25.0
    assert "pass@1/accuracy" not in metrics


def test_majority_ties_share_the_win_and_answers_vote_by_value():
    task = scored(0, [1, 0, 1, 0], ["a", "b", "a", "b"])
    metrics, *_ = compute_pass_majority_metrics([task], answer_key="answer")
    assert metrics["majority@3/accuracy"] == 100.0  # a, b, a: "a" wins
    assert metrics["majority@4/accuracy"] == 50.0  # two each: the winners' scores are averaged
    listed = scored(0, [1, 1, 0], [[1, 2], [1, 2], [3]])
    assert compute_pass_majority_metrics([listed], answer_key="answer")[0]["majority@3/accuracy"] == 100.0


def test_rollouts_without_an_answer_score_no_answer_and_do_not_vote():
    metrics, *_ = compute_pass_majority_metrics([scored(0, [1, 1])], answer_key="answer")
    assert metrics["majority@2/accuracy"] == 0.0
    assert metrics["pass@1[avg-of-2]/no_answer"] == 100.0
    assert metrics["pass@2/accuracy"] == 100.0


def test_subset_metrics_group_by_the_first_rollouts_truthy_subset():
    def labelled(level: Any, task: list[dict]) -> list[dict]:
        return [{**row, "level": level} for row in task]

    tasks = [
        labelled("easy", scored(0, [1, 1])),
        labelled("hard", scored(1, [0, 1])),
        labelled("hard", scored(2, [0, 0])),
        labelled(0, scored(3, [1, 1])),
        labelled("", scored(4, [1, 1])),
        scored(5, [0, 0]),
        [],
    ]
    metrics = compute_subset_metrics(tasks, "level")
    assert {key.split("/")[0] for key in metrics} == {"easy", "hard"}
    assert not any("per_sample_aggregate" in key for key in metrics)
    assert metrics["easy/pass@1/accuracy"] == 100.0
    assert metrics["hard/pass@2/accuracy"] == 100 * (pass_at_k(2, 1, 2) + pass_at_k(2, 0, 2)) / 2
    assert metrics["hard/pass@1[avg-of-2]/accuracy"] == 100 * (1 / 2 + 0) / 2
    # hard's runs: rollout 0 scores 0 and 0, rollout 1 scores 1 and 0, i.e. 0% and 50%.
    assert metrics["hard/pass@1[avg-of-2]/accuracy/std_dev_across_runs"] == pytest.approx(
        statistics.stdev([0.0, 50.0])
    )


SPREAD_METRICS = {
    "pass@1/accuracy": 10.0,
    "pass@4/accuracy": 40.0,
    "pass@4/no_answer": 4.0,
    "pass@2/judge": 20.0,
    "pass@1[avg-of-2]/judge": 2.0,
    "pass@1[avg-of-4]/accuracy": 44.0,
    "pass@1[avg-of-4]/accuracy/std_dev_across_runs": 1.0,
    "pass@1[avg-of-4]/accuracy/std_err_across_runs": 0.5,
    "pass@1[avg-of-4]/accuracy/avg_sample_std_dev": 0.1,
    "pass@1[avg-of-8]/accuracy/std_dev_across_runs": 1.0,
    "easy/pass@8/accuracy": 80.0,
    "majority@4/accuracy": 41.0,
}


def test_highest_k_metrics_returns_a_familys_entries_at_its_largest_k():
    assert highest_k_metrics(SPREAD_METRICS, "pass@{k}") == {"pass@4/accuracy": 40.0, "pass@4/no_answer": 4.0}
    assert highest_k_metrics(SPREAD_METRICS, "majority@{k}") == {"majority@4/accuracy": 41.0}
    assert highest_k_metrics(SPREAD_METRICS, "easy/pass@{k}") == {"easy/pass@8/accuracy": 80.0}
    assert highest_k_metrics(SPREAD_METRICS, "hard/pass@{k}") == {}
    with pytest.raises(ValueError, match="must contain"):
        highest_k_metrics(SPREAD_METRICS, "pass@")


def test_highest_k_metrics_drops_the_spread_entries_even_at_a_larger_k():
    assert highest_k_metrics(SPREAD_METRICS, "pass@1[avg-of-{k}]") == {"pass@1[avg-of-4]/accuracy": 44.0}


def test_highest_k_metrics_filters_score_names_before_taking_the_largest_k():
    assert highest_k_metrics(SPREAD_METRICS, "pass@{k}", score_names=["judge"]) == {"pass@2/judge": 20.0}
    assert highest_k_metrics(SPREAD_METRICS, "pass@{k}", exclude_names=["no_answer"]) == {
        "pass@4/accuracy": 40.0
    }
    assert highest_k_metrics(
        SPREAD_METRICS, "pass@{k}", score_names=["judge", "accuracy"], exclude_names=["accuracy"]
    ) == {"pass@2/judge": 20.0}
    assert highest_k_metrics(SPREAD_METRICS, "pass@1[avg-of-{k}]", score_names=["judge"]) == {
        "pass@1[avg-of-2]/judge": 2.0
    }


async def test_repeat_level_metrics_and_their_spread_across_repeats(counter_server):
    """Two repeats of three tasks: repeat 0 scores 1, 1, 0 and repeat 1 scores 1, 0, 0."""
    rewards = {(0, 0): 1.0, (1, 0): 1.0, (2, 0): 0.0, (0, 1): 1.0, (1, 1): 0.0, (2, 1): 0.0}
    status, metrics = await aggregate(
        counter_server, [rollout(task, repeat, reward) for (task, repeat), reward in rewards.items()]
    )
    assert status == 200, metrics
    repeats = metrics["repeat_level_metrics"]
    assert [(entry["_ng_rollout_index"], entry["num_rollouts"]) for entry in repeats] == [(0, 3), (1, 3)]
    assert [entry["mean/reward"] for entry in repeats] == pytest.approx([2 / 3, 1 / 3])
    agent = metrics["agent_metrics"]
    assert agent["num_repeats"] == 2
    assert agent["mean_across_repeats/reward"] == pytest.approx(0.5)
    assert agent["std_across_repeats/reward"] == pytest.approx(statistics.stdev([2 / 3, 1 / 3]))
    assert agent["se_across_repeats/reward"] == pytest.approx(statistics.stdev([2 / 3, 1 / 3]) / 2**0.5)
    assert agent["ci_low_95_across_repeats/reward"] < 0.5 < agent["ci_high_95_across_repeats/reward"]
    assert not any("across_repeats" in key for key in metrics["key_metrics"])

    status, single = await aggregate(counter_server, [rollout(0, 0, 1.0), rollout(1, 0, 0.0)])
    assert single["agent_metrics"]["num_repeats"] == 1
    assert not any("across_repeats" in key for key in single["agent_metrics"])


@pytest.mark.parametrize("value, expected", [(None, 0), (0, 0), (3, 3), (4.0, 4)])
def test_a_count_read_back_for_aggregation_is_a_whole_number(value, expected):
    assert count_of(value, "num_steps_passed") == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, 2.5, "3", True, [1]])
def test_a_count_that_is_not_one_is_a_422_naming_the_field(value):
    with pytest.raises(HTTPException) as refused:
        count_of(value, "by_type.semantic.n_true")
    assert refused.value.status_code == 422 and "by_type.semantic.n_true" in refused.value.detail
