"""Local-file rules shared by the dataset stores (Hugging Face, GitLab).

An upload checks the whole file before anything leaves the machine, so a bad line is reported as
file:line instead of landing in a remote repository. A download lands in a scratch file beside its target
and is renamed into place only once complete, so an interrupted transfer leaves nothing half-written, and
a remote file name can never place a file outside the chosen output folder.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath, PureWindowsPath

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import iter_jsonl

RUN_REQUEST_KEY = "responses_create_params"


class StorageError(ConfigError):
    """A dataset store refused or failed a request; reported on one line like a config mistake."""


def checked_upload_file(path_text: str, key: str, require_run_requests: bool) -> Path:
    """The file to upload, after every line parsed as a JSON object (and, for training data, a run request)."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ConfigError(f"{key}: file '{path}' not found")
    lines = 0
    for line in iter_jsonl(path):
        lines += 1
        if require_run_requests and not isinstance(line.row.get(RUN_REQUEST_KEY), dict):
            raise ConfigError(
                f"{path}:{line.number}: a train split needs `{RUN_REQUEST_KEY}` on every line; add it, or "
                "upload with --split validation|test"
            )
    if lines == 0:
        raise ConfigError(f"{path}: the file has no JSONL rows; nothing to upload")
    return path


def checked_artifact_name(artifact: str, label: str = "artifact") -> PurePosixPath:
    """A file name inside a remote dataset (named by the user, or listed by the store: `label` says which),
    refused if it could point outside a local output folder, on this system or on Windows."""
    name = PurePosixPath(artifact.replace("\\", "/"))
    if not artifact or ".." in name.parts or any(PureWindowsPath(part).anchor for part in name.parts):
        raise ConfigError(
            f"{label} '{artifact}': must be a relative path inside the dataset, without '..' or a drive "
            "(files are written under the output folder)"
        )
    return name


def artifact_destination(artifact: str, output_dirpath: str) -> Path:
    """Where a downloaded artifact goes under `output_dirpath`; symlinks cannot lead it elsewhere."""
    folder = Path(output_dirpath).expanduser().resolve()
    target = (folder / checked_artifact_name(artifact)).resolve()
    if not target.is_relative_to(folder):
        raise ConfigError(f"artifact '{artifact}': resolves to {target}, outside the output folder {folder}")
    return target


@contextmanager
def scratch_beside(target: Path) -> Iterator[Path]:
    """A private scratch folder in `target`'s folder (same file system, so a finished download is renamed
    into place), removed afterwards whatever happened."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".gym-download-") as scratch:
        yield Path(scratch)
