"""`gym eval profile`: the reward profile of a finished collection, computed from its files alone.

It pairs every result with its materialized input by (`_ng_task_index`, `_ng_rollout_index`), so the
expected rollout count of a task is known exactly rather than guessed from the results, and each group
carries the real input row as `sample`. The statistics are those of `/aggregate_metrics`
(`nemo_gym.envkit.reward_profile`), per task and per `agent_ref.name`. Failure records (`_ng_failure_class`) are
counted, never profiled; a rollout with neither a result nor a failure record is missing, an error unless
`allow_partial_rollouts` is set.

Both files are read line by line: only one compact numeric entry per result and the byte offset of one
input row per task are kept; the sample rows are read back from the inputs file when their line is written.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import TASK_INDEX_KEY, iter_jsonl, rollout_key, row_at, write_atomically
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.envkit.reward_profile import (
    SAMPLE_KEY,
    column_statistics,
    completion_pct,
    default_key_metrics,
    failure_class,
    failure_metrics,
    group_metrics,
    rollout_info,
)

RolloutKey = tuple[int, int]


class ProfileConfig(BaseNeMoGymCLIConfig):
    """Profile collected rollouts against their materialized inputs; needs no running servers.

    Writes `<rollouts stem>_reward_profiling.jsonl` (one line per task) and
    `<rollouts stem>_agent_metrics.json` (one entry per agent) next to the rollouts file.
    """

    inputs_jsonl_fpath: Path = Field(description="the <output stem>_materialized_inputs.jsonl of the run")
    rollouts_jsonl_fpath: Path = Field(description="the results file of the run")
    allow_partial_rollouts: bool = Field(
        default=False, description="profile even when some inputs have no result yet"
    )


@dataclass
class TaskProfile:
    """What is kept of one task: where its sample row is, how many rollouts it expects, what came back."""

    agent: str
    task_index: int
    sample_line: int
    sample_offset: int
    expected: int = 0
    infos: list[dict[str, Any]] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)


@dataclass
class InputSlot:
    """One materialized input row: its task and line, and the results line that answered it (if any)."""

    task: TaskProfile
    line: int
    result_line: int | None = None
    failed: bool = False


def run_profile(overrides: Sequence[str]) -> int:
    """`gym eval profile +inputs_jsonl_fpath=... +rollouts_jsonl_fpath=... [+allow_partial_rollouts=true]`."""
    config = command_settings(ProfileConfig, parse_global_config_dict(list(overrides)))
    inputs_path = locate_data_file(str(config.inputs_jsonl_fpath), "inputs_jsonl_fpath")
    rollouts_path = locate_data_file(str(config.rollouts_jsonl_fpath), "rollouts_jsonl_fpath")
    slots, tasks = read_inputs(inputs_path)
    read_results(rollouts_path, inputs_path, slots)
    check_complete(slots, rollouts_path, inputs_path, config.allow_partial_rollouts)
    profiling_path = rollouts_path.with_name(f"{rollouts_path.stem}_reward_profiling.jsonl")
    metrics_path = rollouts_path.with_name(f"{rollouts_path.stem}_agent_metrics.json")
    write_atomically(profiling_path, group_lines(tasks, inputs_path))
    agents = agent_entries(tasks)
    write_atomically(metrics_path, [json.dumps(agents, indent=2).encode()])
    print(completion_summary(agents, profiling_path, metrics_path))
    return 0


# ---------------------------------------------------------------------------------------------------------
# Reading


def agent_name(row: dict[str, Any], where: str) -> str:
    """Tasks are profiled per agent, so an input row without one cannot be placed."""
    name = agent_name_of(row)
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"{where}: no {AGENT_REF_KEY}.name; pass the materialized inputs file "
            "(<output stem>_materialized_inputs.jsonl), where every row has one"
        )
    return name


def read_inputs(path: Path) -> tuple[dict[RolloutKey, InputSlot], list[TaskProfile]]:
    """One slot per materialized row, and the tasks sorted by (agent, task); a repeated pair is an error."""
    slots: dict[RolloutKey, InputSlot] = {}
    tasks: dict[tuple[str, int], TaskProfile] = {}
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        key = rollout_key(line.row, where)
        agent = agent_name(line.row, where)
        if key in slots:
            raise ConfigError(
                f"{where}: task {key[0]} rollout {key[1]} is listed again (first at line "
                f"{slots[key].line}); re-materialize the inputs or delete the repeated line"
            )
        task = tasks.setdefault((agent, key[0]), TaskProfile(agent, key[0], line.number, line.offset))
        task.expected += 1
        slots[key] = InputSlot(task, line.number)
    return slots, [task for _, task in sorted(tasks.items())]


def read_results(path: Path, inputs_path: Path, slots: dict[RolloutKey, InputSlot]) -> None:
    """Attach each result to its input slot as a compact numeric entry; count failure records."""
    for line in iter_jsonl(path):
        where = f"{path}:{line.number}"
        key = rollout_key(line.row, where)
        slot = slots.get(key)
        if slot is None:
            raise ConfigError(
                f"{where}: task {key[0]} rollout {key[1]} has no row in {inputs_path}; "
                "pass the materialized inputs of the same run"
            )
        if (name := failure_class(line.row)) is not None:
            slot.task.failures[name] += 1
            slot.failed = True
            continue
        if slot.result_line is not None:
            raise ConfigError(
                f"{where}: second result for task {key[0]} rollout {key[1]} (first at line "
                f"{slot.result_line}); delete one of the two lines"
            )
        slot.result_line = line.number
        slot.task.infos.append(rollout_info(line.row, *key))


def check_complete(
    slots: dict[RolloutKey, InputSlot], rollouts_path: Path, inputs_path: Path, allow_partial: bool
) -> None:
    """Inputs with neither a result nor a failure record are an error unless partial runs are allowed."""
    missing = [slot for slot in slots.values() if slot.result_line is None and not slot.failed]
    if missing and not allow_partial:
        first = min(missing, key=lambda slot: slot.line)
        raise ConfigError(
            f"{rollouts_path}: {len(missing)} of {len(slots)} rollouts have no result (first: "
            f"{inputs_path}:{first.line}); finish the run (resume_from_cache=true) "
            "or pass +allow_partial_rollouts=true"
        )


# ---------------------------------------------------------------------------------------------------------
# Writing


def task_group(task: TaskProfile, sample: dict[str, Any]) -> dict[str, Any]:
    """The `/aggregate_metrics` group of a task, with its agent and its real input row."""
    group = group_metrics(task.task_index, task.infos, task.expected, sum(task.failures.values()))
    return {AGENT_REF_KEY: {"name": task.agent}, TASK_INDEX_KEY: task.task_index, SAMPLE_KEY: sample, **group}


def group_lines(tasks: Sequence[TaskProfile], inputs_path: Path) -> Iterator[bytes]:
    """One group per line, built one task at a time with its sample read back, so no rows are held."""
    with inputs_path.open("rb") as inputs:
        for task in tasks:
            sample = row_at(inputs, task.sample_line, task.sample_offset)
            yield (json.dumps(task_group(task, sample)) + "\n").encode()


def agent_entries(tasks: Sequence[TaskProfile]) -> list[dict[str, Any]]:
    """Per agent (sorted by name): completion counts, pooled statistics and failure counts."""
    by_agent: dict[str, list[TaskProfile]] = {}
    for task in tasks:
        by_agent.setdefault(task.agent, []).append(task)
    return [agent_entry(name, agent_tasks) for name, agent_tasks in sorted(by_agent.items())]


def agent_entry(name: str, tasks: Sequence[TaskProfile]) -> dict[str, Any]:
    expected = sum(task.expected for task in tasks)
    done = sum(len(task.infos) for task in tasks)
    failures = sum((task.failures for task in tasks), Counter())
    agent_metrics = {
        **column_statistics([info for task in tasks for info in task.infos]),
        **failure_metrics(failures),
    }
    return {
        AGENT_REF_KEY: {"name": name},
        "num_tasks": len(tasks),
        "num_rollouts": done,
        "expected_num_rollouts": expected,
        "missing_num_rollouts": expected - done,
        "reward_profile_completion_pct": completion_pct(done, expected),
        "agent_metrics": agent_metrics,
        "key_metrics": default_key_metrics(agent_metrics),
    }


def completion_summary(agents: Sequence[dict[str, Any]], profiling_path: Path, metrics_path: Path) -> str:
    lines = []
    for agent in agents:
        metrics = agent["agent_metrics"]
        mean_reward = metrics.get("mean/reward")
        reward = f", mean/reward {mean_reward:.4g}" if mean_reward is not None else ""
        lines.append(
            f"{agent[AGENT_REF_KEY]['name']}: {agent['num_rollouts']}/{agent['expected_num_rollouts']} rollouts "
            f"profiled ({agent['reward_profile_completion_pct']:.1f}%), "
            f"{metrics['num_failed_rollouts']} failed{reward}"
        )
    lines.append(f"Wrote {profiling_path} and {metrics_path}")
    return "\n".join(lines)
