import math
from typing import Any

import pytest

from nemo_gym.http_client import get_response_json, request
from nemo_gym.reward_profile import (
    AggregateMetricsBody,
    MetricsAggregationMixin,
    column_statistics,
    compute_pass_majority_metrics,
    compute_subset_metrics,
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
        {"group_level_metrics": [], "agent_metrics": {}, "key_metrics": {}},
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


class RecordingAggregator(MetricsAggregationMixin):
    """Keeps what `compute_metrics` was given and answers with pass@k plus one per-task entry."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        self.seen = tasks
        per_task = [{"_ng_task_index": task[0]["_ng_task_index"], "solved": True} for task in tasks]
        return {**compute_pass_majority_metrics(tasks), "per_task_metrics": per_task}


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
# pass@k and majority@k


def scored(task: int, rewards: list[float], answers: list[Any] | None = None) -> list[dict]:
    answers = answers if answers is not None else [None] * len(rewards)
    return [
        {**rollout(task, i, r), "answer": a} for i, (r, a) in enumerate(zip(rewards, answers, strict=True))
    ]


OBSERVED_TASKS = [scored(0, [1, 0], ["4", "5"]), scored(1, [1, 1], [None, "x"])]


def test_pass_majority_reproduces_the_observed_numbers():
    metrics = compute_pass_majority_metrics(OBSERVED_TASKS, answer_key="answer")
    assert metrics["pass@1/accuracy"] == 75.0
    assert metrics["pass@1[avg-of-1]/accuracy"] == 100.0
    assert metrics["pass@2/accuracy"] == 100.0
    assert metrics["pass@1[avg-of-2]/accuracy"] == 75.0
    assert metrics["majority@2/accuracy"] == 75.0
    assert round(metrics["pass@1[avg-of-2]/accuracy/std_dev_across_runs"], 2) == 35.36
    assert metrics["pass@1[avg-of-2]/accuracy/std_err_across_runs"] == pytest.approx(25.0)
    assert "pass@1[avg-of-1]/accuracy/std_dev_across_runs" not in metrics
    assert metrics["per_sample_aggregate"] == {"accuracy": [100.0, 50.0], "no_answer": [50.0, 0.0]}
    assert metrics["pass@1[avg-of-1]/no_answer"] == 50.0
    assert metrics["majority@1/accuracy"] == 50.0  # task 1's first rollout has no answer: it scores 0
    assert "pass@1[avg-of-2]/accuracy/avg_sample_std_dev" not in metrics


def test_avg_sample_std_dev_is_the_mean_within_task_spread():
    metrics = compute_pass_majority_metrics(OBSERVED_TASKS, add_avg_sample_std_dev=True)
    assert round(metrics["pass@1[avg-of-2]/accuracy/avg_sample_std_dev"], 2) == 35.36  # (0.7071 + 0) / 2
    assert not any(key.startswith(("majority@", "pass@1/no_answer")) for key in metrics)


def test_binary_pass_at_k_uses_all_rollouts_but_continuous_takes_the_best_of_the_first_k():
    binary = compute_pass_majority_metrics([scored(0, [0, 1, 0])])
    assert binary["pass@1/accuracy"] == pytest.approx(100 / 3)  # 1 - C(2,1)/C(3,1), not max([0])
    assert binary["pass@2/accuracy"] == pytest.approx(200 / 3)  # 1 - C(2,2)/C(3,2)
    assert binary["pass@3/accuracy"] == 100.0
    continuous = compute_pass_majority_metrics([scored(0, [0.0, 0.5, 1.0])])
    assert [continuous[f"pass@{k}/accuracy"] for k in (1, 2, 3)] == [0.0, 50.0, 100.0]


def test_only_pass_at_k_needs_k_rollouts_the_other_metrics_use_each_tasks_first_k():
    tasks = [scored(0, [0], ["a"]), scored(1, [0, 1, 1], ["b", "c", "c"])]
    metrics = compute_pass_majority_metrics(tasks, answer_key="answer")
    assert metrics["pass@3/accuracy"] == 100.0  # task 1 alone
    assert metrics["pass@1[avg-of-3]/accuracy"] == pytest.approx(100 * (0 + 2 / 3) / 2)
    assert metrics["majority@3/accuracy"] == 50.0  # task 0 votes with its single (wrong) answer
    assert metrics["per_sample_aggregate"]["accuracy"] == [0.0, 100.0, 100.0]
    assert metrics["pass@1[avg-of-3]/accuracy/std_dev_across_runs"] == pytest.approx(100 / math.sqrt(3))


def test_majority_counts_answer_and_score_together():
    task = scored(0, [0, 0, 1], ["b", "c", "c"])  # ("c", 0) and ("c", 1) are different votes: a 3-way tie
    metrics = compute_pass_majority_metrics([task], answer_key="answer")
    assert metrics["majority@3/accuracy"] == pytest.approx(100 / 3)


def test_score_fn_names_the_scores_and_bools_count_as_ints():
    def score(row: dict) -> dict:
        return {"exact": row["reward"] == 1, "partial": row["reward"] / 2}

    metrics = compute_pass_majority_metrics([scored(0, [1, 0])], score_fn=score)
    assert metrics["pass@2/exact"] == 100.0
    assert metrics["pass@1[avg-of-2]/partial"] == 25.0
    assert "pass@1/accuracy" not in metrics


def test_majority_ties_share_the_win_and_answers_vote_by_value():
    task = scored(0, [1, 0, 1, 0], ["a", "b", "a", "b"])
    metrics = compute_pass_majority_metrics([task], answer_key="answer")
    assert metrics["majority@3/accuracy"] == 100.0  # a, b, a: "a" wins
    assert metrics["majority@4/accuracy"] == 50.0  # two each: the winners' scores are averaged
    listed = scored(0, [1, 1, 0], [[1, 2], [1, 2], [3]])
    assert compute_pass_majority_metrics([listed], answer_key="answer")["majority@3/accuracy"] == 100.0


def test_rollouts_without_an_answer_score_no_answer_and_do_not_vote():
    metrics = compute_pass_majority_metrics([scored(0, [1, 1])], answer_key="answer")
    assert metrics["majority@2/accuracy"] == 0.0
    assert metrics["pass@1[avg-of-2]/no_answer"] == 100.0
    assert metrics["pass@2/accuracy"] == 100.0


def test_subset_metrics_prefix_each_key_with_the_first_rollouts_subset():
    easy = [{**row, "level": "easy"} for row in scored(0, [1, 1])]
    hard = [{**row, "level": "hard"} for row in scored(1, [0, 1])]
    unlabelled = scored(2, [0, 0])
    metrics = compute_subset_metrics([easy, hard, unlabelled, []], "level")
    assert metrics["easy/pass@1/accuracy"] == 100.0
    assert metrics["hard/pass@1/accuracy"] == 50.0
    assert metrics["hard/pass@1[avg-of-2]/accuracy/std_dev_across_runs"] == pytest.approx(100 / math.sqrt(2))
    assert {key.split("/")[0] for key in metrics} == {"easy", "hard"}
    assert not any("per_sample_aggregate" in key for key in metrics)


def test_highest_k_metrics_picks_the_largest_k_without_spread_keys():
    metrics = compute_pass_majority_metrics([scored(0, [1, 0, 1], ["4", "5", "4"])], answer_key="answer")
    assert highest_k_metrics(metrics, "pass@{k}") == {
        "pass@3/accuracy": metrics["pass@3/accuracy"],
        "pass@3/no_answer": metrics["pass@3/no_answer"],
    }
    assert highest_k_metrics(metrics, "pass@1[avg-of-{k}]") == {
        "pass@1[avg-of-3]/accuracy": metrics["pass@1[avg-of-3]/accuracy"],
        "pass@1[avg-of-3]/no_answer": metrics["pass@1[avg-of-3]/no_answer"],
    }
    assert set(highest_k_metrics(metrics, "majority@{k}")) == {"majority@3/accuracy", "majority@3/no_answer"}
    assert highest_k_metrics({"easy/pass@2/accuracy": 1.0}, "pass@{k}") == {}
    assert highest_k_metrics({"easy/pass@2/accuracy": 1.0}, "easy/pass@{k}") == {"easy/pass@2/accuracy": 1.0}
    with pytest.raises(ValueError, match="must contain"):
        highest_k_metrics(metrics, "pass@")
