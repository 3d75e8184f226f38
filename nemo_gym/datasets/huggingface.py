"""Datasets on the Hugging Face hub: `gym dataset upload|download --storage hf`.

An upload goes to a private dataset repo named `<org>/<prefix>-<domain>-<name>` (the domain comes from
the resources server's config, the name defaults to that server's folder), keeps the file's base name,
and adds the repo to the organisation's collection. A download fetches one raw file, or the JSONL files of
a split concatenated byte for byte (no round trip through a table library, so rows come back exactly as
uploaded). `HF_ENDPOINT` points the client at another hub.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from nemo_gym.config import server_kinds
from nemo_gym.config.cli_models import (
    DownloadJsonlDatasetHuggingFaceConfig,
    UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
)
from nemo_gym.config.discovery import find_server_instances
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import write_atomically
from nemo_gym.config.server_instances import ResourcesServerInstanceConfig
from nemo_gym.config.settings import command_settings, locate_data_file, secret_setting
from nemo_gym.datasets.files import (
    StorageError,
    artifact_destination,
    checked_artifact_name,
    checked_upload_file,
    scratch_beside,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi

TOKEN_KEY = "hf_token"
TOKEN_ENV = "HF_TOKEN"
REPO_TYPE = "dataset"
STALL_TIMEOUT_S = 60.0
"""No byte moving for this long fails the request (the library's own default is to wait forever)."""
SPLIT_KEYWORDS: dict[str, tuple[str, ...]] = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing", "eval", "evaluation"),
}
CHUNK_BYTES = 1 << 20


def upload(cfg: DictConfig) -> int:
    """Check the file, create the private repo (and branch), upload, add the repo to the collection."""
    token = secret_setting(cfg, TOKEN_KEY, TOKEN_ENV)
    if token is None:
        raise ConfigError(_missing_token_message("uploading to the Hugging Face hub"))
    settings = command_settings(UploadJsonlDatasetHuggingFaceMaybeDeleteConfig, cfg, {TOKEN_KEY: token})
    path = checked_upload_file(
        settings.input_jsonl_fpath, "input_jsonl_fpath", require_run_requests=settings.split == "train"
    )
    dataset_name = settings.dataset_name or _resources_server_folder(settings.resource_config_path)
    repo_id = dataset_repo_id(settings, dataset_name)
    collection_slug = collection_slug_of(settings)
    api = _hub_client(token)
    with _reported_as_one_line(repo_id):
        api.create_repo(repo_id, repo_type=REPO_TYPE, private=True, exist_ok=True)
        if settings.revision and not settings.create_pr:
            api.create_branch(repo_id, repo_type=REPO_TYPE, branch=settings.revision, exist_ok=True)
        commit = api.upload_file(
            path_or_fileobj=str(path),
            path_in_repo=path.name,
            repo_id=repo_id,
            repo_type=REPO_TYPE,
            revision=settings.revision,
            create_pr=settings.create_pr,
            commit_message=settings.commit_message or f"Upload {path.name}",
            commit_description=settings.commit_description,
        )
        api.add_collection_item(collection_slug, item_id=repo_id, item_type=REPO_TYPE, exists_ok=True)
    print(f"Uploaded {path.name} to {repo_id} ({commit.pr_url or commit.commit_url}).")
    print(f"Added {repo_id} to collection {collection_slug}.")
    if settings.delete_from_gitlab:
        from nemo_gym.datasets.gitlab import delete_packages

        delete_packages(cfg, dataset_name, confirmed=True)
    return 0


def download(cfg: DictConfig) -> int:
    """One raw file (`artifact_fpath`), or split(s) written as `<split>.jsonl` / to `output_fpath`."""
    token = secret_setting(cfg, TOKEN_KEY, TOKEN_ENV)
    settings = command_settings(DownloadJsonlDatasetHuggingFaceConfig, cfg, {TOKEN_KEY: token})
    api = _hub_client(token)
    with _reported_as_one_line(settings.repo_id):
        if settings.artifact_fpath is not None:
            _download_artifact(api, settings)
        else:
            _download_splits(api, settings)
    return 0


def download_dataset_file(
    cfg: DictConfig, repo_id: str, artifact: str | None, split: str, target: Path
) -> None:
    """Fetch a configured dataset's file to `target` (for `gym dataset collate --download`): the named
    artifact, or else the JSONL files of the dataset's split."""
    api = _hub_client(secret_setting(cfg, TOKEN_KEY, TOKEN_ENV))
    with _reported_as_one_line(repo_id):
        if artifact is not None:
            checked_artifact_name(artifact)
            _fetch_to(api, repo_id, artifact, None, target)
        else:
            files = _split_files(api.list_repo_files(repo_id, repo_type=REPO_TYPE), repo_id, split)
            _concatenate_to(api, repo_id, files, None, target)


def dataset_repo_id(settings: UploadJsonlDatasetHuggingFaceMaybeDeleteConfig, dataset_name: str) -> str:
    """`<org>/<prefix>-<domain>-<name>`, leaving out empty parts and their dashes."""
    domain = _domain_of(settings.resource_config_path)
    parts = [settings.hf_dataset_prefix, domain, dataset_name]
    return f"{settings.hf_organization}/" + "-".join(part for part in parts if part)


def collection_slug_of(settings: UploadJsonlDatasetHuggingFaceMaybeDeleteConfig) -> str:
    """The hub's slug of an organisation collection: `<org>/<name, lowercased, spaces as dashes>-<id>`."""
    name = re.sub(r"\s+", "-", settings.hf_collection_name.strip().lower())
    return f"{settings.hf_organization}/{name}-{settings.hf_collection_slug}"


def _download_artifact(api: HfApi, settings: DownloadJsonlDatasetHuggingFaceConfig) -> None:
    artifact = settings.artifact_fpath
    checked_artifact_name(artifact)
    target = (
        Path(settings.output_fpath).expanduser()
        if settings.output_fpath
        else artifact_destination(artifact, settings.output_dirpath)
    )
    _fetch_to(api, settings.repo_id, artifact, settings.revision, target)
    print(f"Downloaded {settings.repo_id}/{artifact} to {target}.")


def _download_splits(api: HfApi, settings: DownloadJsonlDatasetHuggingFaceConfig) -> None:
    listed = api.list_repo_files(settings.repo_id, repo_type=REPO_TYPE, revision=settings.revision)
    splits = (
        [settings.split]
        if settings.split
        else [s for s in SPLIT_KEYWORDS if _jsonl_files_of_split(listed, s)]
    )
    if not splits:
        raise StorageError(f"{settings.repo_id}: no JSONL data files found (files: {', '.join(listed)})")
    for split in splits:
        files = _split_files(listed, settings.repo_id, split)
        target = Path(settings.output_fpath or Path(settings.output_dirpath) / f"{split}.jsonl").expanduser()
        _concatenate_to(api, settings.repo_id, files, settings.revision, target)
        print(f"Downloaded split '{split}' of {settings.repo_id} ({len(files)} file(s)) to {target}.")


def _fetch_to(api: HfApi, repo_id: str, artifact: str, revision: str | None, target: Path) -> None:
    """Download into a scratch folder beside `target`, then rename: `target` is whole or untouched."""
    with scratch_beside(target) as scratch:
        downloaded = api.hf_hub_download(
            repo_id, artifact, repo_type=REPO_TYPE, revision=revision, local_dir=scratch
        )
        os.replace(downloaded, target)


def _concatenate_to(api: HfApi, repo_id: str, files: list[str], revision: str | None, target: Path) -> None:
    with scratch_beside(target) as scratch:
        downloaded = [
            Path(
                api.hf_hub_download(repo_id, name, repo_type=REPO_TYPE, revision=revision, local_dir=scratch)
            )
            for name in files
        ]
        write_atomically(target, _joined_lines(downloaded))


def _joined_lines(paths: list[Path]) -> Iterator[bytes]:
    """The files' bytes in order, with a newline added where a file does not end with one."""
    for path in paths:
        last = b"\n"
        with path.open("rb") as file:
            while chunk := file.read(CHUNK_BYTES):
                last = chunk[-1:]
                yield chunk
        if last != b"\n":
            yield b"\n"


def _split_of(path: str) -> str | None:
    """The split a data file belongs to by the hub's naming convention (`train.jsonl`, `data/test-0.jsonl`,
    `validation/part.jsonl`), or None when its name carries no split word."""
    words = re.split(r"[/._\- 0-9]+", path.lower())
    return next((split for split, keywords in SPLIT_KEYWORDS.items() if set(keywords) & set(words)), None)


def _jsonl_files_of_split(listed: list[str], split: str) -> list[str]:
    """A repo whose JSONL names carry no split word holds only a train split, as on the hub."""
    jsonl = sorted(name for name in listed if name.endswith(".jsonl"))
    if not any(_split_of(name) for name in jsonl):
        return jsonl if split == "train" else []
    return [name for name in jsonl if _split_of(name) == split]


def _split_files(listed: list[str], repo_id: str, split: str) -> list[str]:
    """The split's files, each name checked before any is fetched: a hostile or broken hub can list
    `../x.jsonl`."""
    files = _jsonl_files_of_split(listed, split)
    if not files:
        other = [name for name in listed if _split_of(name) == split]
        stored = f" (stored as {', '.join(other)}; only JSONL splits can be downloaded)" if other else ""
        raise StorageError(
            f"{repo_id}: no JSONL files for split '{split}'{stored}; download a raw file with --artifact"
        )
    for name in files:
        checked_artifact_name(name, f"{repo_id}: listed file")
    return files


def _resources_server_folder(resource_config_path: str) -> str:
    parts = Path(resource_config_path).parts
    if server_kinds.RESOURCES.key not in parts[:-1]:
        raise ConfigError(
            f"resource_config_path '{resource_config_path}' is not under resources_servers/<name>/; "
            "name the dataset with --name"
        )
    return parts[parts.index(server_kinds.RESOURCES.key) + 1]


def _domain_of(resource_config_path: str) -> str | None:
    """The `domain` of the resources server defined in `resource_config_path`."""
    path = locate_data_file(resource_config_path, "resource_config_path")
    try:
        instances = find_server_instances(OmegaConf.load(path))
    except Exception as error:
        raise ConfigError(f"resource_config_path '{path}': {error}") from error
    for instance in instances:
        if isinstance(instance, ResourcesServerInstanceConfig):
            domain = instance.get_inner_run_server_config().domain
            return domain.value if domain is not None else None
    raise ConfigError(f"resource_config_path '{path}': defines no resources server")


def _missing_token_message(purpose: str) -> str:
    return (
        f"{purpose} needs a token: set the {TOKEN_ENV} environment variable, or {TOKEN_KEY} in env.yaml "
        f"(or ++{TOKEN_KEY}=<token>)"
    )


def _hub_client(token: str | None) -> HfApi:
    """The real hub client, its shared HTTP session bounded by STALL_TIMEOUT_S. The library's own log lines
    (each resume attempt of a cut download, say) are silenced: a failure is reported once, on one line."""
    import httpx2
    from huggingface_hub import HfApi, get_session
    from huggingface_hub.utils import logging as hub_logging

    hub_logging.set_verbosity_error()
    get_session().timeout = httpx2.Timeout(STALL_TIMEOUT_S)
    return HfApi(token=token)


@contextmanager
def _reported_as_one_line(repo_id: str) -> Iterator[None]:
    """The hub client's errors as one-line StorageErrors naming the repo and what went wrong."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    try:
        yield
    except ConfigError:
        raise
    except RepositoryNotFoundError as error:
        raise StorageError(
            f"{repo_id}: repository not found on {endpoint} (or the token cannot see it)"
        ) from error
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "an error"
        hint = f"; check {TOKEN_ENV}" if status in (401, 403) else ""
        raise StorageError(f"{repo_id}: the hub answered {status} ({_first_line(error)}){hint}") from error
    except (httpx2.HTTPError, OSError) as error:
        raise StorageError(f"{repo_id}: transfer with {endpoint} failed ({_first_line(error)})") from error


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
