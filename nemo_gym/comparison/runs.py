"""The rewards of one results file, as `gym eval run` / `gym collect` write it: per agent, per task
(`_ng_task_index`), the rewards of its measured rollouts, and counts of the rollouts left out.

A rollout is left out, and counted, when its reward was not computed: its resources server masked it
(`mask_sample: true`), it is a failure record (`_ng_failure_class`, in the results file or unresolved in
the `<stem>_failures.jsonl` beside it), or it carries no numeric reward."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, iter_jsonl, rollout_key
from nemo_gym.envkit.reward_profile import MASK_SAMPLE_FIELD, is_metric

UNNAMED_AGENT = "(no agent_ref)"


@dataclass
class AgentRewards:
    """One agent's measured rewards by task index, and how many of its rollouts were left out, by why."""

    tasks: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    masked: int = 0
    failed: int = 0
    without_reward: int = 0

    @property
    def excluded(self) -> int:
        return self.masked + self.failed + self.without_reward

    @property
    def measured_rollouts(self) -> int:
        return sum(len(rewards) for rewards in self.tasks.values())


@dataclass(frozen=True)
class RunRewards:
    """A results file read for comparison: its rewards per agent name."""

    path: Path
    agents: dict[str, AgentRewards]


def read_run(path: Path, side: str) -> RunRewards:
    """The rewards of the results file at `path`; `side` ("baseline", "candidate") names it in errors."""
    if not path.is_file():
        raise ConfigError(f"{side} results file {path} does not exist; pass the output of gym eval run (-o)")
    agents: dict[str, AgentRewards] = defaultdict(AgentRewards)
    finished: set[tuple[str, int, int]] = set()
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        agent = agent_name_of(line.row) or UNNAMED_AGENT
        task, rollout = rollout_key(line.row, where)
        _add_rollout(agents[agent], task, line.row)
        if not line.row.get(FAILURE_CLASS_KEY):
            finished.add((agent, task, rollout))
    if not agents:
        raise ConfigError(f"{side} results file {path} holds no rollouts; nothing to compare")
    _count_unresolved_failures(CollectionPaths.for_output(path).failures, finished, agents)
    return RunRewards(path, dict(agents))


def _add_rollout(rewards: AgentRewards, task: int, row: dict[str, Any]) -> None:
    reward = row.get("reward")
    if row.get(FAILURE_CLASS_KEY):
        rewards.failed += 1
    elif row.get(MASK_SAMPLE_FIELD):
        rewards.masked += 1
    elif isinstance(reward, bool) or not is_metric(reward):
        rewards.without_reward += 1
    else:
        rewards.tasks[task].append(float(reward))


def _count_unresolved_failures(
    failures: Path, finished: set[tuple[str, int, int]], agents: dict[str, AgentRewards]
) -> None:
    """Rollouts whose every attempt failed: in the failures file (one line per attempt), never in the
    results. A retried rollout that later succeeded is not one."""
    if not failures.is_file():
        return
    unresolved: set[tuple[str, int, int]] = set()
    for line in iter_jsonl(failures):
        agent = agent_name_of(line.row) or UNNAMED_AGENT
        key = (agent, *rollout_key(line.row, f"{failures}:{line.number}"))
        if key not in finished:
            unresolved.add(key)
    for agent, _, _ in unresolved:
        agents[agent].failed += 1


def agent_pairs(
    baseline: RunRewards, candidate: RunRewards, baseline_agent: str | None, candidate_agent: str | None
) -> list[tuple[str, str]]:
    """(baseline agent, candidate agent) pairs to compare. Without names, both files must hold the same
    agents and each is compared with itself; a name given for one side only is looked up on the other
    side too, else that side's only agent is taken."""
    if baseline_agent is None and candidate_agent is None:
        if set(baseline.agents) != set(candidate.agents):
            raise ConfigError(
                f"mismatched agents: baseline {baseline.path} has {_names(baseline)}, candidate "
                f"{candidate.path} has {_names(candidate)}; name the pair with --baseline-agent and "
                "--candidate-agents (or --agent when both sides use one name)"
            )
        return [(name, name) for name in sorted(baseline.agents)]
    chosen_baseline = _chosen_agent(baseline, "baseline", baseline_agent, candidate_agent)
    chosen_candidate = _chosen_agent(candidate, "candidate", candidate_agent, baseline_agent)
    return [(chosen_baseline, chosen_candidate)]


def _chosen_agent(run: RunRewards, side: str, own: str | None, other_side: str | None) -> str:
    """The agent named for this side, else the other side's name if this file has it, else its only one."""
    flag = "--baseline-agent" if side == "baseline" else "--candidate-agents"
    if own is not None and own not in run.agents:
        raise ConfigError(
            f"{side} results file {run.path} has no agent {own!r}; it has {_names(run)} ({flag})"
        )
    if own is not None:
        return own
    if other_side in run.agents:
        return other_side
    if len(run.agents) == 1:
        return next(iter(run.agents))
    raise ConfigError(f"{side} results file {run.path} has agents {_names(run)}; choose one with {flag}")


def _names(run: RunRewards) -> str:
    return ", ".join(sorted(run.agents))


def key_metrics(path: Path, agent: str, side: str) -> dict[str, float]:
    """The numeric `key_metrics` of `agent` in an `<stem>_aggregate_metrics.json` file (empty if that
    agent has no entry)."""
    try:
        entries = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ConfigError(f"{side} aggregate metrics file {path} does not exist") from None
    except orjson.JSONDecodeError as error:
        raise ConfigError(f"{side} aggregate metrics file {path} is not valid JSON ({error})") from None
    if not isinstance(entries, list):
        raise ConfigError(f"{side} aggregate metrics file {path} must hold a list of per-agent entries")
    for entry in entries:
        if isinstance(entry, dict) and agent_name_of(entry) == agent:
            metrics = entry.get("key_metrics") or {}
            return {
                name: float(value)
                for name, value in metrics.items()
                if is_metric(value) and not isinstance(value, bool)
            }
    return {}
