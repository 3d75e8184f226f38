"""How a collection is going and how it went (nemo_gym.collection.progress): milestone lines in a log, the
closing report's advice, and the exit code."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.collection.progress import CollectionProgress, CollectionSummary, key_metrics_line

FAILED = {"_ng_failure_class": "timeout"}


def summary(progress: CollectionProgress, tmp_path: Path, **settings) -> CollectionSummary:
    fields = {
        "to_run": progress.total,
        "already_done": 0,
        "unresolved_failures": {},
        "aggregates": [],
        **settings,
    }
    return CollectionSummary(
        paths=CollectionPaths.for_output(tmp_path / "r.jsonl"), progress=progress, **fields
    )


def test_a_log_gets_one_line_per_milestone_passed(capsys: pytest.CaptureFixture[str]):
    progress = CollectionProgress(total=10)
    for reward in (1.0, 0.0, 1.0, 1.0, 0.5, 1.0, 0.0, 1.0):
        progress.add({"reward": reward})
    progress.add(FAILED)
    progress.add(FAILED)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "collect: 20% (2/10)", "collect: 40% (4/10)", "collect: 60% (6/10)", "collect: 80% (8/10)",
        "collect: 90% (9/10)", "collect: 100% (10/10)",
    ]  # fmt: skip
    assert lines[-1].endswith("mean reward 0.688, failed 2") and "rollouts/s" in lines[-1]


def test_failures_are_counted_by_class_and_left_out_of_the_mean_reward():
    progress = CollectionProgress(total=4)
    assert progress.mean_reward is None
    progress.add(FAILED)
    assert progress.mean_reward is None
    progress.add({"reward": 1})
    progress.add({"reward": 0.5})
    progress.add({"_ng_failure_class": "http_500"})
    assert (progress.finished, progress.succeeded, progress.mean_reward) == (4, 2, 0.75)
    assert progress.failures == Counter({"timeout": 1, "http_500": 1})


def test_a_clean_run_exits_0_and_names_its_files(tmp_path: Path):
    progress = CollectionProgress(total=2)
    progress.add({"reward": 1.0})
    progress.add({"reward": 1.0})
    done = summary(progress, tmp_path, already_done=3)
    lines = done.lines()
    assert done.exit_code == 0 and done.completed == 5
    assert lines[0].endswith("2 succeeded, 0 failed; 3 already done before this run")
    assert f"Results: {tmp_path / 'r.jsonl'}" in lines
    assert f"Failures: {tmp_path / 'r_failures.jsonl'}" in lines
    assert not any(line.startswith(("Aggregate metrics", "EVAL FAILED")) for line in lines)


def test_unresolved_failures_fail_the_run_and_say_whether_a_resume_can_help(tmp_path: Path):
    progress = CollectionProgress(total=3)
    progress.add({"reward": 1.0})
    progress.add(FAILED)
    progress.add({"_ng_failure_class": "http_422"})
    unresolved = {"agent": Counter({"timeout": 1, "http_422": 1})}
    retry = summary(progress, tmp_path, unresolved_failures=unresolved, retryable=1)
    assert retry.exit_code == 1
    assert "Failures by class: timeout 1, http_422 1" in retry.lines()
    assert (
        "2 rollout(s) have no result; rerun with +resume_from_cache=true to retry the 1 that may succeed"
        in ("\n".join(retry.lines()))
    )
    final = summary(progress, tmp_path, unresolved_failures=unresolved, retryable=0)
    assert (
        "2 rollout(s) have no result; none would succeed on a retry (see the failures file)" in final.lines()
    )


def test_fewer_results_than_required_fail_the_run_even_without_failures(tmp_path: Path):
    progress = CollectionProgress(total=4)
    progress.add({"reward": 1.0})
    progress.not_started = 3
    short = summary(progress, tmp_path, required=4)
    assert short.incomplete and short.exit_code == 1
    assert "EVAL FAILED: 1/4 rollouts completed" in short.lines()
    assert any(
        line.startswith("3 rollout(s) not started: the dispatch budget ran out") for line in short.lines()
    )
    assert summary(progress, tmp_path, required=1).exit_code == 0
    assert summary(progress, tmp_path, aggregation_error="head gone").exit_code == 1


def test_the_key_metrics_line_is_sorted_with_four_significant_digits(tmp_path: Path):
    entry = {
        "agent_ref": {"name": "agent"},
        "key_metrics": {"pass@1": 2 / 3, "num_rollouts": 12, "mean/reward": 0.5},
    }
    assert key_metrics_line(entry) == "agent: mean/reward 0.5, num_rollouts 12, pass@1 0.6667"
    assert key_metrics_line({"agent_ref": {"name": "empty"}, "key_metrics": {}}) == "empty: no metrics"
    reported = summary(CollectionProgress(total=0), tmp_path, aggregates=[entry]).lines()
    assert key_metrics_line(entry) in reported
    assert f"Aggregate metrics: {tmp_path / 'r_aggregate_metrics.json'}" in reported
