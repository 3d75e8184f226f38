"""Argument models of the commands that read their arguments from the merged config (`+key=value`).

A command validates the whole config against its model, so unrelated keys are ignored; each model can
print its own help."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym.text.redaction import MASKED_VALUE


def _help_requested(data: Any) -> bool:
    if isinstance(data, Mapping) and (data.get("h") or data.get("help")):
        return True
    return any(arg in ("-h", "--help") for arg in sys.argv[1:])


class BaseNeMoGymCLIConfig(BaseModel):
    """Arguments of a command, validated from the whole global config (so unrelated keys are ignored).

    `+h=true`, `+help=true`, `-h` or `--help` prints the class docstring and its fields, then exits.
    Numbers are accepted for text fields: the override parser reads `--revision 1.0` as a float.
    """

    model_config = ConfigDict(coerce_numbers_to_str=True)

    @model_validator(mode="before")
    @classmethod
    def _print_help_and_exit_when_asked(cls, data: Any) -> Any:
        if _help_requested(data):
            print(cls.help_text())
            raise SystemExit(0)
        return data

    @classmethod
    def help_text(cls, summary: str | None = None, defaults: dict[str, str] | None = None) -> str:
        """The docstring (or `summary`) followed by one line per field: name, type, default (or required;
        `defaults` says what a command puts in place of a required field it fills itself), description."""
        lines = [inspect.cleandoc(summary or cls.__doc__ or cls.__name__), "", "Fields:"]
        for field_name, field in cls.model_fields.items():
            default = (
                f"default: {(defaults or {})[field_name]}"
                if field_name in (defaults or {})
                else "required"
                if field.is_required()
                else f"default: {field.get_default(call_default_factory=True)!r}"
            )
            type_name = getattr(field.annotation, "__name__", None) or str(field.annotation)
            description = f"  {field.description}" if field.description else ""
            lines.append(f"  {field_name} ({type_name}, {default}){description}")
        return "\n".join(lines)


class UploadJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Upload a JSONL dataset to the GitLab package registry."""

    dataset_name: str
    version: str = Field(description='version of the dataset, "x.x.x"')
    input_jsonl_fpath: str


class DownloadJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Download a JSONL dataset artifact from the GitLab package registry."""

    dataset_name: str
    version: str = Field(description='version of the dataset, "x.x.x"')
    artifact_fpath: str
    output_fpath: str


class DeleteJsonlDatasetGitlabConfig(BaseNeMoGymCLIConfig):
    """Delete a dataset from the GitLab package registry."""

    dataset_name: str


class BaseUploadJsonlDatasetHuggingFaceConfig(BaseNeMoGymCLIConfig):
    """Upload a JSONL dataset to the Hugging Face hub and add it to a collection."""

    hf_token: str = Field(repr=False)
    hf_organization: str
    hf_collection_name: str
    hf_collection_slug: str
    dataset_name: str | None = Field(default=None, description="defaults to the resources server's dir name")
    input_jsonl_fpath: str
    resource_config_path: str
    hf_dataset_prefix: str = "Nemotron-RL"
    split: Literal["train", "validation", "test"] = "train"
    create_pr: bool = False
    revision: str | None = None
    commit_message: str | None = None
    commit_description: str | None = None


class UploadJsonlDatasetHuggingFaceConfig(BaseUploadJsonlDatasetHuggingFaceConfig):
    """Upload a JSONL dataset to the Hugging Face hub, then delete it from GitLab (always)."""

    @model_validator(mode="before")
    @classmethod
    def _forbid_delete_choice(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "delete_from_gitlab" in data:
            raise ValueError(
                "delete_from_gitlab cannot be set for this command: it always deletes from GitLab"
            )
        return data


class UploadJsonlDatasetHuggingFaceMaybeDeleteConfig(BaseUploadJsonlDatasetHuggingFaceConfig):
    """Upload a JSONL dataset to the Hugging Face hub, optionally deleting it from GitLab."""

    delete_from_gitlab: bool = False


class DownloadJsonlDatasetHuggingFaceConfig(BaseNeMoGymCLIConfig):
    """Download a dataset from the Hugging Face hub: one raw file (`artifact_fpath`) or split(s) as JSONL."""

    repo_id: str
    artifact_fpath: str | None = None
    output_dirpath: str | None = None
    output_fpath: str | None = None
    hf_token: str | None = Field(default=None, repr=False)
    split: Literal["train", "validation", "test"] | None = None
    revision: str | None = Field(default=None, description="branch, tag or commit (default: main)")

    @model_validator(mode="after")
    def _check_output_and_selection(self) -> DownloadJsonlDatasetHuggingFaceConfig:
        if (self.output_dirpath is None) == (self.output_fpath is None):
            raise ValueError("set exactly one of output_dirpath and output_fpath")
        if self.artifact_fpath is not None and self.split is not None:
            raise ValueError("set artifact_fpath or split, not both")
        if self.output_fpath is not None and self.artifact_fpath is None and self.split is None:
            raise ValueError("output_fpath without artifact_fpath needs a split (one file holds one split)")
        return self


class UploadRolloutsConfigMixin(BaseModel):
    """For a command that exports (collect, reverify): whether the configured exporters get a rollouts
    table. `upload_rollouts_to_wandb` is NeMo Gym's older name of the same switch."""

    upload_rollouts_to_wandb: bool = Field(default=True, description="old name of upload_rollouts")
    upload_rollouts: bool | None = Field(
        default=None, description="with an exporter (W&B, MLflow) configured: a rollouts table (default true)"
    )

    @property
    def uploads_rollouts(self) -> bool:
        return self.upload_rollouts if self.upload_rollouts is not None else self.upload_rollouts_to_wandb


class ExporterConfig(BaseModel):
    """The top-level keys of one exporter (W&B, MLflow); it is opened only when they make it available."""

    @property
    def is_available(self) -> bool:
        raise NotImplementedError


class WANDBConfig(ExporterConfig):
    """Weights & Biases logging of the (secret-hidden) config; available only when every key is set."""

    wandb_project: str | None = None
    wandb_name: str | None = None
    wandb_api_key: str | None = Field(default=None, repr=False)

    @property
    def is_available(self) -> bool:
        """A masked key ("****") is not a usable key, so it does not activate logging."""
        return bool(self.wandb_project and self.wandb_name and self.wandb_api_key) and (
            self.wandb_api_key != MASKED_VALUE
        )


class MLFlowConfig(ExporterConfig):
    """MLflow logging of a run; the token is optional (a local file store needs none) but, when given,
    must be a real one: a masked "****" read back from a shown config does not count."""

    mlflow_tracking_uri: str | None = None
    mlflow_tracking_token: str | None = Field(default=None, repr=False)
    mlflow_experiment_name: str | None = None
    mlflow_run_name: str | None = None

    @property
    def is_available(self) -> bool:
        return bool(self.mlflow_tracking_uri and self.mlflow_experiment_name and self.mlflow_run_name) and (
            self.mlflow_tracking_token != MASKED_VALUE
        )
