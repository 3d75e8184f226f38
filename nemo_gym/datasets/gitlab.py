"""Datasets in a GitLab project's generic package registry: `gym dataset upload|download|rm --storage gitlab`.

A dataset is a generic package: its name is the dataset name, its version is `x.y.z`, and its files are
the uploaded JSONL files under their base names. The project is named by `gitlab_url` and
`gitlab_project` (a numeric id or a `group/project` path) in env.yaml or as overrides; the token comes
from GITLAB_TOKEN or `gitlab_token`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig
from pydantic import BaseModel, Field, model_validator

from nemo_gym.config.cli_models import (
    DeleteJsonlDatasetGitlabConfig,
    DownloadJsonlDatasetGitlabConfig,
    UploadJsonlDatasetGitlabConfig,
)
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import write_atomically
from nemo_gym.config.settings import command_settings, secret_setting
from nemo_gym.datasets.files import (
    StorageError,
    artifact_destination,
    checked_artifact_name,
    checked_upload_file,
)

if TYPE_CHECKING:
    from gitlab.v4.objects import Project

TOKEN_KEY = "gitlab_token"
TOKEN_ENV = "GITLAB_TOKEN"
VERSION_PATTERN = re.compile(r"\d+\.\d+\.\d+")
PACKAGE_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]*")
TIMEOUT_S = 60.0
"""Per request, with no automatic retry: an upload streams its file, so a cut upload is rerun whole."""
CHUNK_BYTES = 1 << 20


class GitlabProjectSettings(BaseModel):
    """Which GitLab project holds the datasets."""

    gitlab_url: str = Field(description="base URL of the GitLab instance, e.g. https://gitlab.example.com")
    gitlab_project: int | str = Field(description="project id or group/project path")


class GitlabDownloadSettings(DownloadJsonlDatasetGitlabConfig):
    """Download one file of a dataset version from the GitLab package registry."""

    output_fpath: str | None = Field(default=None, description="file to write (or use output_dirpath)")
    output_dirpath: str | None = Field(default=None, description="folder to write the artifact into")

    @model_validator(mode="after")
    def _one_output(self) -> GitlabDownloadSettings:
        if (self.output_dirpath is None) == (self.output_fpath is None):
            raise ValueError("set exactly one of output_fpath (-o) and output_dirpath (--output-dir)")
        return self


class DatasetRemovalSettings(DeleteJsonlDatasetGitlabConfig):
    """Delete every version of a dataset from the GitLab package registry."""

    yes: bool = Field(default=False, description="delete without asking for confirmation")


def upload(cfg: DictConfig) -> int:
    settings = command_settings(UploadJsonlDatasetGitlabConfig, cfg)
    _check_package_name(settings.dataset_name)
    if not VERSION_PATTERN.fullmatch(settings.version):
        raise ConfigError(
            f"version '{settings.version}': must look like 1.0.0 (x.y.z); set it with --revision"
        )
    path = checked_upload_file(settings.input_jsonl_fpath, "input_jsonl_fpath", require_run_requests=False)
    project, where = _project(cfg)
    with _reported_as_one_line(where), path.open("rb") as file:
        project.generic_packages.upload(
            package_name=settings.dataset_name,
            package_version=settings.version,
            file_name=path.name,
            data=file,
        )
    print(f"Uploaded {path.name} to {where} as {settings.dataset_name} {settings.version}.")
    return 0


def download(cfg: DictConfig) -> int:
    settings = command_settings(GitlabDownloadSettings, cfg)
    target = (
        Path(settings.output_fpath).expanduser()
        if settings.output_fpath
        else artifact_destination(settings.artifact_fpath, settings.output_dirpath)
    )
    download_package_file(cfg, settings.dataset_name, settings.version, settings.artifact_fpath, target)
    print(f"Downloaded {settings.dataset_name} {settings.version}/{settings.artifact_fpath} to {target}.")
    return 0


def download_package_file(cfg: DictConfig, name: str, version: str, artifact: str, target: Path) -> None:
    """Stream one package file into `target`, renamed into place only once complete."""
    _check_package_name(name)
    file_name = _package_file_name(artifact)
    project, where = _project(cfg)
    with _reported_as_one_line(f"{where}, {name} {version}/{file_name}"):
        chunks = project.generic_packages.download(
            package_name=name,
            package_version=version,
            file_name=file_name,
            streamed=True,
            iterator=True,
            chunk_size=CHUNK_BYTES,
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(target, chunks)


def remove(cfg: DictConfig) -> int:
    settings = command_settings(DatasetRemovalSettings, cfg)
    delete_packages(cfg, settings.dataset_name, confirmed=settings.yes)
    return 0


def delete_packages(cfg: DictConfig, dataset_name: str, confirmed: bool) -> None:
    """Delete every version of `dataset_name`, after a y/N question unless `confirmed`."""
    _check_package_name(dataset_name)
    project, where = _project(cfg)
    with _reported_as_one_line(where):
        listed = project.packages.list(package_name=dataset_name, package_type="generic", get_all=True)
        packages = [package for package in listed if package.name == dataset_name]
        if not packages:
            raise StorageError(f"{where}: no dataset named '{dataset_name}' in the package registry")
        versions = ", ".join(package.version for package in packages)
        if not confirmed and not _confirmed(f"Delete {dataset_name} ({versions}) from {where}? [y/N] "):
            raise ConfigError("nothing deleted (not confirmed); pass --yes to delete without asking")
        for package in packages:
            project.packages.delete(package.id)
    print(f"Deleted {dataset_name} ({versions}) from {where}.")


def _confirmed(question: str) -> bool:
    if not sys.stdin.isatty():
        raise ConfigError("deleting needs a confirmation and stdin is not a terminal; pass --yes")
    return input(question).strip().lower() in ("y", "yes")


def _check_package_name(name: str) -> None:
    if not PACKAGE_NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"dataset_name '{name}': GitLab package names use letters, digits and . _ - + ~ only"
        )


def _package_file_name(artifact: str) -> str:
    """Package files are flat: the artifact must be a plain file name."""
    name = checked_artifact_name(artifact)
    if len(name.parts) != 1:
        raise ConfigError(f"artifact '{artifact}': GitLab package files have plain names, without folders")
    return name.name


def _project(cfg: DictConfig) -> tuple[Project, str]:
    """The project handle (no request made yet) and a printable `<url> project <id>`; never the token."""
    import gitlab

    token = secret_setting(cfg, TOKEN_KEY, TOKEN_ENV)
    if token is None:
        raise ConfigError(
            f"GitLab needs a token: set the {TOKEN_ENV} environment variable, or {TOKEN_KEY} in env.yaml "
            f"(or ++{TOKEN_KEY}=<token>)"
        )
    settings = command_settings(GitlabProjectSettings, cfg)
    client = gitlab.Gitlab(settings.gitlab_url, private_token=token, timeout=TIMEOUT_S)
    where = f"{settings.gitlab_url.rstrip('/')} project {settings.gitlab_project}"
    return client.projects.get(settings.gitlab_project, lazy=True), where


@contextmanager
def _reported_as_one_line(where: str) -> Iterator[None]:
    """python-gitlab's and requests' errors as one-line StorageErrors naming the project."""
    import requests
    from gitlab.exceptions import GitlabError

    try:
        yield
    except ConfigError:
        raise
    except GitlabError as error:
        status = error.response_code or "an error"
        hint = f"; check {TOKEN_ENV}" if status in (401, 403) else ""
        raise StorageError(f"{where}: GitLab answered {status} ({error.error_message}){hint}") from error
    except requests.ConnectionError as error:
        raise StorageError(f"{where}: connection failed or cut ({type(error).__name__})") from error
    except (requests.RequestException, OSError) as error:
        raise StorageError(f"{where}: transfer failed ({str(error).splitlines()[0][:300]})") from error
