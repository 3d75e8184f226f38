"""`gym dataset collate|upload|download|rm|migrate|render`: flags on top of overrides, and the choice of store.

`--storage hf|gitlab` picks the store (Hugging Face by default; `rm` is GitLab only). `migrate` moves a
dataset from GitLab to Hugging Face (an upload to the Hub that deletes the GitLab copy afterwards);
`render` applies a prompt config to a JSONL file. Every other flag is a shorthand for a `++key=value`
override, so env.yaml can hold the settings that rarely change (`hf_organization`, `gitlab_url`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from omegaconf import DictConfig

from nemo_gym.cli.flags import CONFIG, RESOURCES_SERVER, SEARCH_DIR, Invocation, switch, value
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError

STORAGES = ("hf", "gitlab")
STORAGE = value("--storage", choices=STORAGES, help="hf (Hugging Face, the default) or gitlab")

COLLATE_FLAGS = (
    CONFIG,
    RESOURCES_SERVER,
    SEARCH_DIR,
    value("--mode", key="mode", choices=("train_preparation", "example_validation"), help="which types"),
    value("--output-dir", key="output_dirpath", metavar="DIR", help="where <type>.jsonl is written"),
    value("--data-source", key="data_source", choices=("gitlab", "huggingface"), help="when both exist"),
    switch("--download", key="should_download", help="fetch missing files from their source"),
    switch("--overwrite-metrics-conflicts", key="overwrite_metrics_conflicts", help="replace differing metrics"),
)  # fmt: skip
UPLOAD_FLAGS = (
    STORAGE,
    value("-i", "--input", key="input_jsonl_fpath", metavar="FILE", help="the JSONL file to upload"),
    value("--name", key="dataset_name", help="dataset name (default: the resources server folder)"),
    value("--revision", key=("version", "revision"), help="version (GitLab, x.y.z) / branch (HF)"),
    value("--split", key="split", choices=("train", "validation", "test"), help="HF split"),
    value("--resource-config", key="resource_config_path", metavar="FILE", help="its resources server config"),
    switch("--create-pr", key="create_pr", help="HF: open a pull request instead of committing"),
    switch("--delete-from-gitlab", key="delete_from_gitlab", help="HF: remove the GitLab copy afterwards"),
)  # fmt: skip
DOWNLOAD_FLAGS = (
    STORAGE,
    value("--repo-id", key="repo_id", help="HF dataset repository <org>/<name>"),
    value("--artifact", key="artifact_fpath", metavar="PATH", help="the file inside the dataset"),
    value("-o", "--output", key="output_fpath", metavar="FILE", help="where the file goes"),
    value("--output-dir", key="output_dirpath", metavar="DIR", help="HF: where split files go"),
    value("--split", key="split", help="HF split to download"),
    value("--name", key="dataset_name", help="GitLab package name"),
    value("--revision", key=("version", "revision"), help="version (GitLab) / branch (HF)"),
)  # fmt: skip
RM_FLAGS = (
    STORAGE,
    value("--name", key="dataset_name", help="GitLab package name"),
    switch("--yes", key="yes", help="do not ask before deleting"),
)
MIGRATE_FLAGS = tuple(flag for flag in UPLOAD_FLAGS if flag.dest not in ("storage", "delete_from_gitlab"))
RENDER_FLAGS = (
    value("-i", "--input", key="input_jsonl_fpath", metavar="FILE", help="rows without responses_create_params.input"),
    value("--prompt-config", key="prompt_config", metavar="FILE", help="the prompt YAML (user, optionally system)"),
    value("-o", "--output", key="output_jsonl_fpath", metavar="FILE", help="where the rendered rows go"),
    SEARCH_DIR,
)  # fmt: skip
FLAGS = {
    "collate": COLLATE_FLAGS,
    "upload": UPLOAD_FLAGS,
    "download": DOWNLOAD_FLAGS,
    "rm": RM_FLAGS,
    "migrate": MIGRATE_FLAGS,
    "render": RENDER_FLAGS,
}
STORE_NOTES = {
    "hf": "Hub: HF_ENDPOINT (default https://huggingface.co); token: HF_TOKEN or hf_token.",
    "gitlab": "Project: gitlab_url and gitlab_project (env.yaml or overrides); token: GITLAB_TOKEN or "
    "gitlab_token.",
}


def run(subcommand: str, invocation: Invocation) -> int:
    if subcommand == "collate":
        from nemo_gym.datasets.collation import run_collate

        return run_collate(invocation.overrides)
    from nemo_gym.config.global_config import parse_global_config_dict

    if subcommand == "render":
        return _render(parse_global_config_dict(invocation.overrides))
    if subcommand == "migrate":
        from nemo_gym.datasets import huggingface as hf_datasets

        return hf_datasets.upload(
            parse_global_config_dict([*invocation.overrides, "++delete_from_gitlab=true"])
        )
    storage = _storage(subcommand, invocation.options.get("storage"))
    return _handler(subcommand, storage)(parse_global_config_dict(invocation.overrides))


def _render(cfg: DictConfig) -> int:
    from nemo_gym.config.settings import command_settings
    from nemo_gym.datasets.prompts import MaterializePromptsConfig, materialize_prompts

    settings = command_settings(MaterializePromptsConfig, cfg)
    try:
        materialize_prompts(settings.input_jsonl_fpath, settings.prompt_config, settings.output_jsonl_fpath)
    except (KeyError, ValueError) as error:  # a row the templates cannot fill: nothing was written
        raise ConfigError(f"{settings.input_jsonl_fpath}: {error.args[0]}") from None
    print(
        f"Rendered {settings.input_jsonl_fpath} with {settings.prompt_config} -> {settings.output_jsonl_fpath}"
    )
    return 0


def help_text(subcommand: str, args: Sequence[str]) -> str:
    """The settings of the chosen store (`--storage` among `args`), of collation, or of rendering."""
    if subcommand in ("collate", "render"):
        return _settings_model(subcommand, "hf").help_text()
    if subcommand == "migrate":
        return f"{_settings_model('upload', 'hf').help_text()}\n\n{STORE_NOTES['hf']} {STORE_NOTES['gitlab']}"
    storage = _storage(subcommand, _storage_in(args))
    return f"{_settings_model(subcommand, storage).help_text()}\n\n{STORE_NOTES[storage]}"


def _storage_in(args: Sequence[str]) -> str | None:
    for index, arg in enumerate(args):
        flag, has_value, given = arg.partition("=")
        if flag == "--storage":
            return given if has_value else (args[index + 1] if index + 1 < len(args) else None)
    return None


def _storage(subcommand: str, given: str | None) -> str:
    """The store: hf by default; `rm` exists for GitLab only."""
    storage = given or ("gitlab" if subcommand == "rm" else "hf")
    if subcommand == "rm" and storage != "gitlab":
        raise ConfigError(f"gym dataset rm: --storage must be gitlab, got '{storage}'")
    if storage not in STORAGES:
        raise ConfigError(f"gym dataset {subcommand}: --storage must be hf or gitlab, got '{storage}'")
    return storage


def _handler(subcommand: str, storage: str) -> Callable[[DictConfig], int]:
    if storage == "hf":
        from nemo_gym.datasets import huggingface as hf_datasets

        return {"upload": hf_datasets.upload, "download": hf_datasets.download}[subcommand]
    from nemo_gym.datasets import gitlab as gitlab_datasets

    return {
        "upload": gitlab_datasets.upload,
        "download": gitlab_datasets.download,
        "rm": gitlab_datasets.remove,
    }[subcommand]


def _settings_model(subcommand: str, storage: str) -> type[BaseNeMoGymCLIConfig]:
    if subcommand == "collate":
        from nemo_gym.datasets.collation import CollationSettings

        return CollationSettings
    if subcommand == "render":
        from nemo_gym.datasets.prompts import MaterializePromptsConfig

        return MaterializePromptsConfig
    if storage == "hf":
        from nemo_gym.config.cli_models import (
            DownloadJsonlDatasetHuggingFaceConfig,
            UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
        )

        return {
            "upload": UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
            "download": DownloadJsonlDatasetHuggingFaceConfig,
        }[subcommand]
    from nemo_gym.config.cli_models import UploadJsonlDatasetGitlabConfig
    from nemo_gym.datasets.gitlab import DatasetRemovalSettings, GitlabDownloadSettings

    return {
        "upload": UploadJsonlDatasetGitlabConfig,
        "download": GitlabDownloadSettings,
        "rm": DatasetRemovalSettings,
    }[subcommand]
