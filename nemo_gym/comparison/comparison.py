"""A baseline run against a candidate run: the tasks both measured, each task's mean-reward difference,
each side's mean reward and the mean difference with 95% intervals, the paired test and its verdict.

Each side's mean is over the tasks it measured (a task weighs the same however many rollouts it had);
the difference, the test and the verdict use only the tasks both sides measured. Tasks measured by one
side only are listed, never silently dropped."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from nemo_gym.comparison.runs import AgentRewards, RunRewards, agent_pairs, key_metrics, read_run
from nemo_gym.comparison.statistics import ALPHA, MeanEstimate, PairedTest, mean_estimate, paired_test
from nemo_gym.config.errors import ConfigError

# A task: the (baseline) agent that ran it and its `_ng_task_index`.
TaskKey = tuple[str, int]


@dataclass(frozen=True)
class TaskDelta:
    agent: str
    task: int
    baseline: float
    candidate: float
    baseline_rollouts: int
    candidate_rollouts: int

    @property
    def delta(self) -> float:
        return self.candidate - self.baseline


@dataclass(frozen=True)
class Side:
    """One side as compared: its file, agents, measured tasks and rollouts, what was left out, its mean."""

    path: Path
    agents: list[str]
    tasks: int
    measured_rollouts: int
    masked: int
    failed: int
    without_reward: int
    mean_reward: MeanEstimate


@dataclass(frozen=True)
class KeyMetric:
    agent: str
    name: str
    baseline: float
    candidate: float


@dataclass(frozen=True)
class Comparison:
    baseline: Side
    candidate: Side
    deltas: list[TaskDelta]
    only_baseline: list[TaskKey]
    only_candidate: list[TaskKey]
    difference: MeanEstimate
    test: PairedTest
    key_metrics: list[KeyMetric]

    @property
    def verdict(self) -> str:
        if self.test.p_value >= ALPHA or self.difference.mean == 0:
            return f"no significant difference at alpha={ALPHA:g}"
        direction = "better" if self.difference.mean > 0 else "worse"
        return f"candidate {direction} (significant at alpha={ALPHA:g})"


def compare_runs(
    baseline_path: Path,
    candidate_path: Path,
    baseline_agent: str | None = None,
    candidate_agent: str | None = None,
    baseline_metrics_path: Path | None = None,
    candidate_metrics_path: Path | None = None,
) -> Comparison:
    """Read both results files and compare them; the aggregate metrics files, when given, add their key
    metrics side by side."""
    baseline_run, candidate_run = read_run(baseline_path, "baseline"), read_run(candidate_path, "candidate")
    pairs = agent_pairs(baseline_run, candidate_run, baseline_agent, candidate_agent)
    baseline_agents, candidate_agents = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    baseline_tasks = _measured_tasks(baseline_run, baseline_agents, baseline_agents)
    candidate_tasks = _measured_tasks(candidate_run, candidate_agents, baseline_agents)
    common = sorted(baseline_tasks.keys() & candidate_tasks.keys())
    if not common:
        raise ConfigError(
            f"no task was measured in both {baseline_path} and {candidate_path} (tasks are matched by agent "
            "and _ng_task_index); compare two runs of the same dataset"
        )
    deltas = [TaskDelta(key[0], key[1], *_pair(baseline_tasks[key], candidate_tasks[key])) for key in common]
    metrics = []
    if baseline_metrics_path is not None and candidate_metrics_path is not None:
        metrics = _key_metrics(pairs, baseline_metrics_path, candidate_metrics_path)
    return Comparison(
        baseline=_side(baseline_run, baseline_agents, baseline_tasks),
        candidate=_side(candidate_run, candidate_agents, candidate_tasks),
        deltas=deltas,
        only_baseline=sorted(baseline_tasks.keys() - candidate_tasks.keys()),
        only_candidate=sorted(candidate_tasks.keys() - baseline_tasks.keys()),
        difference=mean_estimate([delta.delta for delta in deltas]),
        test=paired_test([delta.delta for delta in deltas]),
        key_metrics=metrics,
    )


def _measured_tasks(run: RunRewards, agents: list[str], labels: list[str]) -> dict[TaskKey, list[float]]:
    """Each measured task's rewards, keyed by the baseline agent's name so both sides line up."""
    return {
        (label, task): rewards
        for agent, label in zip(agents, labels, strict=True)
        for task, rewards in run.agents[agent].tasks.items()
        if rewards
    }


def _pair(baseline: list[float], candidate: list[float]) -> tuple[float, float, int, int]:
    return (
        math.fsum(baseline) / len(baseline),
        math.fsum(candidate) / len(candidate),
        len(baseline),
        len(candidate),
    )


def _side(run: RunRewards, agents: list[str], tasks: dict[TaskKey, list[float]]) -> Side:
    chosen: list[AgentRewards] = [run.agents[agent] for agent in agents]
    return Side(
        path=run.path,
        agents=agents,
        tasks=len(tasks),
        measured_rollouts=sum(rewards.measured_rollouts for rewards in chosen),
        masked=sum(rewards.masked for rewards in chosen),
        failed=sum(rewards.failed for rewards in chosen),
        without_reward=sum(rewards.without_reward for rewards in chosen),
        mean_reward=mean_estimate([math.fsum(rewards) / len(rewards) for rewards in tasks.values()]),
    )


def _key_metrics(pairs: list[tuple[str, str]], baseline_path: Path, candidate_path: Path) -> list[KeyMetric]:
    found = []
    for baseline_agent, candidate_agent in pairs:
        baseline = key_metrics(baseline_path, baseline_agent, "baseline")
        candidate = key_metrics(candidate_path, candidate_agent, "candidate")
        found += [
            KeyMetric(baseline_agent, name, baseline[name], candidate[name])
            for name in baseline
            if name in candidate
        ]
    return found
