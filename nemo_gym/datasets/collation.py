"""`gym dataset collate`: check every dataset of a config, keep a metrics file next to each one so that a
silent change to the data shows up as a conflict (the metrics are `nemo_gym.datasets.metrics`), and merge
the datasets of each type into one JSONL file ready for training (lines repeated `num_repeats` times, each
stamped with the instance that declares it and the agent that serves it).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
from omegaconf import DictConfig
from pydantic import BaseModel, Field

from nemo_gym.config import server_kinds
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.datasets import (
    BenchmarkDatasetConfig,
    DatasetConfig,
    GitlabDatasetSource,
    HuggingFaceDatasetSource,
)
from nemo_gym.config.discovery import find_server_instances
from nemo_gym.config.errors import ConfigError, ServerRefNotFoundError
from nemo_gym.config.global_config import GlobalConfigDictParserConfig, parse_global_config_dict
from nemo_gym.config.jsonl import iter_jsonl, write_atomically
from nemo_gym.config.key_names import (
    ATTEMPT_INDEX_KEY_NAME,
    ROLLOUT_ID_KEY_NAME,
    ROLLOUT_INDEX_KEY_NAME,
    TASK_INDEX_KEY_NAME,
    TASK_SOURCE_KEY_NAME,
)
from nemo_gym.config.server_instances import (
    ResourcesServerInstanceConfig,
    ResponsesAPIAgentServerInstanceConfig,
)
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.datasets.metrics import STATISTIC_DECIMALS, DatasetMetrics
from nemo_gym.datasets.prompts import PromptConfig, load_prompt_config, prompted_row
from nemo_gym.datasets.task_data import RowCheck, TaskDataValidation, task_data_model
from nemo_gym.launch.preflight import implementation_dir
from nemo_gym.wire.episodes import materialize_task

CollationMode = Literal["train_preparation", "example_validation"]
TYPES_IN_SCOPE: dict[str, tuple[str, ...]] = {
    "train_preparation": ("train", "validation", "benchmark"),
    "example_validation": ("example",),
}
EXAMPLE_ROWS = 5

AnyDataset = DatasetConfig | BenchmarkDatasetConfig
IDENTITY_KEYS = (TASK_INDEX_KEY_NAME, ROLLOUT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME, ATTEMPT_INDEX_KEY_NAME)


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
    task_data_validation: TaskDataValidation = Field(
        default="auto",
        description="rows against their resources server's task_data.TaskData, where it has one: off, warn, "
        "error, or auto (error in example_validation mode, else warn)",
    )


class AgentDataset(BaseModel):
    """A dataset, the instance whose `datasets:` list names it (`task_source`: an agent or, as NeMo Gym 0.7
    allows, a resources server) and the agent that serves it (None: a resources server that no agent, or
    several, point at; the rows' `task_source` is then resolved when they run)."""

    agent_name: str | None
    dataset: AnyDataset
    task_source: str
    resources_server_folder: Path | None = None  # where its rows' TaskData would be


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
    folders = {
        instance.name: _folder_of(instance)
        for instance in instances
        if isinstance(instance, ResourcesServerInstanceConfig)
    }
    entries = []
    for instance in instances:
        if isinstance(instance, ResponsesAPIAgentServerInstanceConfig):
            agent: str | None = instance.name
            served = (instance.get_inner_run_server_config_dict().get("resources_server") or {}).get("name")
        elif isinstance(instance, ResourcesServerInstanceConfig):
            agents = serving.get(instance.name, [])
            agent = agents[0] if len(agents) == 1 else None
            served = instance.name
        else:
            continue
        entries += [
            AgentDataset(
                agent_name=agent,
                dataset=dataset,
                task_source=instance.name,
                resources_server_folder=folders.get(served),
            )
            for dataset in instance.datasets
        ]
    return entries


def _folder_of(instance: ResourcesServerInstanceConfig) -> Path | None:
    try:
        return implementation_dir(instance, Path.cwd())
    except ConfigError:
        return None  # a server that cannot be found fails where it is started, not here


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
            stamp[AGENT_REF_KEY] = {"type": server_kinds.AGENT.key, "name": entry.agent_name}
        rows = _row_check(entry, path, settings) if check_metrics else None
        for line in iter_jsonl(path):
            row = prompted_row(line.row, templates, f"{path}:{line.number}") if templates else line.row
            if rows is not None:
                rows.check(row, line.number)
            metrics.add(row, line.number, dataset.num_repeats)
            type_metrics.add(row, line.number, dataset.num_repeats)
            written = _as_task(row, dataset.taskset, line.number, path) if dataset.taskset else row | stamp
            yield (orjson.dumps(written) + b"\n") * dataset.num_repeats
        if rows is not None:
            rows.report()
        if check_metrics:
            _check_dataset(dataset, path, metrics, settings)


def _as_task(row: dict[str, Any], taskset: str, line_number: int, path: Path) -> dict[str, Any]:
    """A row of a `taskset` dataset as NeMo Gym 0.7 writes it: a materialized task, which environment
    servers run (routed by `environment_server_routes`), with the collector's identity keys it had. A row
    without an id of its own is known by its place in the file (0 for the first line)."""
    try:
        task = materialize_task(row, taskset=taskset, task_index=line_number - 1)
    except ValueError as error:
        raise ConfigError(f"{path}:{line_number}: {error}") from None
    return task | {key: row[key] for key in IDENTITY_KEYS if key in row}


def _row_check(entry: AgentDataset, path: Path, settings: CollationSettings) -> RowCheck | None:
    mode = settings.task_data_validation
    model = (
        task_data_model(entry.resources_server_folder)
        if entry.resources_server_folder and mode != "off"
        else None
    )
    if model is None:
        return None
    strict = mode == "error" or (mode == "auto" and settings.mode == "example_validation")
    return RowCheck(model, strict, path)


def _dataset_path(dataset: AnyDataset) -> Path:
    return locate_data_file(str(dataset.jsonl_fpath), f"dataset '{dataset.name}' jsonl_fpath")


def _is_present(dataset: AnyDataset) -> bool:
    try:
        _dataset_path(dataset)
    except ConfigError:
        return False
    return True


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
        from nemo_gym.datasets.gitlab import download_package_file

        download_package_file(cfg, source.dataset_name, source.version, source.artifact_fpath, target)
    else:
        from nemo_gym.datasets.huggingface import download_dataset_file

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


def _run_prepare_script(
    dataset: BenchmarkDatasetConfig, target: Path, script_args: dict[str, Any] | None = None
) -> None:
    """Import the benchmark's prepare script and call its `prepare()` (with `script_args` as keywords), which
    must write `jsonl_fpath`."""
    script = locate_data_file(str(dataset.prepare_script), f"dataset '{dataset.name}' prepare_script")
    spec = importlib.util.spec_from_file_location(f"gym_prepare_{dataset.name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prepare = getattr(module, "prepare", None)
    if not callable(prepare):
        raise ConfigError(f"{script}: a prepare script must define prepare() returning the path it wrote")
    # A script that takes `output_fpath` writes where the config says (below the current directory for a
    # relative jsonl_fpath, so an installed package's folder is never written to); 0.7's take no argument.
    signature = inspect.signature(prepare)
    accepts_target = "output_fpath" in signature.parameters
    script_args = script_args or {}
    try:
        signature.bind_partial(**script_args)
    except TypeError as error:
        takes = ", ".join(name for name in signature.parameters if name != "output_fpath") or "nothing"
        raise ConfigError(f"{script}: prepare_script_args: {error} (prepare() takes: {takes})") from None
    written = Path(prepare(output_fpath=target, **script_args) if accepts_target else prepare(**script_args))
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
    run` runs when no input file is given), without touching the metrics files beside the data. A benchmark
    whose file is missing is prepared first."""
    settings = CollationSettings(output_dirpath=output_dirpath)
    for entry in datasets:  # a benchmark not prepared yet is prepared here, once
        if isinstance(entry.dataset, BenchmarkDatasetConfig) and not _is_present(entry.dataset):
            _run_prepare_script(entry.dataset, Path(str(entry.dataset.jsonl_fpath)).expanduser())
    output_dirpath.mkdir(parents=True, exist_ok=True)
    _collate_type(dataset_type, datasets, settings, check_metrics=False)
    return output_dirpath / f"{dataset_type}.jsonl"


class PrepareSettings(BaseNeMoGymCLIConfig):
    """Prepare every benchmark dataset of the selected configs (`--benchmark NAME`, `--config FILE`): import
    its prepare_script and run prepare(), which must write the dataset's jsonl_fpath."""

    use_cached_prepared_benchmarks: bool = Field(
        default=False, description="keep a benchmark file that already exists instead of preparing it again"
    )
    prepare_script_args: dict[str, Any] = Field(
        default_factory=dict,
        description="keyword arguments for each prepare() (`+prepare_script_args.length=131072`), as 0.7 takes them",
    )


def prepare_benchmarks(overrides: list[str]) -> int:
    """Entry point of `gym eval prepare` / `ng_prepare_benchmark`."""
    try:
        cfg = parse_global_config_dict(overrides)
    except ServerRefNotFoundError:  # preparing starts no server: a config without a model gets a placeholder
        cfg = parse_global_config_dict(overrides, GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT)
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
        _run_prepare_script(dataset, target, settings.prepare_script_args)
    return 0
