"""The fake GitLab package registry serves the real, unmodified python-gitlab client, and fails on demand."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import gitlab
import pytest
import requests
from gitlab.v4.objects import Project

from tests.helpers import StartedServer, run_server, service_control

TOKEN = "glpat-fake-registry"
PROJECT_ID, PROJECT_PATH = "42", "group/datasets"
JSONL = '{"prompt": "Grüße aus Köln ✓", "answer": "日本語 — ok"}\n'.encode() * 50


@pytest.fixture(scope="module")
def fake_gitlab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    args = ["-m", "tests.fake_gitlab", "--token", TOKEN, "--project", PROJECT_ID]
    with run_server(
        [*args, "--project-path", PROJECT_PATH], tmp_path_factory.mktemp("fake_gitlab")
    ) as server:
        yield server


@pytest.fixture(autouse=True)
def clean_registry(fake_gitlab: StartedServer) -> None:
    service_control(fake_gitlab, "POST", "/_reset")


def project_of(server: StartedServer, ref: str = PROJECT_ID, token: str = TOKEN) -> Project:
    return gitlab.Gitlab(server.url, private_token=token, timeout=10).projects.get(ref, lazy=True)


def upload(
    project: Project, tmp_path: Path, name: str, data: bytes = b"{}\n", version: str = "1.0.0"
) -> None:
    source = tmp_path / f"{name}-{version}.jsonl"
    source.write_bytes(data)
    project.generic_packages.upload(
        package_name=name, package_version=version, file_name="data.jsonl", path=source
    )


def download(project: Project, name: str, version: str = "1.0.0", file_name: str = "data.jsonl") -> bytes:
    chunks = project.generic_packages.download(
        package_name=name, package_version=version, file_name=file_name, streamed=True, iterator=True
    )
    return b"".join(chunks)


@pytest.mark.parametrize("ref", [PROJECT_ID, PROJECT_PATH])
@pytest.mark.parametrize("data", [JSONL, os.urandom(2 * 1024 * 1024)], ids=["non-ascii-jsonl", "2mb-binary"])
def test_upload_then_download_is_byte_identical(fake_gitlab, tmp_path, ref, data):
    project = project_of(fake_gitlab, ref)
    upload(project, tmp_path, "my-dataset", data)

    assert download(project, "my-dataset") == data
    (package,) = service_control(fake_gitlab, "GET", "/_state")["packages"]
    digest = hashlib.sha256(data).hexdigest()
    assert package["files"] == {"data.jsonl": {"size": len(data), "sha256": digest}}
    (package_file,) = project.packages.get(package["id"], lazy=True).package_files.list(get_all=True)
    assert (package_file.file_name, package_file.size, package_file.file_sha256) == (
        "data.jsonl",
        len(data),
        digest,
    )
    put = service_control(fake_gitlab, "GET", "/_requests")[0]
    encoded_ref = "group%2Fdatasets" if ref == PROJECT_PATH else PROJECT_ID
    assert put == {
        "method": "PUT",
        "path": f"/api/v4/projects/{encoded_ref}/packages/generic/my-dataset/1.0.0/data.jsonl",
        "query": {},
        "token_ok": True,
        "body_size": len(data),
    }


def test_a_package_holds_several_files_and_versions_are_separate_packages(fake_gitlab, tmp_path):
    project = project_of(fake_gitlab)
    upload(project, tmp_path, "ds", b"v1")
    upload(project, tmp_path, "ds", b"v2", version="2.0.0")
    project.generic_packages.upload(
        package_name="ds", package_version="1.0.0", file_name="extra.txt", data=b"more"
    )

    assert (download(project, "ds"), download(project, "ds", "2.0.0")) == (b"v1", b"v2")
    assert download(project, "ds", file_name="extra.txt") == b"more"
    packages = service_control(fake_gitlab, "GET", "/_state")["packages"]
    assert [(p["version"], sorted(p["files"])) for p in packages] == [
        ("1.0.0", ["data.jsonl", "extra.txt"]),
        ("2.0.0", ["data.jsonl"]),
    ]


def test_list_filters_by_name_substring_and_follows_pagination(fake_gitlab, tmp_path):
    project = project_of(fake_gitlab, PROJECT_PATH)
    for index in range(7):
        upload(project, tmp_path, f"team-Dataset-{index}")
    upload(project, tmp_path, "unrelated")

    listed = project.packages.list(package_name="dataset", package_type="generic", get_all=True, per_page=2)

    assert [p.name for p in listed] == [f"team-Dataset-{index}" for index in range(7)]
    first = listed[0].attributes
    assert {key: first[key] for key in ("name", "version", "package_type", "status")} == {
        "name": "team-Dataset-0",
        "version": "1.0.0",
        "package_type": "generic",
        "status": "default",
    }
    assert isinstance(first["id"], int) and first["created_at"]
    list_requests = [r for r in service_control(fake_gitlab, "GET", "/_requests") if r["method"] == "GET"]
    assert [r["query"].get("page", "1") for r in list_requests] == ["1", "2", "3", "4"]
    assert {r["path"] for r in list_requests} == {"/api/v4/projects/group%2Fdatasets/packages"}

    page = requests.get(
        f"{fake_gitlab.url}/api/v4/projects/{PROJECT_ID}/packages",
        params={"package_name": "dataset", "per_page": 3, "page": 2},
        headers={"PRIVATE-TOKEN": TOKEN},
        timeout=10,
    )
    assert {
        h: page.headers[h] for h in ("X-Page", "X-Next-Page", "X-Prev-Page", "X-Total", "X-Total-Pages")
    } == {
        "X-Page": "2",
        "X-Next-Page": "3",
        "X-Prev-Page": "1",
        "X-Total": "7",
        "X-Total-Pages": "3",
    }
    assert set(page.links) == {"first", "last", "next", "prev"}
    assert project.packages.list(package_name="dataset", package_type="npm", get_all=True) == []


def test_delete_removes_the_package(fake_gitlab, tmp_path):
    project = project_of(fake_gitlab)
    upload(project, tmp_path, "doomed")
    upload(project, tmp_path, "kept")
    (doomed,) = project.packages.list(package_name="doomed", get_all=True)

    project.packages.delete(doomed.id)

    assert [p["name"] for p in service_control(fake_gitlab, "GET", "/_state")["packages"]] == ["kept"]
    assert project.packages.list(package_name="doomed", get_all=True) == []
    with pytest.raises(gitlab.exceptions.GitlabGetError) as missing:
        download(project, "doomed")
    assert missing.value.response_code == 404
    with pytest.raises(gitlab.exceptions.GitlabDeleteError) as again:
        project.packages.delete(doomed.id)
    assert again.value.response_code == 404


def test_a_bad_token_is_rejected_and_recorded(fake_gitlab, tmp_path):
    intruder = project_of(fake_gitlab, token="glpat-wrong")

    with pytest.raises(gitlab.exceptions.GitlabAuthenticationError) as rejected:
        upload(intruder, tmp_path, "sneaky")
    with pytest.raises(gitlab.exceptions.GitlabAuthenticationError):
        intruder.packages.list(get_all=True)

    assert rejected.value.response_code == 401
    assert rejected.value.error_message == "401 Unauthorized"
    assert [r["token_ok"] for r in service_control(fake_gitlab, "GET", "/_requests")] == [False, False]
    assert service_control(fake_gitlab, "GET", "/_state") == {"packages": []}


def test_an_unknown_project_is_not_found(fake_gitlab, tmp_path):
    with pytest.raises(gitlab.exceptions.GitlabUploadError) as missing:
        upload(project_of(fake_gitlab, "group/other"), tmp_path, "ds")
    assert (missing.value.response_code, missing.value.error_message) == (404, "404 Project Not Found")


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "1.0.0-rc1", "latest"])
def test_an_invalid_version_is_rejected(fake_gitlab, tmp_path, version):
    with pytest.raises(gitlab.exceptions.GitlabUploadError) as rejected:
        upload(project_of(fake_gitlab), tmp_path, "ds", version=version)
    assert rejected.value.response_code == 400
    assert "package_version" in rejected.value.error_message
    assert service_control(fake_gitlab, "GET", "/_state") == {"packages": []}


def test_a_dropped_upload_raises_and_stores_nothing(fake_gitlab, tmp_path):
    project = project_of(fake_gitlab)
    service_control(fake_gitlab, "POST", "/_faults", {"drop_upload": True})

    with pytest.raises(requests.exceptions.ConnectionError):
        upload(project, tmp_path, "ds", os.urandom(2 * 1024 * 1024))

    assert service_control(fake_gitlab, "GET", "/_state") == {"packages": []}
    (dropped,) = service_control(fake_gitlab, "GET", "/_requests")
    assert 0 < dropped["body_size"] < 2 * 1024 * 1024
    upload(project, tmp_path, "ds", b"second try")  # the fault fired once
    assert download(project, "ds") == b"second try"


def test_a_truncated_download_raises_while_iterating(fake_gitlab, tmp_path):
    project = project_of(fake_gitlab)
    data = os.urandom(256 * 1024)
    upload(project, tmp_path, "ds", data)
    service_control(fake_gitlab, "POST", "/_faults", {"truncate_download": True})

    chunks = project.generic_packages.download(
        package_name="ds", package_version="1.0.0", file_name="data.jsonl", streamed=True, iterator=True
    )
    received = bytearray()
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for chunk in chunks:
            received += chunk

    assert 0 < len(received) < len(data) and data.startswith(received)
    assert download(project, "ds") == data  # the fault fired once
