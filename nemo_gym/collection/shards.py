"""`gym eval aggregate`: the results of sharded collections merged by (task, rollout) and aggregated
through a running deployment."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
from pydantic import Field

from nemo_gym.collection.aggregation import aggregate_results
from nemo_gym.collection.ledger import CollectionLedger
from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.collection.progress import key_metrics_line
from nemo_gym.collection.records import FAILURE_TERMINAL_KEY, agent_name_of
from nemo_gym.collection.rollout_health import VERDICTS_FILE, RolloutHealthSettings, check_after_run
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, iter_jsonl, rollout_key, write_atomically
from nemo_gym.config.settings import command_settings
from nemo_gym.serving.servers import ServerClient, configure_http_client_from, head_server_config_from

SIDECAR_SUFFIXES = ("_materialized_inputs.jsonl", "_failures.jsonl")


class ShardAggregationConfig(RolloutHealthSettings):
    """Merge the results of sharded `gym collect` runs and aggregate them through a running deployment."""

    input_glob: str | list[str] = Field(description="glob, comma-separated globs or a list, of result files")
    output_jsonl_fpath: str = Field(
        description="where the merged results go (with merge_shards); names the metrics file"
    )
    merge_shards: bool = Field(default=False, description="also write every result, by (task, rollout)")


def shard_files(input_glob: str | list[str]) -> list[Path]:
    """The result files matched by each pattern (sorted per pattern, first match wins), sidecars and the
    health check's verdicts left out."""
    found: dict[Path, None] = {}
    patterns = input_glob if isinstance(input_glob, list) else input_glob.split(",")
    for pattern in (part.strip() for part in patterns):
        if pattern:
            for match in sorted(glob.glob(os.path.expanduser(pattern))):
                if (
                    not match.endswith(SIDECAR_SUFFIXES)
                    and Path(match).name != VERDICTS_FILE
                    and Path(match).is_file()
                ):
                    found.setdefault(Path(match).resolve(), None)
    if not found:
        raise ConfigError(
            f"input_glob '{input_glob}' matches no result file; check the pattern and the folder"
        )
    return list(found)


def _load_shards(files: list[Path], ledger: CollectionLedger) -> int:
    count = 0
    for index, path in enumerate(files):
        for line in iter_jsonl(path):
            key = rollout_key(line.row, f"{path}:{line.number}")
            if not ledger.record_position(key, index, line.offset):
                raise ConfigError(
                    f"{path}:{line.number}: rollout (task {key[0]}, rollout {key[1]}) appears in more than one line "
                    "of the shards; remove the duplicate or narrow input_glob"
                )
            count += 1
        failures = CollectionPaths.for_output(path).failures
        if failures.exists():
            for line in iter_jsonl(failures):
                ledger.record_failure(
                    rollout_key(line.row), agent_name_of(line.row), line.row[FAILURE_CLASS_KEY],
                    bool(line.row.get(FAILURE_TERMINAL_KEY)),
                )  # fmt: skip
        ledger.commit()
    return count


def _results_in_order(files: list[Path], ledger: CollectionLedger) -> Iterator[bytes]:
    handles = [path.open("rb") for path in files]
    try:
        for file_index, offset in ledger.positions_in_order():
            handle = handles[file_index]
            handle.seek(offset)
            yield handle.readline().strip() + b"\n"
    finally:
        for handle in handles:
            handle.close()


async def aggregate_shards(overrides: list[str]) -> int:
    """`gym eval aggregate`: results of every shard, by (task, rollout), through `/aggregate_metrics`."""
    cfg = parse_global_config_dict(overrides)
    config = command_settings(ShardAggregationConfig, cfg)
    configure_http_client_from(cfg)
    files = shard_files(config.input_glob)
    paths = CollectionPaths.for_output(config.output_jsonl_fpath)
    if config.merge_shards and paths.output.resolve() in files:
        raise ConfigError(
            f"output_jsonl_fpath {paths.output} is one of the shards; write the merge elsewhere"
        )
    try:
        server_client = ServerClient.load_from_global_config(head_server_config_from(cfg))
    except ValueError as error:
        raise ConfigError(str(error)) from error
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    ledger = CollectionLedger()
    try:
        count = _load_shards(files, ledger)
        if config.merge_shards:
            write_atomically(paths.output, _results_in_order(files, ledger))
        results = (orjson.loads(line) for line in _results_in_order(files, ledger))
        entries = await aggregate_results(
            results, ledger.unresolved_failure_records(), server_client, paths.aggregate_metrics
        )
    finally:
        ledger.close()
    print(f"Aggregated {count} result(s) from {len(files)} file(s).")
    for entry in entries:
        print(key_metrics_line(entry))
    if config.merge_shards:
        print(f"Merged results: {paths.output}")
    print(f"Aggregate metrics: {paths.aggregate_metrics}")
    check_after_run([paths.output] if config.merge_shards else files, paths.output.parent, config)
    return 0
