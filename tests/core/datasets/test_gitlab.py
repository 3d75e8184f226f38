"""`gym dataset upload|download|rm --storage gitlab`, run as the CLI, with the real python-gitlab client
against the local GitLab package registry of tests/fake_gitlab.py."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import (
    REPO_ROOT,
    StartedServer,
    files_under,
    one_line_error,
    run_gym,
    run_server,
    service_control,
)

TOKEN = "glpat-dataset-tests"
PROJECT = "42"
ROWS = (
    '{"responses_create_params": {"input": "Grüße aus Köln ✓"}, "expected": "日本語"}\n'
    '{"responses_create_params": {"input": "second"}, "expected": 2}\n'
).encode()


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    args = ["-m", "tests.fake_gitlab", "--token", TOKEN, "--project", PROJECT]
    with run_server(args, tmp_path_factory.mktemp("gitlab")) as server:
        yield server


@pytest.fixture(autouse=True)
def empty_registry(registry: StartedServer) -> None:
    service_control(registry, "POST", "/_reset")


def gym(
    registry: StartedServer, cwd: Path, *args: str, token: str | None = TOKEN, command: str = "gym"
) -> subprocess.CompletedProcess:
    where = [f"+gitlab_url={registry.url}", f"+gitlab_project={PROJECT}"]
    env = {"GITLAB_TOKEN": token} if token is not None else {}
    return run_gym(*args, *where, cwd=cwd, env=env, command=command, unset_prefixes=("GITLAB_TOKEN",))


def test_upload_then_download_returns_identical_bytes(registry, tmp_path):
    source = tmp_path / "weather.jsonl"
    source.write_bytes(ROWS)
    up = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "weather.jsonl",
             "--name", "weather", "--revision", "1.2.3")  # fmt: skip
    assert up.returncode == 0, up.stderr
    [package] = service_control(registry, "GET", "/_state")["packages"]
    assert (package["name"], package["version"]) == ("weather", "1.2.3")
    assert package["files"]["weather.jsonl"]["sha256"] == hashlib.sha256(ROWS).hexdigest()
    [put] = service_control(registry, "GET", "/_requests")
    assert put["method"] == "PUT" and put["token_ok"]
    assert put["path"] == f"/api/v4/projects/{PROJECT}/packages/generic/weather/1.2.3/weather.jsonl"
    assert TOKEN not in up.stdout + up.stderr

    down = gym(registry, tmp_path, "dataset", "download", "--storage", "gitlab", "--name", "weather",
               "--revision", "1.2.3", "--artifact", "weather.jsonl", "--output-dir", "out")  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "out" / "weather.jsonl").read_bytes() == ROWS
    assert files_under(tmp_path / "out") == {"weather.jsonl"}


def test_legacy_aliases_take_plain_overrides(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    up = gym(registry, tmp_path, "+dataset_name=legacy", "+version=0.0.1", "+input_jsonl_fpath=data.jsonl",
             command="ng_upload_dataset_to_gitlab")  # fmt: skip
    assert up.returncode == 0, up.stderr
    down = gym(registry, tmp_path, "+dataset_name=legacy", "+version=0.0.1", "+artifact_fpath=data.jsonl",
               "+output_fpath=copy/data.jsonl", command="ng_download_dataset_from_gitlab")  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "copy" / "data.jsonl").read_bytes() == ROWS


def test_missing_token_names_the_variable_and_the_key(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    result = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                 "--name", "x", "--revision", "1.0.0", token=None)  # fmt: skip
    message = one_line_error(result)
    assert "GITLAB_TOKEN" in message and "gitlab_token" in message
    assert service_control(registry, "GET", "/_requests") == []


def test_wrong_token_is_one_line_and_never_echoed(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    result = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                 "--name", "x", "--revision", "1.0.0", token="glpat-wrong-secret")  # fmt: skip
    message = one_line_error(result)
    assert "401" in message and "GITLAB_TOKEN" in message and "glpat-wrong-secret" not in message


def test_malformed_line_is_named_and_nothing_is_uploaded(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS + b'{"broken": \n')
    result = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                 "--name", "x", "--revision", "1.0.0")  # fmt: skip
    assert "Error: data.jsonl:3: not valid JSON" in one_line_error(result)
    assert service_control(registry, "GET", "/_requests") == []


def test_bad_version_is_refused_before_any_request(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    result = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                 "--name", "x", "--revision", "1.0")  # fmt: skip
    assert "must look like 1.0.0" in one_line_error(result)
    assert service_control(registry, "GET", "/_requests") == []


@pytest.mark.parametrize("artifact", ["../escape.jsonl", "/tmp/escape.jsonl", "sub/../../escape.jsonl"])
def test_artifact_names_cannot_leave_the_output_folder(registry, tmp_path, artifact):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    result = gym(registry, tmp_path, "dataset", "download", "--storage", "gitlab", "--name", "x",
                 "--revision", "1.0.0", "--artifact", artifact, "--output-dir", "out")  # fmt: skip
    assert "must be a relative path inside the dataset" in one_line_error(result)
    assert files_under(tmp_path) == {"data.jsonl"}
    assert service_control(registry, "GET", "/_requests") == []


def test_interrupted_upload_stores_nothing_and_leaves_no_local_file(registry, tmp_path):
    big = ROWS * 20_000  # ~2 MB, so the fake cuts the connection mid-body
    (tmp_path / "data.jsonl").write_bytes(big)
    service_control(registry, "POST", "/_faults", {"drop_upload": True})
    result = gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                 "--name", "cut", "--revision", "1.0.0")  # fmt: skip
    assert "connection failed or cut" in one_line_error(result)
    assert service_control(registry, "GET", "/_state")["packages"] == []
    assert files_under(tmp_path) == {"data.jsonl"}
    assert (tmp_path / "data.jsonl").read_bytes() == big


def test_interrupted_download_leaves_neither_a_partial_file_nor_scratch(registry, tmp_path):
    big = ROWS * 20_000
    (tmp_path / "data.jsonl").write_bytes(big)
    assert gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
               "--name", "big", "--revision", "1.0.0").returncode == 0  # fmt: skip
    service_control(registry, "POST", "/_faults", {"truncate_download": True})
    args = ("dataset", "download", "--storage", "gitlab", "--name", "big", "--revision", "1.0.0",
            "--artifact", "data.jsonl", "--output-dir", "out")  # fmt: skip
    one_line_error(gym(registry, tmp_path, *args))
    assert files_under(tmp_path / "out") == set()

    assert gym(registry, tmp_path, *args).returncode == 0
    assert (tmp_path / "out" / "data.jsonl").read_bytes() == big


def test_rm_asks_first_and_deletes_every_version_with_yes(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    for version in ("1.0.0", "1.1.0"):
        assert gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
                   "--name", "old", "--revision", version).returncode == 0  # fmt: skip
    assert gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
               "--name", "older", "--revision", "1.0.0").returncode == 0  # fmt: skip

    refused = gym(registry, tmp_path, "dataset", "rm", "--name", "old")
    assert "pass --yes" in one_line_error(refused)
    assert len(service_control(registry, "GET", "/_state")["packages"]) == 3

    deleted = gym(registry, tmp_path, "dataset", "rm", "--name", "old", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert "1.0.0, 1.1.0" in deleted.stdout
    assert [package["name"] for package in service_control(registry, "GET", "/_state")["packages"]] == [
        "older"
    ]

    missing = gym(registry, tmp_path, "dataset", "rm", "--name", "old", "--yes")
    assert "no dataset named 'old'" in one_line_error(missing)


def test_collate_downloads_a_missing_dataset_from_its_gitlab_source(registry, tmp_path):
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    assert gym(registry, tmp_path, "dataset", "upload", "--storage", "gitlab", "-i", "data.jsonl",
               "--name", "weather", "--revision", "2.0.0").returncode == 0  # fmt: skip
    (tmp_path / "train.yaml").write_text(
        "policy_model:\n  responses_api_models:\n    replay_model: {entrypoint: app.py}\n"
        "trainer:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        "      resources_server: {type: resources_servers, name: example_single_tool_call}\n"
        "      model_server: {type: responses_api_models, name: policy_model}\n"
        "      datasets:\n        - {name: weather, type: train, license: MIT, jsonl_fpath: fetched/weather.jsonl,\n"
        "           source: {type: gitlab, dataset_name: weather, version: 2.0.0, artifact_fpath: data.jsonl}}\n"
    )
    config = REPO_ROOT / "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
    result = gym(registry, tmp_path, "dataset", "collate", "--config", "train.yaml", "--config", str(config),
                 "--output-dir", "out", "--download")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fetched" / "weather.jsonl").read_bytes() == ROWS
    assert len((tmp_path / "out" / "train.jsonl").read_text().splitlines()) == 2
