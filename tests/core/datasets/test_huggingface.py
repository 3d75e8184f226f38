"""`gym dataset upload|download --storage hf`, run as the CLI, with the real huggingface_hub client pointed
(HF_ENDPOINT) at the local hub of tests/fake_hf_hub.py."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from tests.helpers import (
    REPO_ROOT,
    StartedServer,
    files_under,
    one_line_error,
    run_gym,
    run_server,
    service_control,
)

TOKEN = "hf_dataset_tests_secret"
RESOURCE_CONFIG = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
REPO_ID = "nvidia/Nemotron-RL-agent-example_single_tool_call"
COLLECTION = "nvidia/nemo-gym-datasets-0123abcd"
ENV_YAML = "hf_organization: nvidia\nhf_collection_name: NeMo Gym  Datasets\nhf_collection_slug: 0123abcd\n"
ROWS = (
    '{"responses_create_params": {"input": "Grüße ✓"}, "expected": "日本語"}\n'
    '{"responses_create_params": {"input": "second"}, "expected": 2}\n'
).encode()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_server(["-m", "tests.fake_hf_hub", "--token", TOKEN], tmp_path_factory.mktemp("hub")) as server:
        yield server


@pytest.fixture(autouse=True)
def empty_hub(hub: StartedServer) -> None:
    service_control(hub, "POST", "/_reset")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working folder with env.yaml (organisation, collection) and the data to upload."""
    (tmp_path / "env.yaml").write_text(ENV_YAML)
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    return tmp_path


def gym(hub: StartedServer, cwd: Path, *args: str, token: str | None = TOKEN, command: str = "gym"):
    env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(cwd / ".hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if token is not None:
        env["HF_TOKEN"] = token
    return run_gym(*args, cwd=cwd, env=env, command=command, unset_prefixes=("HF_",))


def upload(hub: StartedServer, cwd: Path, *extra: str, token: str | None = TOKEN):
    resource_config = str(REPO_ROOT / RESOURCE_CONFIG)
    return gym(
        hub,
        cwd,
        "dataset",
        "upload",
        "-i",
        "data.jsonl",
        "--resource-config",
        resource_config,
        *extra,
        token=token,
    )


def stored(hub: StartedServer, repo_id: str, ref: str, path: str) -> bytes:
    response = requests.get(f"{hub.url}/_files/{repo_id}", params={"ref": ref, "path": path}, timeout=10)
    response.raise_for_status()
    return response.content


def hub_requests(hub: StartedServer) -> list[dict]:
    return service_control(hub, "GET", "/_requests")


def test_upload_creates_a_private_repo_fills_the_collection_and_downloads_back_identically(hub, project):
    result = upload(hub, project)
    assert result.returncode == 0, result.stderr
    assert TOKEN not in result.stdout + result.stderr

    state = service_control(hub, "GET", "/_state")
    assert state["repos"][REPO_ID]["private"] is True
    assert stored(hub, REPO_ID, "main", "data.jsonl") == ROWS
    assert state["repos"][REPO_ID]["refs"]["main"]["data.jsonl"]["sha256"] == hashlib.sha256(ROWS).hexdigest()
    assert state["collections"][COLLECTION] == [{"item_id": REPO_ID, "item_type": "dataset"}]
    calls = hub_requests(hub)
    assert all(call["authorization_ok"] for call in calls)
    assert [call["path"] for call in calls if call["method"] == "POST"] == [
        "/api/repos/create",
        f"/api/datasets/{REPO_ID}/preupload/main",
        f"/api/datasets/{REPO_ID}/commit/main",
        f"/api/collections/{COLLECTION}/items",
    ]

    raw = gym(hub, project, "dataset", "download", "--repo-id", REPO_ID, "--artifact", "data.jsonl",
              "--output-dir", "raw")  # fmt: skip
    assert raw.returncode == 0, raw.stderr
    assert (project / "raw" / "data.jsonl").read_bytes() == ROWS
    assert files_under(project / "raw") == {"data.jsonl"}

    split = gym(hub, project, "dataset", "download", "--repo-id", REPO_ID, "--output-dir", "splits")
    assert split.returncode == 0, split.stderr
    assert files_under(project / "splits") == {"train.jsonl"}
    assert (project / "splits" / "train.jsonl").read_bytes() == ROWS


def test_create_pr_and_revision_leave_main_alone(hub, project):
    assert upload(hub, project, "--create-pr").returncode == 0
    assert upload(hub, project, "--revision", "v1.0.0").returncode == 0
    refs = service_control(hub, "GET", "/_state")["repos"][REPO_ID]["refs"]
    assert refs["main"] == {}
    assert stored(hub, REPO_ID, "refs/pr/1", "data.jsonl") == ROWS
    assert stored(hub, REPO_ID, "v1.0.0", "data.jsonl") == ROWS
    assert f"/api/datasets/{REPO_ID}/commit/{quote('v1.0.0', safe='')}" in [
        c["path"] for c in hub_requests(hub)
    ]

    branch = gym(hub, project, "dataset", "download", "--repo-id", REPO_ID, "--revision", "v1.0.0",
                 "--split", "train", "-o", "v1.jsonl")  # fmt: skip
    assert branch.returncode == 0, branch.stderr
    assert (project / "v1.jsonl").read_bytes() == ROWS


def test_legacy_aliases_name_and_prefix(hub, project):
    result = upload(hub, project, "--name", "weather", "+hf_dataset_prefix=")
    assert result.returncode == 0, result.stderr
    assert stored(hub, "nvidia/agent-weather", "main", "data.jsonl") == ROWS

    legacy_up = gym(hub, project, "+input_jsonl_fpath=data.jsonl", f"+resource_config_path={REPO_ROOT / RESOURCE_CONFIG}",
                    "+dataset_name=legacy", command="ng_upload_dataset_to_hf")  # fmt: skip
    assert legacy_up.returncode == 0, legacy_up.stderr
    legacy_down = gym(hub, project, "+repo_id=nvidia/Nemotron-RL-agent-legacy", "+artifact_fpath=data.jsonl",
                      "+output_fpath=legacy/copy.jsonl", command="ng_download_dataset_from_hf")  # fmt: skip
    assert legacy_down.returncode == 0, legacy_down.stderr
    assert (project / "legacy" / "copy.jsonl").read_bytes() == ROWS


def test_missing_token_names_the_variable_and_the_key(hub, project):
    message = one_line_error(upload(hub, project, token=None))
    assert "HF_TOKEN" in message and "hf_token" in message
    assert hub_requests(hub) == []


def test_wrong_token_is_one_line_and_never_echoed(hub, project):
    message = one_line_error(upload(hub, project, token="hf_wrong_secret_value"))
    assert "401" in message and "HF_TOKEN" in message and "hf_wrong_secret_value" not in message


def test_train_split_needs_run_requests_and_json_on_every_line(hub, project):
    (project / "data.jsonl").write_bytes(ROWS + b'{"question": "no params"}\n')
    message = one_line_error(upload(hub, project))
    assert message.startswith("Error: data.jsonl:3: a train split needs `responses_create_params`")
    assert upload(hub, project, "--split", "test").returncode == 0

    (project / "data.jsonl").write_bytes(ROWS + b"not json\n")
    assert "data.jsonl:3: not valid JSON" in one_line_error(upload(hub, project, "--split", "test"))


@pytest.mark.parametrize(
    "artifact", ["../escape.jsonl", "/tmp/escape.jsonl", "a/../../escape.jsonl", "link/x.jsonl"]
)
def test_artifact_names_cannot_leave_the_output_folder(hub, project, artifact):
    outside = project / "outside"
    outside.mkdir()
    (project / "out").mkdir()
    (project / "out" / "link").symlink_to(outside)
    before = files_under(project)
    result = gym(hub, project, "dataset", "download", "--repo-id", REPO_ID, "--artifact", artifact,
                 "--output-dir", "out")  # fmt: skip
    assert "outside the output folder" in one_line_error(result) or "relative path" in result.stderr
    assert files_under(project) == before and not list(outside.iterdir())


@pytest.mark.parametrize(
    "listed", ["../../evil.jsonl", "data/../../../evil.jsonl", "data/../x.jsonl", "C:evil.jsonl"]
)
def test_a_listed_file_named_to_leave_the_output_folder_is_refused_in_one_line(hub, project, listed):
    for name in ("data.jsonl", listed):
        response = requests.put(f"{hub.url}/_files/{REPO_ID}", params={"path": name}, data=ROWS, timeout=10)
        response.raise_for_status()
    (project / "out").mkdir()
    before = files_under(project)
    result = gym(hub, project, "dataset", "download", "--repo-id", REPO_ID, "--output-dir", "out")
    message = one_line_error(result)
    assert f"{REPO_ID}: listed file '{listed}': must be a relative path inside the dataset" in message
    assert {name for name in files_under(project) - before if not name.startswith(".hf-home")} == set()
    assert not any(call["path"].startswith("/datasets/") for call in hub_requests(hub))


def test_interrupted_upload_stores_nothing_and_leaves_no_local_file(hub, project):
    service_control(hub, "POST", "/_faults", {"drop_commit": True})
    before = files_under(project)
    message = one_line_error(upload(hub, project))
    assert REPO_ID in message and "failed" in message
    assert service_control(hub, "GET", "/_state")["repos"][REPO_ID]["refs"]["main"] == {}
    assert {name for name in files_under(project) - before if not name.startswith(".hf-home")} == set()
    assert (project / "data.jsonl").read_bytes() == ROWS


def test_interrupted_download_leaves_neither_a_partial_file_nor_scratch(hub, project):
    assert upload(hub, project).returncode == 0
    service_control(hub, "POST", "/_faults", {"truncate_download": True})
    args = ("dataset", "download", "--repo-id", REPO_ID, "--artifact", "data.jsonl", "--output-dir", "out")
    one_line_error(gym(hub, project, *args))
    assert files_under(project / "out") == set()


def test_collate_downloads_a_missing_split_from_its_hub_source(hub, project):
    assert upload(hub, project).returncode == 0
    (project / "train.yaml").write_text(
        "policy_model:\n  responses_api_models:\n    replay_model: {entrypoint: app.py}\n"
        "trainer:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        "      resources_server: {type: resources_servers, name: example_single_tool_call}\n"
        "      model_server: {type: responses_api_models, name: policy_model}\n"
        "      datasets:\n        - {name: weather, type: train, license: MIT, jsonl_fpath: fetched/train.jsonl,\n"
        f"           huggingface_identifier: {{repo_id: {REPO_ID}}},\n"
        "           gitlab_identifier: {dataset_name: weather, version: 1.0.0, artifact_fpath: data.jsonl}}\n"
    )
    args = ("dataset", "collate", "--config", "train.yaml", "--config", str(REPO_ROOT / RESOURCE_CONFIG),
            "--output-dir", "out", "--download")  # fmt: skip
    assert "+data_source=gitlab|huggingface" in one_line_error(gym(hub, project, *args))
    result = gym(hub, project, *args, "--data-source", "huggingface")
    assert result.returncode == 0, result.stderr
    assert (project / "fetched" / "train.jsonl").read_bytes() == ROWS
    assert len((project / "out" / "train.jsonl").read_text().splitlines()) == 2
