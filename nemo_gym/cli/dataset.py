"""`gym dataset collate|upload|download|rm`: flags on top of overrides, and the choice of store.

`--storage hf|gitlab` picks the store (Hugging Face by default; `rm` is GitLab only). Every other flag is a
shorthand for a `++key=value` override, so env.yaml can hold the settings that rarely change
(`hf_organization`, `gitlab_url`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from nemo_gym.cli.flags import FlagSet
from nemo_gym.config_types import BaseNeMoGymCLIConfig, ConfigError

STORAGES = ("hf", "gitlab")
SUBCOMMANDS = ("collate", "upload", "download", "rm")

COLLATE_FLAGS = FlagSet(
    command="gym dataset collate",
    values={"--mode": "mode", "--output-dir": "output_dirpath", "--data-source": "data_source"},
    switches={
        "--download": "should_download",
        "--overwrite-metrics-conflicts": "overwrite_metrics_conflicts",
    },
    lists={"--config": "config_paths"},
)
UPLOAD_FLAGS = FlagSet(
    command="gym dataset upload",
    values={
        "-i": "input_jsonl_fpath",
        "--input": "input_jsonl_fpath",
        "--name": "dataset_name",
        "--revision": ("version", "revision"),
        "--split": "split",
        "--resource-config": "resource_config_path",
    },
    switches={"--create-pr": "create_pr", "--delete-from-gitlab": "delete_from_gitlab"},
)
DOWNLOAD_FLAGS = FlagSet(
    command="gym dataset download",
    values={
        "--repo-id": "repo_id",
        "--artifact": "artifact_fpath",
        "-o": "output_fpath",
        "--output": "output_fpath",
        "--output-dir": "output_dirpath",
        "--split": "split",
        "--name": "dataset_name",
        "--revision": ("version", "revision"),
    },
)
RM_FLAGS = FlagSet(command="gym dataset rm", values={"--name": "dataset_name"}, switches={"--yes": "yes"})
FLAGS = {"collate": COLLATE_FLAGS, "upload": UPLOAD_FLAGS, "download": DOWNLOAD_FLAGS, "rm": RM_FLAGS}
STORE_NOTES = {
    "hf": "Hub: HF_ENDPOINT (default https://huggingface.co); token: HF_TOKEN or hf_token.",
    "gitlab": "Project: gitlab_url and gitlab_project (env.yaml or overrides); token: GITLAB_TOKEN or "
    "gitlab_token.",
}


def run(args: Sequence[str]) -> int:
    subcommand, storage, rest = _parsed(args)
    overrides = FLAGS[subcommand].to_overrides(rest)
    if subcommand == "collate":
        from nemo_gym.dataset_collation import run_collate

        return run_collate(overrides)
    from nemo_gym.global_config import parse_global_config_dict

    return _handler(subcommand, storage)(parse_global_config_dict(overrides))


def help_text(args: Sequence[str]) -> str:
    subcommand, storage, _ = _parsed([arg for arg in args if arg not in ("-h", "--help")])
    settings = _settings_model(subcommand, storage)
    store = "" if subcommand == "collate" else f" [--storage {'|'.join(STORAGES)}]"
    note = "" if subcommand == "collate" else f"\n\n{STORE_NOTES[storage]}"
    return (
        f"usage: gym dataset {subcommand}{store} [flags] [+key=value ...]\n\n"
        + settings.help_text()
        + note
        + "\n\nFlags (each is shorthand for an override):\n"
        + "\n".join(FLAGS[subcommand].help_lines())
    )


def _parsed(args: Sequence[str]) -> tuple[str, str, list[str]]:
    """The subcommand, the store (`--storage`, default hf; always gitlab for rm), the remaining args."""
    if not args or args[0] not in SUBCOMMANDS:
        raise ConfigError(f"usage: gym dataset {'|'.join(SUBCOMMANDS)} [--storage hf|gitlab] [flags]")
    subcommand, rest = args[0], list(args[1:])
    storage = "gitlab" if subcommand == "rm" else "hf"
    for index, arg in enumerate(rest):
        flag, has_value, value = arg.partition("=")
        if flag == "--storage":
            if not has_value:
                value = rest[index + 1] if index + 1 < len(rest) else ""
            del rest[index : index + (1 if has_value else 2)]
            storage = value
            break
    if storage not in STORAGES or (subcommand == "rm" and storage != "gitlab"):
        allowed = "gitlab" if subcommand == "rm" else " or ".join(STORAGES)
        raise ConfigError(f"gym dataset {subcommand}: --storage must be {allowed}, got '{storage}'")
    return subcommand, storage, rest


def _handler(subcommand: str, storage: str) -> Callable[[DictConfig], int]:
    if storage == "hf":
        from nemo_gym import hf_datasets

        return {"upload": hf_datasets.upload, "download": hf_datasets.download}[subcommand]
    from nemo_gym import gitlab_datasets

    return {
        "upload": gitlab_datasets.upload,
        "download": gitlab_datasets.download,
        "rm": gitlab_datasets.remove,
    }[subcommand]


def _settings_model(subcommand: str, storage: str) -> type[BaseNeMoGymCLIConfig]:
    if subcommand == "collate":
        from nemo_gym.dataset_collation import CollationSettings

        return CollationSettings
    if storage == "hf":
        from nemo_gym.config_types import (
            DownloadJsonlDatasetHuggingFaceConfig,
            UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
        )

        return {
            "upload": UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
            "download": DownloadJsonlDatasetHuggingFaceConfig,
        }[subcommand]
    from nemo_gym.config_types import UploadJsonlDatasetGitlabConfig
    from nemo_gym.gitlab_datasets import DatasetRemovalSettings, GitlabDownloadSettings

    return {
        "upload": UploadJsonlDatasetGitlabConfig,
        "download": GitlabDownloadSettings,
        "rm": DatasetRemovalSettings,
    }[subcommand]
