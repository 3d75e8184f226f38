"""Dataset entries of a config: licenses, repeats, where the data comes from (`source` and the deprecated
identifiers it replaces), and the benchmark entry."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym.config.datasets import (
    BenchmarkDatasetConfig,
    DatasetConfig,
    Domain,
    GitlabDatasetSource,
    HuggingFaceDatasetSource,
    JsonlDatasetGitlabIdentifer,
)

GITLAB = {"dataset_name": "weather", "version": "0.0.1", "artifact_fpath": "train.jsonl"}


def test_domain_values() -> None:
    assert [domain.value for domain in Domain] == [
        "math",
        "coding",
        "agent",
        "knowledge",
        "instruction_following",
        "long_context",
        "safety",
        "games",
        "translation",
        "e2e",
        "rlhf",
        "other",
    ]


@pytest.mark.parametrize("dataset_type", ["train", "validation"])
def test_train_and_validation_datasets_need_a_license(dataset_type: str) -> None:
    with pytest.raises(ValidationError, match="`license` is required"):
        DatasetConfig(name="d", type=dataset_type, jsonl_fpath="d.jsonl")
    assert DatasetConfig(name="d", type=dataset_type, jsonl_fpath="d.jsonl", license="MIT").license == "MIT"


def test_example_dataset_needs_no_license_and_unknown_licenses_are_rejected() -> None:
    assert DatasetConfig(name="d", type="example", jsonl_fpath="d.jsonl").num_repeats == 1
    with pytest.raises(ValidationError, match="license"):
        DatasetConfig(name="d", type="example", jsonl_fpath="d.jsonl", license="WTFPL")
    with pytest.raises(ValidationError, match="num_repeats"):
        DatasetConfig(name="d", type="example", jsonl_fpath="d.jsonl", num_repeats=0)


def test_source_and_a_legacy_identifier_together_are_rejected() -> None:
    with pytest.raises(ValidationError, match="either `source` or the deprecated"):
        DatasetConfig(
            name="d",
            type="example",
            jsonl_fpath="d.jsonl",
            source={"type": "huggingface", "repo_id": "org/d"},
            gitlab_identifier=GITLAB,
        )


def test_a_single_legacy_identifier_is_deprecated_and_copied_into_source() -> None:
    with pytest.warns(DeprecationWarning, match="deprecated"):
        dataset = DatasetConfig(name="d", type="example", jsonl_fpath="d.jsonl", gitlab_identifier=GITLAB)
    assert dataset.source == GitlabDatasetSource(**GITLAB)


def test_both_legacy_identifiers_may_coexist_without_a_source() -> None:
    with pytest.warns(DeprecationWarning):
        dataset = DatasetConfig(
            name="d",
            type="example",
            jsonl_fpath="d.jsonl",
            gitlab_identifier=GITLAB,
            huggingface_identifier={"repo_id": "org/d"},
        )
    assert dataset.source is None and dataset.gitlab_identifier and dataset.huggingface_identifier


def test_source_is_mirrored_into_the_legacy_field_and_a_dump_validates_again() -> None:
    dataset = DatasetConfig(
        name="d", type="example", jsonl_fpath="d.jsonl", source={"type": "huggingface", "repo_id": "org/d"}
    )
    assert isinstance(dataset.source, HuggingFaceDatasetSource)
    assert dataset.huggingface_identifier.repo_id == "org/d"
    assert DatasetConfig.model_validate(dataset.model_dump()) == dataset


def test_gitlab_source_is_mirrored_into_gitlab_identifier() -> None:
    dataset = DatasetConfig(
        name="d", type="example", jsonl_fpath="d.jsonl", source={"type": "gitlab", **GITLAB}
    )
    assert dataset.gitlab_identifier == JsonlDatasetGitlabIdentifer(**GITLAB)


def test_benchmark_dataset_prompt_config_defaults_to_none_as_in_nemo_gym_0_7() -> None:
    fields = {"name": "aime", "type": "benchmark", "jsonl_fpath": "a.jsonl", "prepare_script": "prepare.py"}
    assert BenchmarkDatasetConfig(**fields).prompt_config is None
    assert str(BenchmarkDatasetConfig(**fields, prompt_config="p.yaml").prompt_config) == "p.yaml"
