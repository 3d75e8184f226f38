"""`gym dataset collate`: check every dataset of a config, keep a metrics file next to each one so that a
silent change to the data shows up as a conflict, and merge the datasets of each type into one JSONL file
ready for training (lines repeated `num_repeats` times, each stamped with the agent that serves it).

Standard deviations are sample ones (n - 1 denominator, 0 for fewer than two values), as in the metrics
files shipped with the example data; statistics are rounded as NeMo Gym rounds them (2 decimals, or 3
significant digits below 1) so that the files stay readable, stable across platforms, and equal to its own.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from omegaconf import DictConfig
from pydantic import BaseModel, Field, ValidationError

from nemo_gym.config_types import (
    AGENT_REF_KEY,
    BaseNeMoGymCLIConfig,
    BenchmarkDatasetConfig,
    ConfigError,
    DatasetConfig,
    GitlabDatasetSource,
    HuggingFaceDatasetSource,
    ResourcesServerInstanceConfig,
    ResponsesAPIAgentServerInstanceConfig,
)
from nemo_gym.global_config import (
    TASK_SOURCE_KEY_NAME,
    command_settings,
    find_server_instances,
    locate_data_file,
    parse_global_config_dict,
)
from nemo_gym.jsonl import iter_jsonl, write_atomically
from nemo_gym.prompt import RUN_REQUEST_KEY, PromptConfig, load_prompt_config, prompted_row
from nemo_gym.wire.rows import BaseRunRequest

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
    should_download: bool = Field(
        default=False,
        description="fetch missing train/validation files from their `source` (benchmarks: run prepare_script)",
    )
    data_source: Literal["gitlab", "huggingface"] | None = Field(
        default=None, description="which identifier to download from when a dataset has both"
    )


class AgentDataset(BaseModel):
    """A dataset, the instance whose `datasets:` list names it (`task_source`: an agent or, as NeMo Gym 0.7
    allows, a resources server) and the agent that serves it (None: a resources server that no agent, or
    several, point at; the rows' `task_source` is then resolved when they run)."""

    agent_name: str | None
    dataset: AnyDataset
    task_source: str


def rounded_statistic(value: float) -> float:
    """`value` to 2 decimals, or to 3 significant digits when that keeps more (0.548, not 0.55), as NeMo
    Gym writes its metrics files."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, max(STATISTIC_DECIMALS, 2 - math.floor(math.log10(abs(value)))))


class ValueStatistics:
    """Count, mean, spread and range of a numeric field, kept in constant memory (Welford's update)."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.squares = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, value: Any, times: int) -> None:
        """`times` copies of `value` (a repeated line); anything but a number is ignored."""
        if not _is_number(value):
            return
        total = self.count + times
        delta = float(value) - self.mean
        self.mean += delta * times / total
        self.squares += delta * delta * self.count * times / total
        self.count = total
        self.low, self.high = min(self.low, value), max(self.high, value)

    def summary(self) -> dict[str, Any]:
        deviation = math.sqrt(self.squares / (self.count - 1)) if self.count > 1 else 0.0
        return {
            "Total # non-null values": self.count,
            "Average": rounded_statistic(self.mean),
            "Min": rounded_statistic(float(self.low)) if self.count else 0.0,
            "Max": rounded_statistic(float(self.high)) if self.count else 0.0,
            "Standard deviation": rounded_statistic(deviation),
        }


class TextStatistics:
    """How many strings a field holds and how many differ (kept as short digests, not the strings)."""

    def __init__(self) -> None:
        self.total = 0
        self.digests: set[bytes] = set()

    def add(self, value: Any, times: int) -> None:
        if isinstance(value, str):
            self.total += times
            self.digests.add(hashlib.blake2b(value.encode(), digest_size=16).digest())

    def summary(self) -> dict[str, Any]:
        return {"unique_count": len(self.digests), "total_count": self.total}


class DatasetMetrics:
    """Statistics over run-request rows; rows that are not run requests are only counted as offending.

    Every other top-level field gets numeric statistics if it holds numbers and text statistics if it
    holds strings; a list field is measured over its elements."""

    def __init__(self) -> None:
        self.examples = 0
        self.offending_lines: list[int] = []
        self.measures = {name: ValueStatistics() for name in MEASURES}
        self.fields: dict[str, ValueStatistics | TextStatistics] = {}
        self.key_counts: dict[str, int] = {}

    def add(self, row: dict[str, Any], line_number: int, times: int) -> None:
        try:
            BaseRunRequest.model_validate(row)
        except ValidationError:
            self.offending_lines.append(line_number)
            return
        self.examples += times
        params = row[RUN_REQUEST_KEY]
        tools = params.get("tools")
        self.measures["Number of tools"].add(len(tools) if tools is not None else None, times)
        self.measures[WORDS_KEY].add(len(json.dumps(params).split()), times)
        self.measures["Number of turns"].add(_user_turns(params.get("input")), times)
        self.measures["Temperature"].add(params.get("temperature"), times)
        for key, value in row.items():
            self.key_counts[key] = self.key_counts.get(key, 0) + times
            if key not in MEASURES:
                self._add_field(key, value, times)

    def _add_field(self, key: str, value: Any, times: int) -> None:
        for element in value if isinstance(value, list) else [value]:
            statistics = self.fields.get(key)
            if statistics is None:
                if _is_number(element):
                    statistics = self.fields[key] = ValueStatistics()
                elif isinstance(element, str):
                    statistics = self.fields[key] = TextStatistics()
                else:
                    continue
            statistics.add(element, times)

    def summary(self) -> dict[str, Any]:
        measured = {name: values.summary() for name, values in self.measures.items()}
        fields = {name: values.summary() for name, values in self.fields.items()}
        return {"Number of examples": self.examples, **measured, **fields, "Key counts": self.key_counts}


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
    for entry in datasets:
        _ensure_present(entry.dataset, settings, cfg)
    settings.output_dirpath.mkdir(parents=True, exist_ok=True)
    for dataset_type in in_scope:
        typed = [entry for entry in datasets if entry.dataset.type == dataset_type]
        if typed:
            _collate_type(dataset_type, typed, settings)
            print(f"Wrote {settings.output_dirpath / f'{dataset_type}.jsonl'} ({len(typed)} dataset(s)).")
    return 0


def agent_datasets(cfg: DictConfig) -> list[AgentDataset]:
    """Every dataset listed by an agent or a resources server instance, in config order."""
    instances = find_server_instances(cfg)
    serving: dict[str, list[str]] = {}
    for instance in instances:
        if isinstance(instance, ResponsesAPIAgentServerInstanceConfig):
            served = instance.get_inner_run_server_config_dict().get("resources_server") or {}
            serving.setdefault(str(served.get("name")), []).append(instance.name)
    entries = []
    for instance in instances:
        if isinstance(instance, ResponsesAPIAgentServerInstanceConfig):
            agent: str | None = instance.name
        elif isinstance(instance, ResourcesServerInstanceConfig):
            agents = serving.get(instance.name, [])
            agent = agents[0] if len(agents) == 1 else None
        else:
            continue
        entries += [
            AgentDataset(agent_name=agent, dataset=dataset, task_source=instance.name)
            for dataset in instance.datasets
        ]
    return entries


def _check_every_resources_server_has_examples(cfg: DictConfig, datasets: list[AgentDataset]) -> None:
    """Each environment must ship example tasks, served by an agent that points at it."""
    instances = find_server_instances(cfg)
    declaring = {entry.task_source for entry in datasets}
    served = declaring | {
        instance.get_inner_run_server_config_dict().get("resources_server", {}).get("name")
        for instance in instances
        if instance.name in declaring
    }
    for instance in instances:
        if isinstance(instance, ResourcesServerInstanceConfig) and instance.name not in served:
            raise ConfigError(
                f"resources server '{instance.name}' has no example dataset: add an agent pointing at it "
                "with `datasets: [{name: example, type: example, jsonl_fpath: ...}]`"
            )


def _collate_type(
    dataset_type: str, datasets: list[AgentDataset], settings: CollationSettings, check_metrics: bool = True
) -> None:
    """Write `<type>.jsonl` in one streaming pass that also checks each dataset's metrics file (unless
    `check_metrics` is off: then the data folders are only read)."""
    type_metrics = DatasetMetrics()
    output = settings.output_dirpath / f"{dataset_type}.jsonl"
    write_atomically(output, _stamped_lines(datasets, type_metrics, settings, check_metrics))
    names = [f"{entry.task_source}/{entry.dataset.name}" for entry in datasets]
    summary = {"datasets": names, **type_metrics.summary()}
    write_atomically(settings.output_dirpath / f"{dataset_type}_metrics.json", [_pretty_json(summary)])


def _stamped_lines(
    datasets: list[AgentDataset],
    type_metrics: DatasetMetrics,
    settings: CollationSettings,
    check_metrics: bool,
) -> Iterator[bytes]:
    for entry in datasets:
        dataset = entry.dataset
        path = _dataset_path(dataset)
        templates = _prompt_templates(dataset)
        metrics = DatasetMetrics()
        stamp: dict[str, Any] = {TASK_SOURCE_KEY_NAME: entry.task_source}
        if entry.agent_name is not None:
            stamp[AGENT_REF_KEY] = {"type": "responses_api_agents", "name": entry.agent_name}
        for line in iter_jsonl(path):
            row = prompted_row(line.row, templates, f"{path}:{line.number}") if templates else line.row
            metrics.add(row, line.number, dataset.num_repeats)
            type_metrics.add(row, line.number, dataset.num_repeats)
            yield (orjson.dumps(row | stamp) + b"\n") * dataset.num_repeats
        if check_metrics:
            _check_dataset(dataset, path, metrics, settings)


def _dataset_path(dataset: AnyDataset) -> Path:
    return locate_data_file(str(dataset.jsonl_fpath), f"dataset '{dataset.name}' jsonl_fpath")


def _prompt_templates(dataset: AnyDataset) -> PromptConfig | None:
    if isinstance(dataset, BenchmarkDatasetConfig) and dataset.prompt_config is not None:
        return load_prompt_config(str(dataset.prompt_config))
    return None


def _ensure_present(dataset: AnyDataset, settings: CollationSettings, cfg: DictConfig) -> None:
    """A missing file is fetched from the dataset's source (or, for a benchmark, prepared) when asked."""
    try:
        _dataset_path(dataset)
        return
    except ConfigError:
        if not settings.should_download or dataset.type == "example":
            raise
    target = Path(str(dataset.jsonl_fpath)).expanduser()
    if isinstance(dataset, BenchmarkDatasetConfig):
        _run_prepare_script(dataset, target)
        return
    source = _download_source(dataset, settings.data_source)
    if isinstance(source, GitlabDatasetSource):
        from nemo_gym.gitlab_datasets import download_package_file

        download_package_file(cfg, source.dataset_name, source.version, source.artifact_fpath, target)
    else:
        from nemo_gym.hf_datasets import download_dataset_file

        download_dataset_file(cfg, source.repo_id, source.artifact_fpath, dataset.type, target)
    print(f"Downloaded dataset '{dataset.name}' to {target}.")


def _download_source(
    dataset: DatasetConfig, data_source: str | None
) -> GitlabDatasetSource | HuggingFaceDatasetSource:
    """The only identifier present, or the one `data_source` picks when a dataset has both."""
    available: dict[str, GitlabDatasetSource | HuggingFaceDatasetSource] = {}
    if dataset.gitlab_identifier is not None:
        available["gitlab"] = GitlabDatasetSource(**dataset.gitlab_identifier.model_dump())
    if dataset.huggingface_identifier is not None:
        available["huggingface"] = HuggingFaceDatasetSource(**dataset.huggingface_identifier.model_dump())
    if not available:
        raise ConfigError(
            f"dataset '{dataset.name}': {dataset.jsonl_fpath} is missing and the dataset has no `source` "
            "to download it from"
        )
    if data_source is not None:
        if data_source not in available:
            raise ConfigError(
                f"dataset '{dataset.name}': data_source={data_source}, but it has no such source"
            )
        return available[data_source]
    if len(available) > 1:
        raise ConfigError(
            f"dataset '{dataset.name}' can be downloaded from gitlab and huggingface; pick one with "
            "+data_source=gitlab|huggingface"
        )
    return next(iter(available.values()))


def _run_prepare_script(dataset: BenchmarkDatasetConfig, target: Path) -> None:
    """Import the benchmark's prepare script and call its `prepare()`, which must write `jsonl_fpath`."""
    script = locate_data_file(str(dataset.prepare_script), f"dataset '{dataset.name}' prepare_script")
    spec = importlib.util.spec_from_file_location(f"gym_prepare_{dataset.name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "prepare", None)):
        raise ConfigError(f"{script}: a prepare script must define prepare() returning the path it wrote")
    written = Path(module.prepare())
    if written.resolve() != target.resolve() or not target.is_file():
        raise ConfigError(f"{script}: prepare() wrote {written}, but jsonl_fpath is {target}")
    print(f"Prepared benchmark '{dataset.name}' into {target}.")


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
    """Write `<stem>_metrics.json`; a stored file whose values changed means the data changed unnoticed.

    A missing file is simply written (a new environment has none yet): only a difference fails.
    """
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
    if stored is None:
        print(f"Wrote {stored_path} (it was missing); commit it with the data.")


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


def collate_split(dataset_type: str, datasets: list[AgentDataset], output_dirpath: Path) -> Path:
    """`<output_dirpath>/<type>.jsonl` from `datasets`, as `gym dataset collate` writes it (what `gym eval
    run` runs when no input file is given), without touching the metrics files beside the data."""
    settings = CollationSettings(output_dirpath=output_dirpath)
    output_dirpath.mkdir(parents=True, exist_ok=True)
    _collate_type(dataset_type, datasets, settings, check_metrics=False)
    return output_dirpath / f"{dataset_type}.jsonl"


class PrepareSettings(BaseNeMoGymCLIConfig):
    """Prepare every benchmark dataset of the selected configs (`--benchmark NAME`, `--config FILE`): import
    its prepare_script and run prepare(), which must write the dataset's jsonl_fpath."""

    use_cached_prepared_benchmarks: bool = Field(
        default=False, description="keep a benchmark file that already exists instead of preparing it again"
    )


def prepare_benchmarks(overrides: list[str]) -> int:
    """Entry point of `gym eval prepare` / `ng_prepare_benchmark`."""
    cfg = parse_global_config_dict(overrides)
    settings = command_settings(PrepareSettings, cfg)
    benchmarks = [
        entry.dataset for entry in agent_datasets(cfg) if isinstance(entry.dataset, BenchmarkDatasetConfig)
    ]
    if not benchmarks:
        raise ConfigError("no benchmark dataset in the selected configs; choose one with --benchmark NAME")
    for dataset in benchmarks:
        target = Path(str(dataset.jsonl_fpath)).expanduser()
        if settings.use_cached_prepared_benchmarks and target.is_file():
            print(f"Benchmark '{dataset.name}' is already prepared in {target}.")
            continue
        _run_prepare_script(dataset, target)
    return 0
