"""nemo_gym.envkit.pass_at_k_metrics: the shared pass@k metrics hooks, on hand-computed groups."""

from __future__ import annotations

from typing import Any

import pytest

from nemo_gym.envkit.pass_at_k_metrics import PassAtK, pass_at_k_key_metrics, select_key_metrics
from nemo_gym.reward_profile import (
    AggregateMetricsMixin,
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    default_key_metrics,
)


def task(subset: Any, rewards: list[float], answers: list[Any] | None = None) -> list[dict[str, Any]]:
    answers = answers if answers is not None else ["x"] * len(rewards)
    return [{"reward": r, "level": subset, "answer": a} for r, a in zip(rewards, answers, strict=True)]


TASKS = [task(4, [1, 0]), task(4, [1, 1]), task(8, [0, 0], [None, "y"]), task(None, [1, 0])]


def test_subset_metrics_come_after_the_overall_ones_with_a_plain_prefix():
    metrics = PassAtK(answer_key="answer", subset_key="level").compute(TASKS)
    overall = compute_pass_majority_metrics(TASKS, answer_key="answer")[0]
    assert metrics == {**overall, **compute_subset_metrics(TASKS, "level", answer_key="answer")}
    assert list(metrics)[: len(overall)] == list(overall)
    assert metrics["4/pass@1[avg-of-2]/accuracy"] == 75.0
    assert metrics["8/pass@1[avg-of-2]/no_answer"] == 50.0
    assert metrics["pass@2/accuracy"] == 75.0


def test_key_in_prefix_names_the_subset_key():
    metrics = PassAtK(subset_key="level", key_in_prefix=True).compute(TASKS)
    assert metrics["level=4/pass@2/accuracy"] == 100.0
    assert metrics["level=8/pass@2/accuracy"] == 0.0
    assert not any(key.startswith(("4/", "8/", "None")) for key in metrics)
    assert "per_sample_aggregate" in metrics, "the overall part is compute_pass_majority_metrics as it is"


def test_subset_metrics_take_the_score_function():
    metrics = PassAtK(score_fn=lambda rollout: {"half": rollout["reward"] / 2}, subset_key="level").compute(
        TASKS
    )
    assert metrics["4/pass@1[avg-of-2]/half"] == 37.5


AGENT_METRICS = {
    "mean/reward": 0.5,
    "mean/input_tokens": 100.0,
    "mean/output_tokens": 20.0,
    "mean/judge_failure_rate": 0.0,
    **compute_pass_majority_metrics(
        [task(0, [1, 0, 1]), task(0, [0, 0, 1], [None, None, "z"])], answer_key="answer"
    )[0],
    "level=4/pass@3/accuracy": 1.0,
}


def test_key_metrics_default_to_token_means_largest_k_averages_and_best_of_k_without_no_answer():
    assert pass_at_k_key_metrics(AGENT_METRICS) == {
        "mean/input_tokens": 100.0,
        "mean/output_tokens": 20.0,
        "pass@1[avg-of-3]/accuracy": pytest.approx(50.0),
        "pass@1[avg-of-3]/no_answer": pytest.approx(100 / 3),
        "pass@3/accuracy": 100.0,
        "majority@3/accuracy": 100.0,
    }


def test_key_metrics_leading_keys_and_families_are_chosen_by_the_caller():
    key_metrics = pass_at_k_key_metrics(
        AGENT_METRICS,
        leading=("mean/reward", "mean/judge_failure_rate", "mean/absent"),
        best_of=("pass@{k}",),
    )
    assert list(key_metrics)[:2] == ["mean/reward", "mean/judge_failure_rate"]
    assert "mean/input_tokens" not in key_metrics and "mean/absent" not in key_metrics
    assert not any(key.startswith("majority@") for key in key_metrics)
    assert key_metrics["pass@3/accuracy"] == 100.0 and "pass@3/no_answer" not in key_metrics


def test_key_metrics_of_an_empty_run_are_empty():
    assert pass_at_k_key_metrics({}) == {}


def test_a_pass_at_k_declaration_computes_what_the_functions_compute():
    halves = lambda rollout: {"half": rollout["reward"] / 2}  # noqa: E731
    assert PassAtK().compute(TASKS) == compute_pass_majority_metrics(TASKS)[0]
    assert (
        PassAtK(answer_key="answer", score_fn=halves).compute(TASKS)
        == compute_pass_majority_metrics(TASKS, halves, "answer")[0]
    )
    overall, *scores = compute_pass_majority_metrics(TASKS)
    add_avg_sample_std_dev(overall, *scores)
    per_subset = compute_subset_metrics(TASKS, "level")
    assert PassAtK(subset_key="level", avg_sample_std_dev=True).compute(TASKS) == {**overall, **per_subset}
    assert not any(key.endswith("avg_sample_std_dev") for key in per_subset)


def test_key_metric_patterns_name_exact_keys_prefixes_and_highest_k_families():
    assert select_key_metrics(AGENT_METRICS, ("mean/*",)) == default_key_metrics(AGENT_METRICS)
    chosen = select_key_metrics(
        AGENT_METRICS,
        ("mean/reward", "mean/absent", "pass@1[avg-of-{k}]/*", "pass@{k}/no_answer", "majority@{k}/accuracy"),
    )
    assert chosen == {
        "mean/reward": 0.5,
        "pass@1[avg-of-3]/accuracy": pytest.approx(50.0),
        "pass@1[avg-of-3]/no_answer": pytest.approx(100 / 3),
        "pass@3/no_answer": pytest.approx(50.0),
        "majority@3/accuracy": 100.0,
    }
    assert select_key_metrics(AGENT_METRICS, ("pass@{k}/*",)) == {
        "pass@3/accuracy": 100.0,
        "pass@3/no_answer": pytest.approx(50.0),
    }, "per-subset entries and lower k are not headline entries"
    assert select_key_metrics(AGENT_METRICS, ("pass@{k}",)) == select_key_metrics(
        AGENT_METRICS, ("pass@{k}/*",)
    )


def test_the_mixin_declarations_replace_the_hooks():
    class Declared(AggregateMetricsMixin):
        pass_at_k = PassAtK(answer_key="answer")
        key_metric_patterns = ("mean/reward", "pass@{k}/accuracy")

    assert Declared().compute_metrics(TASKS) == compute_pass_majority_metrics(TASKS, answer_key="answer")[0]
    assert Declared().get_key_metrics(AGENT_METRICS) == {"mean/reward": 0.5, "pass@3/accuracy": 100.0}
    assert AggregateMetricsMixin().compute_metrics(TASKS) == {}
    assert AggregateMetricsMixin().get_key_metrics(AGENT_METRICS) == default_key_metrics(AGENT_METRICS)
