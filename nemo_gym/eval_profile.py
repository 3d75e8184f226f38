"""`gym eval profile`: the reward profile of a finished collection, computed from its files alone.

It pairs every result with its materialized input by (`_ng_task_index`, `_ng_rollout_index`), so the
expected rollout count of a task is known exactly rather than guessed from the results, and each group
carries the real input row as `sample`. The statistics are those of `/aggregate_metrics`
(`nemo_gym.reward_profile`), per task and per `agent_ref.name`. Failure records (`_ng_failure_class`) are
counted, never profiled; a rollout with neither a result nor a failure record is missing, an error unless
`allow_partial_rollouts` is set.

Both files are read line by line: only one compact numeric entry per result and the byte offset of one
input row per task are kept; the sample rows are read back from the inputs file when their line is written.
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from omegaconf.errors import OmegaConfBaseException
from pydantic import Field, ValidationError

from nemo_gym.config_types import BaseNeMoGymCLIConfig, ConfigError, ConfigPathNotFoundError
from nemo_gym.global_config import parse_global_config_dict
from nemo_gym.reward_profile import (
    INDEX_KEYS,
    TASK_INDEX_KEY,
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
    config = profile_config(overrides)
    inputs_path = existing_file(config.inputs_jsonl_fpath, "inputs_jsonl_fpath")
    rollouts_path = existing_file(config.rollouts_jsonl_fpath, "rollouts_jsonl_fpath")
    slots, tasks = read_inputs(inputs_path)
    read_results(rollouts_path, inputs_path, slots)
    check_complete(slots, rollouts_path, inputs_path, config.allow_partial_rollouts)
    profiling_path = rollouts_path.with_name(f"{rollouts_path.stem}_reward_profiling.jsonl")
    metrics_path = rollouts_path.with_name(f"{rollouts_path.stem}_agent_metrics.json")
    write_group_lines(tasks, inputs_path, profiling_path)
    agents = agent_entries(tasks)
    with atomic_writer(metrics_path) as file:
        json.dump(agents, file, indent=2)
    print(completion_summary(agents, profiling_path, metrics_path))
    return 0


def profile_config(overrides: Sequence[str]) -> ProfileConfig:
    """The command's top-level keys, validated; a missing or bad one is a one-line error naming it."""
    cfg = parse_global_config_dict(list(overrides))
    try:
        wanted = [*ProfileConfig.model_fields, "h", "help"]  # +h=true prints the fields and exits
        values = {key: cfg[key] for key in wanted if cfg.get(key) is not None}
        return ProfileConfig.model_validate(values)
    except OmegaConfBaseException as error:
        raise ConfigError(f"gym eval profile: cannot resolve a setting: {error}".splitlines()[0]) from None
    except ValidationError as error:
        problem = error.errors()[0]
        key = ".".join(str(part) for part in problem["loc"])
        raise ConfigError(f"gym eval profile: {key}: {problem['msg']}; pass +{key}=<value>") from None


def existing_file(path: Path, key: str) -> Path:
    """`path` (relative to the current directory) if it is a file, else an error naming the setting."""
    path = path.expanduser()
    if not path.is_file():
        raise ConfigPathNotFoundError(f"{key}: file '{path}' not found; pass the path written by the run")
    return path


# ---------------------------------------------------------------------------------------------------------
# Reading


def json_lines(path: Path) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, byte offset, object) of each non-blank line; anything but a JSON object is an error."""
    offset = 0
    with path.open("rb") as file:
        for number, raw in enumerate(file, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except json.JSONDecodeError as error:
                raise ConfigError(
                    f"{path}:{number}: not valid JSON ({error.msg}); repair or delete the line"
                ) from None
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{path}:{number}: expected a JSON object, got {type(value).__name__}; one row per line"
                )
            yield number, start, value


def rollout_key(row: dict[str, Any], path: Path, number: int) -> RolloutKey:
    """(task, rollout) of a row; both indices must be written by the collector, as integers."""
    indices = []
    for key in INDEX_KEYS:
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(
                f"{path}:{number}: {key} must be an integer, got {value!r}; "
                "use the files written by rollout collection, which stamp both indices"
            )
        indices.append(value)
    return indices[0], indices[1]


def agent_name(row: dict[str, Any], path: Path, number: int) -> str:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"{path}:{number}: no agent_ref.name; pass the materialized inputs file "
            "(<output stem>_materialized_inputs.jsonl), where every row has one"
        )
    return name


def read_inputs(path: Path) -> tuple[dict[RolloutKey, InputSlot], list[TaskProfile]]:
    """One slot per materialized row, and the tasks sorted by (agent, task); a repeated pair is an error."""
    slots: dict[RolloutKey, InputSlot] = {}
    tasks: dict[tuple[str, int], TaskProfile] = {}
    for number, offset, row in json_lines(path):
        key = rollout_key(row, path, number)
        agent = agent_name(row, path, number)
        if key in slots:
            raise ConfigError(
                f"{path}:{number}: task {key[0]} rollout {key[1]} is listed again (first at line "
                f"{slots[key].line}); re-materialize the inputs or delete the repeated line"
            )
        task = tasks.setdefault((agent, key[0]), TaskProfile(agent, key[0], sample_offset=offset))
        task.expected += 1
        slots[key] = InputSlot(task, number)
    return slots, [task for _, task in sorted(tasks.items())]


def read_results(path: Path, inputs_path: Path, slots: dict[RolloutKey, InputSlot]) -> None:
    """Attach each result to its input slot as a compact numeric entry; count failure records."""
    for number, _, row in json_lines(path):
        key = rollout_key(row, path, number)
        slot = slots.get(key)
        if slot is None:
            raise ConfigError(
                f"{path}:{number}: task {key[0]} rollout {key[1]} has no row in {inputs_path}; "
                "pass the materialized inputs of the same run"
            )
        if (name := failure_class(row)) is not None:
            slot.task.failures[name] += 1
            slot.failed = True
            continue
        if slot.result_line is not None:
            raise ConfigError(
                f"{path}:{number}: second result for task {key[0]} rollout {key[1]} (first at line "
                f"{slot.result_line}); delete one of the two lines"
            )
        slot.result_line = number
        slot.task.infos.append(rollout_info(row, *key))


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


@contextmanager
def atomic_writer(path: Path) -> Iterator[IO[str]]:
    """A new file beside `path` that replaces it only once complete, so no reader sees half a profile."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with temporary.open("x", encoding="utf-8") as file:
            yield file
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def read_row_at(file: IO[bytes], offset: int) -> dict[str, Any]:
    file.seek(offset)
    return json.loads(file.readline())


def task_group(task: TaskProfile, sample: dict[str, Any]) -> dict[str, Any]:
    """The `/aggregate_metrics` group of a task, with its agent and its real input row."""
    group = group_metrics(task.task_index, task.infos, task.expected, sum(task.failures.values()))
    return {"agent_ref": {"name": task.agent}, TASK_INDEX_KEY: task.task_index, "sample": sample, **group}


def write_group_lines(tasks: Sequence[TaskProfile], inputs_path: Path, path: Path) -> None:
    """One group per line, built and written one task at a time."""
    with inputs_path.open("rb") as inputs, atomic_writer(path) as out:
        for task in tasks:
            out.write(json.dumps(task_group(task, read_row_at(inputs, task.sample_offset))) + "\n")


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
        "agent_ref": {"name": name},
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
            f"{agent['agent_ref']['name']}: {agent['num_rollouts']}/{agent['expected_num_rollouts']} rollouts "
            f"profiled ({agent['reward_profile_completion_pct']:.1f}%), "
            f"{metrics['num_failed_rollouts']} failed{reward}"
        )
    lines.append(f"Wrote {profiling_path} and {metrics_path}")
    return "\n".join(lines)
