"""`gym eval export --format atif`: a results file's rollouts as ATIF trajectories, and reading them back.

The export writes one `<task>-<rollout>.json` per rollout (`nemo_gym.collection.atif_mapping` says what goes where) and
`manifest.jsonl`, one line per file with its indices and SHA-256, into a directory that must not exist yet.
Everything is written into a temporary sibling first and renamed at the end, so a refused or interrupted
export leaves nothing behind; every row that cannot be exported is named in one error, not just the first.

`read_manifest` is the way back for `gym eval reverify --input-format atif`: each listed file, checked
against its hash, becomes the stored rollout it came from.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError, field_validator

from nemo_gym.collection.atif_mapping import UnmappableRollout, stored_rollout_of, trajectory_of
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import (
    FAILURE_CLASS_KEY,
    ROLLOUT_INDEX_KEY,
    TASK_INDEX_KEY,
    iter_jsonl,
    rollout_key,
)
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.wire.atif_v1_7 import AtifTrajectory

MANIFEST_NAME = "manifest.jsonl"
SHA256_KEY = "expected_sha256"
PATH_KEY = "trajectory_path"


class ExportAtifConfig(BaseNeMoGymCLIConfig):
    """Write a results file's rollouts as ATIF-v1.7 trajectories plus a manifest; needs no servers."""

    format: Literal["atif"] = Field(description="the export format (only atif)")
    rollouts_jsonl_fpath: str = Field(description="the results file of gym eval run / gym collect")
    output_dirpath: str = Field(description="the directory to create (must not exist)")
    session_id: str = Field(
        description="the ATIF session_id of every trajectory (each is told apart by trajectory_id)"
    )
    agent_version: str = Field(description="the ATIF agent.version (agent.name is the rollout's agent)")

    @field_validator("session_id", "agent_version", mode="before")
    @classmethod
    def _non_blank(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be blank")
        return value


def run_export(overrides: Sequence[str]) -> int:
    config = command_settings(ExportAtifConfig, parse_global_config_dict(list(overrides)))
    source = locate_data_file(config.rollouts_jsonl_fpath, "rollouts_jsonl_fpath")
    target = Path(config.output_dirpath)
    if target.exists():
        raise ConfigError(f"output_dirpath: {target} already exists; name a new directory (--output-dir)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    staging.chmod(0o755)  # mkdtemp's private mode would otherwise become the output directory's
    try:
        count = _write_trajectories(source, staging, config)
        os.rename(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"Exported {count} rollout(s) as ATIF to {target} (manifest: {target / MANIFEST_NAME})")
    return 0


def _write_trajectories(source: Path, staging: Path, config: ExportAtifConfig) -> int:
    """Writes every file into `staging`; ConfigError listing every row that cannot be exported."""
    problems: list[str] = []
    manifest: list[bytes] = []
    seen: dict[tuple[int, int], int] = {}
    for line in iter_jsonl(source):
        where = f"{source}:{line.number}"
        try:
            key = rollout_key(line.row, where)
        except ConfigError as error:
            problems.append(str(error))
            continue
        if key in seen:
            problems.append(f"{where}: task {key[0]} rollout {key[1]} is already on line {seen[key]}")
            continue
        seen[key] = line.number
        if FAILURE_CLASS_KEY in line.row:
            problems.append(f"{where}: a failure record ({line.row[FAILURE_CLASS_KEY]}), not a rollout")
            continue
        try:
            trajectory = trajectory_of(line.row, config.session_id, config.agent_version)
        except (UnmappableRollout, ValidationError) as error:
            problems.append(f"{where}: {_one_line(error)}")
            continue
        if not problems:
            manifest.append(_write_one(staging, key, trajectory))
    if problems:
        raise ConfigError(
            f"{len(problems)} row(s) of {source} cannot be exported, nothing was written:\n"
            + "\n".join(problems)
        )
    (staging / MANIFEST_NAME).write_bytes(b"".join(manifest))
    return len(manifest)


def _write_one(staging: Path, key: tuple[int, int], trajectory: AtifTrajectory) -> bytes:
    """Writes one trajectory file and returns its manifest line."""
    name = f"{key[0]}-{key[1]}.json"
    data = orjson.dumps(trajectory.to_json_dict(), option=orjson.OPT_INDENT_2)
    (staging / name).write_bytes(data)
    entry = {
        SHA256_KEY: hashlib.sha256(data).hexdigest(),
        ROLLOUT_INDEX_KEY: key[1],
        TASK_INDEX_KEY: key[0],
        PATH_KEY: name,
    }
    return orjson.dumps(entry, option=orjson.OPT_SORT_KEYS) + b"\n"


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def read_manifest(manifest: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The stored rollouts an export's manifest lists (paths relative to the manifest), each file checked
    against its hash and the schema; ConfigError naming every line that fails."""
    rollouts, problems = [], []
    for line in iter_jsonl(manifest, limit):
        where = f"{manifest}:{line.number}"
        try:
            rollouts.append(_read_listed(manifest.parent, line.row))
        except (ConfigError, UnmappableRollout, ValidationError, OSError) as error:
            problems.append(f"{where}: {_one_line(error)}")
    if problems:
        raise ConfigError(
            f"{len(problems)} ATIF trajectory file(s) cannot be read back:\n" + "\n".join(problems)
        )
    return rollouts


def _read_listed(folder: Path, entry: dict[str, Any]) -> dict[str, Any]:
    key = rollout_key(entry, "the manifest line")
    name, expected = entry.get(PATH_KEY), entry.get(SHA256_KEY)
    if not isinstance(name, str) or not isinstance(expected, str):
        raise ConfigError(f"needs {PATH_KEY} and {SHA256_KEY}")
    data = (folder / name).read_bytes()
    if hashlib.sha256(data).hexdigest() != expected:
        raise ConfigError(f"{name} does not match its {SHA256_KEY}: the file changed since it was exported")
    rollout = stored_rollout_of(AtifTrajectory.model_validate_json(data))
    if (rollout[TASK_INDEX_KEY], rollout[ROLLOUT_INDEX_KEY]) != key:
        raise ConfigError(f"{name} holds task {rollout[TASK_INDEX_KEY]} rollout {rollout[ROLLOUT_INDEX_KEY]}")
    return rollout
