"""How a collection is going (CollectionProgress: a live bar or milestone lines) and how it went
(CollectionSummary: the closing report and the exit code)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.collection.records import MAX_ATTEMPTS_ENV_VAR_NAME
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY

PROGRESS_MILESTONES_PCT = (20, 40, 60, 80, 90, 95, 98, 99, 100)


@dataclass
class CollectionProgress:
    """Counts as results arrive; a live bar on a terminal, milestone lines (20 %, 40 %, ...) in a log."""

    total: int
    started: float = field(default_factory=time.monotonic)
    finished: int = 0
    succeeded: int = 0
    reward_sum: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    not_started: int = 0  # rows the dispatch budget did not let start
    lost_attempts: int = 0  # attempts a lost shard replica took with it (each row then ran elsewhere)
    _bar: Any = None
    _next_milestone: int = 0

    def __post_init__(self) -> None:
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, unit="rollout", dynamic_ncols=True, mininterval=0.5)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.succeeded if self.succeeded else None

    def rate(self) -> float:
        return self.finished / max(time.monotonic() - self.started, 1e-9)

    def add(self, result: dict[str, Any]) -> None:
        self.finished += 1
        if FAILURE_CLASS_KEY in result:
            self.failures[result[FAILURE_CLASS_KEY]] += 1
        else:
            self.succeeded += 1
            self.reward_sum += float(result["reward"])
        mean = "-" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        if self._bar is not None:
            self._bar.set_postfix_str(
                f"mean reward {mean}, failed {sum(self.failures.values())}", refresh=False
            )
            self._bar.update(1)
            return
        passed = self._next_milestone
        while (
            passed < len(PROGRESS_MILESTONES_PCT)
            and self.finished * 100 >= PROGRESS_MILESTONES_PCT[passed] * self.total
        ):
            passed += 1
        if passed > self._next_milestone:
            self._next_milestone = passed
            print(
                f"collect: {PROGRESS_MILESTONES_PCT[passed - 1]}% ({self.finished}/{self.total}), "
                f"{self.rate():.1f} rollouts/s, mean reward {mean}, failed {sum(self.failures.values())}",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


@dataclass
class CollectionSummary:
    paths: CollectionPaths
    to_run: int
    already_done: int
    progress: CollectionProgress
    unresolved_failures: dict[str, Counter[str]]
    aggregates: list[dict[str, Any]]
    aggregation_error: str | None = None
    # Of the unresolved failures, how many a resume would run again (the others failed for good).
    retryable: int = 0
    # With `require_complete`: the rollouts the collection has in all; fewer results fail the run.
    required: int | None = None

    @property
    def completed(self) -> int:
        return self.already_done + self.progress.succeeded

    @property
    def incomplete(self) -> bool:
        return self.required is not None and self.completed < self.required

    @property
    def exit_code(self) -> int:
        failed = any(sum(classes.values()) for classes in self.unresolved_failures.values())
        return 1 if failed or self.incomplete or self.aggregation_error else 0

    def lines(self) -> list[str]:
        progress = self.progress
        elapsed = time.monotonic() - progress.started
        lines = [
            f"Ran {progress.finished} rollout(s) in {elapsed:.1f}s ({progress.rate():.1f}/s): "
            f"{progress.succeeded} succeeded, {sum(progress.failures.values())} failed"
            + (f"; {self.already_done} already done before this run" if self.already_done else "")
        ]
        if progress.failures:
            by_class = ", ".join(f"{name} {count}" for name, count in progress.failures.most_common())
            lines.append(f"Failures by class: {by_class}")
        for entry in self.aggregates:
            lines.append(key_metrics_line(entry))
        if self.aggregation_error:
            lines.append(f"Aggregation failed: {self.aggregation_error}")
        unresolved = sum(sum(classes.values()) for classes in self.unresolved_failures.values())
        if unresolved:
            advice = (
                f"; rerun with +resume_from_cache=true to retry the {self.retryable} that may succeed "
                f"(up to {MAX_ATTEMPTS_ENV_VAR_NAME} attempts each)"
                if self.retryable
                else "; none would succeed on a retry (see the failures file)"
            )
            lines.append(f"{unresolved} rollout(s) have no result{advice}")
        if progress.lost_attempts:
            lines.append(
                f"{progress.lost_attempts} attempt(s) were lost with a shard replica and ran again on another "
                "(see the failures file, class shard_lost)"
            )
        if progress.not_started:
            lines.append(
                f"{progress.not_started} rollout(s) not started: the dispatch budget ran out; rerun with "
                "+resume_from_cache=true to run them"
            )
        if self.incomplete:
            lines.append(f"EVAL FAILED: {self.completed}/{self.required} rollouts completed")
        lines.append(f"Results: {self.paths.output}")
        lines.append(f"Failures: {self.paths.failures}")
        lines.append(f"Materialized inputs: {self.paths.materialized}")
        if self.aggregates:
            lines.append(f"Aggregate metrics: {self.paths.aggregate_metrics}")
        return lines


def key_metrics_line(entry: dict[str, Any]) -> str:
    """`agent: key value, ...` of one aggregate entry, for the closing report of collect and aggregate."""
    shown = ", ".join(f"{key} {_fmt(value)}" for key, value in sorted(entry["key_metrics"].items()))
    return f"{entry[AGENT_REF_KEY]['name']}: {shown or 'no metrics'}"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
