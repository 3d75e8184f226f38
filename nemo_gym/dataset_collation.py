"""`gym dataset collate`: check every dataset of a config, keep a metrics file next to each one so that a
silent change to the data shows up as a conflict, and merge the datasets of each type into one JSONL file
ready for training (lines repeated `num_repeats` times, each stamped with the agent that serves it).

Standard deviations are sample ones (n - 1 denominator, 0 for fewer than two values), as in the metrics
files shipped with the example data; statistics are rounded to 2 decimals so that the files stay readable
and stable across platforms.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from omegaconf import DictConfig
from pydantic import BaseModel, Field, ValidationError

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.config_types import (
    BaseNeMoGymCLIConfig,
    BenchmarkDatasetConfig,
    ConfigError,
    DatasetConfig,
    ResourcesServerInstanceConfig,
    ResponsesAPIAgentServerInstanceConfig,
)
from nemo_gym.global_config import (
    command_settings,
    find_server_instances,
    locate_data_file,
    parse_global_config_dict,
)
from nemo_gym.jsonl import iter_jsonl, write_atomically

CollationMode = Literal["train_preparation", "example_validation"]
TYPES_IN_SCOPE: dict[str, tuple[str, ...]] = {
    "train_preparation": ("train", "validation", "benchmark"),
    "example_validation": ("example",),
}
EXAMPLE_ROWS = 5
WORDS_KEY = "Json-dumped number of words (proxy for token count)"
MEASURES = ("Number of tools", WORDS_KEY, "Number of turns", "Temperature")
STATISTIC_DECIMALS = 2

AnyDataset = DatasetConfig | BenchmarkDatasetConfig


class CollationSettings(BaseNeMoGymCLIConfig):
    """Collate the datasets of the configured agents: per-dataset metrics files, per-type merged JSONL."""

    output_dirpath: Path = Field(description="where <type>.jsonl and <type>_metrics.json are written")
    mode: CollationMode = Field(default="train_preparation", description="which dataset types to collate")
    overwrite_metrics_conflicts: bool = Field(
        default=False, description="replace a differing <stem>_metrics.json instead of failing"
    )


class AgentDataset(BaseModel):
    """A dataset together with the agent instance whose `datasets:` list names it."""

    agent_name: str
    dataset: AnyDataset


class ValueStatistics:
    """The values of one measured quantity; `summary` gives the fixed statistics block of a metrics file."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def add(self, value: Any, times: int) -> None:
        if _is_number(value):
            self.values.extend([float(value)] * times)

    def summary(self) -> dict[str, Any]:
        values = self.values or [0.0]
        deviation = statistics.stdev(values) if len(values) > 1 else 0.0
        return {
            "Total # non-null values": len(self.values),
            "Average": round(statistics.fmean(values), STATISTIC_DECIMALS),
            "Min": round(min(values), STATISTIC_DECIMALS),
            "Max": round(max(values), STATISTIC_DECIMALS),
            "Standard deviation": round(deviation, STATISTIC_DECIMALS),
        }


class DatasetMetrics:
    """Statistics over run-request rows; rows that are not run requests are only counted as offending."""

    def __init__(self) -> None:
        self.examples = 0
        self.offending_lines: list[int] = []
        self.measures = {name: ValueStatistics() for name in MEASURES}
        self.extra_fields: dict[str, ValueStatistics] = {}
        self.key_counts: dict[str, int] = {}

    def add(self, row: dict[str, Any], line_number: int, times: int) -> None:
        try:
            BaseRunRequest.model_validate(row)
        except ValidationError:
            self.offending_lines.append(line_number)
            return
        self.examples += times
        params = row["responses_create_params"]
        self.measures["Number of tools"].add(len(params.get("tools") or []), times)
        self.measures[WORDS_KEY].add(len(json.dumps(params).split()), times)
        self.measures["Number of turns"].add(_user_turns(params.get("input")), times)
        self.measures["Temperature"].add(params.get("temperature"), times)
        for key, value in row.items():
            self.key_counts[key] = self.key_counts.get(key, 0) + times
            if key not in MEASURES and _is_number(value):
                self.extra_fields.setdefault(key, ValueStatistics()).add(value, times)

    def summary(self) -> dict[str, Any]:
        measured = {name: values.summary() for name, values in self.measures.items()}
        extra = {name: values.summary() for name, values in self.extra_fields.items()}
        return {
            "Number of examples": self.examples,
            **measured,
            **extra,
            "Key counts": self.key_counts,
        }


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _user_turns(messages: Any) -> int:
    """A plain-string input is one user turn; otherwise count the messages whose role is `user`."""
    if isinstance(messages, str):
        return 1
    return sum(1 for message in messages or [] if isinstance(message, dict) and message.get("role") == "user")


def run_collate(overrides: list[str]) -> int:
    """Entry point of `gym dataset collate` / `ng_prepare_data`."""
    cfg = parse_global_config_dict(overrides)
    settings = command_settings(CollationSettings, cfg)
    in_scope = TYPES_IN_SCOPE[settings.mode]
    datasets = [entry for entry in agent_datasets(cfg) if entry.dataset.type in in_scope]
    if not datasets:
        raise ConfigError(f"no agent in the config has a dataset of type {' or '.join(in_scope)}")
    if settings.mode == "example_validation":
        _check_every_resources_server_has_examples(cfg, datasets)
    settings.output_dirpath.mkdir(parents=True, exist_ok=True)
    for dataset_type in in_scope:
        typed = [entry for entry in datasets if entry.dataset.type == dataset_type]
        if typed:
            _collate_type(dataset_type, typed, settings)
            print(f"Wrote {settings.output_dirpath / f'{dataset_type}.jsonl'} ({len(typed)} dataset(s)).")
    return 0


def agent_datasets(cfg: DictConfig) -> list[AgentDataset]:
    """Every dataset listed by an agent instance, in config order."""
    return [
        AgentDataset(agent_name=instance.name, dataset=dataset)
        for instance in find_server_instances(cfg)
        if isinstance(instance, ResponsesAPIAgentServerInstanceConfig)
        for dataset in instance.datasets
    ]


def _check_every_resources_server_has_examples(cfg: DictConfig, datasets: list[AgentDataset]) -> None:
    """Each environment must ship example tasks, served by an agent that points at it."""
    instances = find_server_instances(cfg)
    served = {
        instance.get_inner_run_server_config_dict().get("resources_server", {}).get("name")
        for instance in instances
        if instance.name in {entry.agent_name for entry in datasets}
    }
    for instance in instances:
        if isinstance(instance, ResourcesServerInstanceConfig) and instance.name not in served:
            raise ConfigError(
                f"resources server '{instance.name}' has no example dataset: add an agent pointing at it "
                "with `datasets: [{name: example, type: example, jsonl_fpath: ...}]`"
            )


def _collate_type(dataset_type: str, datasets: list[AgentDataset], settings: CollationSettings) -> None:
    """Write `<type>.jsonl` in one streaming pass that also checks each dataset's metrics file."""
    type_metrics = DatasetMetrics()
    output = settings.output_dirpath / f"{dataset_type}.jsonl"
    write_atomically(output, _stamped_lines(datasets, type_metrics, settings))
    names = [f"{entry.agent_name}/{entry.dataset.name}" for entry in datasets]
    summary = {"datasets": names, **type_metrics.summary()}
    write_atomically(settings.output_dirpath / f"{dataset_type}_metrics.json", [_pretty_json(summary)])


def _stamped_lines(
    datasets: list[AgentDataset], type_metrics: DatasetMetrics, settings: CollationSettings
) -> Iterator[bytes]:
    for entry in datasets:
        path = _dataset_path(entry.dataset)
        metrics = DatasetMetrics()
        agent_ref = {"type": "responses_api_agents", "name": entry.agent_name}
        for line in iter_jsonl(path):
            metrics.add(line.row, line.number, entry.dataset.num_repeats)
            type_metrics.add(line.row, line.number, entry.dataset.num_repeats)
            yield (orjson.dumps(line.row | {"agent_ref": agent_ref}) + b"\n") * entry.dataset.num_repeats
        _check_dataset(entry.dataset, path, metrics, settings)


def _dataset_path(dataset: AnyDataset) -> Path:
    """The dataset's file; downloading a missing one is not available yet, so absence is an error."""
    if isinstance(dataset, BenchmarkDatasetConfig) and dataset.prompt_config is not None:
        raise ConfigError(
            f"dataset '{dataset.name}': applying a benchmark prompt_config is not yet available in this version"
        )
    return locate_data_file(str(dataset.jsonl_fpath), f"dataset '{dataset.name}' jsonl_fpath")


def _check_dataset(
    dataset: AnyDataset, path: Path, metrics: DatasetMetrics, settings: CollationSettings
) -> None:
    """Reject offending rows and wrong example sizes, then compare against the stored metrics file."""
    if metrics.offending_lines:
        raise ConfigError(
            f"{path}:{metrics.offending_lines[0]}: {len(metrics.offending_lines)} line(s) are not run "
            "requests (each needs a valid `responses_create_params`)"
        )
    rows = metrics.examples // dataset.num_repeats
    if settings.mode == "example_validation" and rows != EXAMPLE_ROWS:
        raise ConfigError(f"{path}: an example dataset must have exactly {EXAMPLE_ROWS} rows, found {rows}")
    new = orjson.loads(orjson.dumps(dataset.model_dump(mode="json") | metrics.summary()))
    _store_metrics(path, new, settings)


def _store_metrics(path: Path, new: dict[str, Any], settings: CollationSettings) -> None:
    """Write `<stem>_metrics.json`; a stored file whose values changed means the data changed unnoticed."""
    stored_path = path.with_name(f"{path.stem}_metrics.json")
    conflict_path = path.with_name(f"{path.stem}_metrics_conflict.json")
    stored = orjson.loads(stored_path.read_bytes()) if stored_path.is_file() else None
    if stored is not None and not _still_matches(stored, new) and not settings.overwrite_metrics_conflicts:
        write_atomically(conflict_path, [_pretty_json(new)])
        raise ConfigError(
            f"{stored_path} differs from the metrics of the current data (written to {conflict_path}); "
            "check the data, then rerun with +overwrite_metrics_conflicts=true to accept it"
        )
    write_atomically(stored_path, [_pretty_json(new)])
    conflict_path.unlink(missing_ok=True)
    if stored is None and settings.mode == "example_validation":
        raise ConfigError(f"{stored_path} was missing: it is written now; review and commit it, then rerun")


def _still_matches(stored: Any, new: Any) -> bool:
    """Every stored value is present and equal in `new` (floats to rounding); new keys are additions."""
    if isinstance(stored, dict):
        return isinstance(new, dict) and all(
            key in new and _still_matches(value, new[key]) for key, value in stored.items()
        )
    if isinstance(stored, float | int) and isinstance(new, float | int) and not isinstance(stored, bool):
        return math.isclose(stored, new, rel_tol=1e-6, abs_tol=10**-STATISTIC_DECIMALS)
    return stored == new


def _pretty_json(value: dict[str, Any]) -> bytes:
    """Indented like the metrics files shipped with the example data, so diffs against them stay small."""
    return (json.dumps(value, indent=4) + "\n").encode()
