"""The argument models of the dataset commands and the exporters: what each refuses, its defaults, its help."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym.config.cli_models import (
    DownloadJsonlDatasetHuggingFaceConfig,
    MLFlowConfig,
    UploadJsonlDatasetGitlabConfig,
    UploadJsonlDatasetHuggingFaceConfig,
    UploadJsonlDatasetHuggingFaceMaybeDeleteConfig,
    WANDBConfig,
)

HF_UPLOAD = {
    "hf_token": "hf_x",
    "hf_organization": "org",
    "hf_collection_name": "Gym",
    "hf_collection_slug": "abc",
    "input_jsonl_fpath": "data/train.jsonl",
    "resource_config_path": "resources_servers/x/configs/x.yaml",
}


def test_cli_models_ignore_unrelated_keys_of_the_global_config() -> None:
    config = UploadJsonlDatasetGitlabConfig.model_validate(
        {"dataset_name": "d", "version": "0.0.1", "input_jsonl_fpath": "x.jsonl", "policy_model_name": "m"}
    )
    assert config.dataset_name == "d"


def test_help_prints_the_docstring_and_fields_then_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        UploadJsonlDatasetGitlabConfig.model_validate({"help": True})
    assert exit_info.value.code == 0
    printed = capsys.readouterr().out
    assert "Upload a JSONL dataset to the GitLab" in printed
    assert "dataset_name" in printed and "input_jsonl_fpath" in printed


def test_hugging_face_upload_defaults_and_the_forbidden_delete_choice() -> None:
    config = UploadJsonlDatasetHuggingFaceMaybeDeleteConfig.model_validate(HF_UPLOAD)
    assert (config.hf_dataset_prefix, config.split, config.create_pr, config.delete_from_gitlab) == (
        "Nemotron-RL",
        "train",
        False,
        False,
    )
    with pytest.raises(ValidationError, match="delete_from_gitlab"):
        UploadJsonlDatasetHuggingFaceConfig.model_validate({**HF_UPLOAD, "delete_from_gitlab": False})


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"repo_id": "o/d"}, "exactly one of output_dirpath and output_fpath"),
        ({"repo_id": "o/d", "output_dirpath": "a", "output_fpath": "b"}, "exactly one of"),
        ({"repo_id": "o/d", "output_dirpath": "a", "artifact_fpath": "x", "split": "train"}, "not both"),
        ({"repo_id": "o/d", "output_fpath": "a.jsonl"}, "needs a split"),
    ],
)
def test_hugging_face_download_argument_rules(fields: dict, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        DownloadJsonlDatasetHuggingFaceConfig.model_validate(fields)


def test_hugging_face_download_valid_combinations() -> None:
    assert DownloadJsonlDatasetHuggingFaceConfig(repo_id="o/d", output_fpath="t.jsonl", split="train")
    assert DownloadJsonlDatasetHuggingFaceConfig(repo_id="o/d", output_dirpath="out")


def test_wandb_config_is_available_only_with_every_real_value() -> None:
    assert WANDBConfig(wandb_project="p", wandb_name="n", wandb_api_key="k").is_available
    assert not WANDBConfig(wandb_project="p", wandb_name="n").is_available
    assert not WANDBConfig(wandb_project="p", wandb_name="n", wandb_api_key="****").is_available


def test_mlflow_config_needs_uri_experiment_and_run_and_no_masked_token() -> None:
    complete = {"mlflow_tracking_uri": "file:///m", "mlflow_experiment_name": "e", "mlflow_run_name": "r"}
    assert MLFlowConfig(**complete).is_available
    assert MLFlowConfig(**complete, mlflow_tracking_token="t").is_available
    assert not MLFlowConfig(**complete, mlflow_tracking_token="****").is_available
    assert not MLFlowConfig(**{**complete, "mlflow_run_name": None}).is_available
    assert "secret-token" not in repr(MLFlowConfig(**complete, mlflow_tracking_token="secret-token"))
