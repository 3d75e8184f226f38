"""The fake Hugging Face Hub serves the real, unmodified `huggingface_hub` client, and fails as told.

The client reads HF_ENDPOINT when it is imported, so every client call runs in a fresh subprocess.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.helpers import REPO_ROOT, StartedServer, run_server

TOKEN = "hf_fake_hub_test_token"
REPO = "test-org/rollouts"
CONTENT = b"".join(
    orjson.dumps({"i": i, "text": "h\u00e9llo \u2603", "pad": "x" * (i % 50)}) + b"\n" for i in range(2000)
)

CLIENT_PRELUDE = """
import json, sys
from huggingface_hub import HfApi, hf_hub_download

TOKEN, ARGS = sys.argv[1], json.loads(sys.argv[2])
REPO = ARGS["repo"]
api = HfApi(token=TOKEN)


def emit(value):
    print("RESULT " + json.dumps(value), flush=True)


def outcome(call):
    try:
        return {"raised": None, "value": call()}
    except Exception as error:
        response = getattr(error, "response", None)
        return {
            "raised": type(error).__name__,
            "classes": [cls.__name__ for cls in type(error).__mro__],
            "status": getattr(response, "status_code", None),
        }


def setup(branch=None):
    api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
    if branch:
        api.create_branch(REPO, repo_type="dataset", branch=branch, exist_ok=True)


def upload(path_in_repo="data.jsonl", **kwargs):
    kwargs.setdefault("commit_message", "Upload rollouts")
    return api.upload_file(
        path_or_fileobj=ARGS["file"], path_in_repo=path_in_repo, repo_id=REPO, repo_type="dataset", **kwargs
    )
"""


@pytest.fixture(scope="module")
def hub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("fake_hf_hub")
    with run_server(["-m", "tests.fake_hf_hub", "--token", TOKEN], workdir, cwd=REPO_ROOT) as server:
        yield server


@pytest.fixture
def hub(hub_server: StartedServer) -> StartedServer:
    control(hub_server, "POST", "/_reset", {})
    return hub_server


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_bytes(CONTENT)
    return path


def control(hub: StartedServer, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    with urllib.request.urlopen(urllib.request.Request(hub.url + path, data, method=method), timeout=10) as r:
        raw = r.read()
    return orjson.loads(raw) if r.headers.get("Content-Type", "").startswith("application/json") else raw


def stored(hub: StartedServer, ref: str = "main", path: str = "data.jsonl") -> bytes | None:
    query = urllib.parse.urlencode({"ref": ref, "path": path})
    try:
        return control(hub, "GET", f"/_files/{REPO}?{query}")
    except urllib.error.HTTPError as error:
        assert error.code == 404
        return None


def run_client(hub: StartedServer, tmp_path: Path, code: str, **args: Any) -> dict[str, Any]:
    """Run CLIENT_PRELUDE + `code` against the fake and return what it passed to `emit`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    env |= {"HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp_path / "hf_home")}
    script = CLIENT_PRELUDE + textwrap.dedent(code)
    argv = [sys.executable, "-c", script, TOKEN, orjson.dumps({"repo": REPO, **args}).decode()]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"client failed:\n{done.stderr}\nserver log:\n{hub.log()[-3000:]}"
    results = [line[len("RESULT ") :] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 1, done.stdout
    return orjson.loads(results[0])


def test_private_repo_upload_is_stored_byte_identical(hub: StartedServer, tmp_path: Path, data_file: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        first = api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
        again = api.create_repo(REPO, repo_type="dataset", private=True, exist_ok=True)
        info = upload(commit_message="Add rollouts", commit_description="2000 rows")
        emit({"urls": [first, again, first.repo_id, first.repo_type], "commit_url": info.commit_url,
              "oid": info.oid, "pr_url": info.pr_url, "repo_id": info.repo_url.repo_id})
        """,
        file=str(data_file),
    )
    assert result["urls"] == [f"{hub.url}/datasets/{REPO}"] * 2 + [REPO, "dataset"]
    assert result["commit_url"] == f"{hub.url}/datasets/{REPO}/commit/{result['oid']}"
    assert len(result["oid"]) == 40 and result["pr_url"] is None and result["repo_id"] == REPO
    assert stored(hub) == CONTENT
    repo = control(hub, "GET", "/_state")["repos"][REPO]
    digest = hashlib.sha256(CONTENT).hexdigest()
    assert repo == {
        "private": True,
        "refs": {"main": {"data.jsonl": {"size": len(CONTENT), "sha256": digest}}},
    }
    requests = control(hub, "GET", "/_requests")
    assert [(r["method"], r["path"]) for r in requests] == [
        ("POST", "/api/repos/create"),
        ("POST", "/api/repos/create"),
        ("POST", f"/api/datasets/{REPO}/preupload/main"),
        ("POST", f"/api/datasets/{REPO}/commit/main"),
    ]
    assert all(r["authorization_ok"] for r in requests)
    assert requests[-1]["body_size"] > len(CONTENT)  # the content travels base64-encoded in the NDJSON body


def test_create_pr_stores_the_file_on_a_pr_ref_not_main(hub: StartedServer, tmp_path: Path, data_file: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup()
        infos = [upload(create_pr=True), upload(path_in_repo="more.jsonl", create_pr=True)]
        emit([[info.pr_url, info.pr_revision, info.pr_num, info.repo_url.repo_id] for info in infos])
        """,
        file=str(data_file),
    )
    assert result == [
        [f"{hub.url}/datasets/{REPO}/discussions/1", "refs/pr/1", 1, REPO],
        [f"{hub.url}/datasets/{REPO}/discussions/2", "refs/pr/2", 2, REPO],
    ]
    refs = control(hub, "GET", "/_state")["repos"][REPO]["refs"]
    assert refs["main"] == {}
    assert list(refs["refs/pr/1"]) == ["data.jsonl"] and list(refs["refs/pr/2"]) == ["more.jsonl"]
    assert stored(hub, "refs/pr/1") == CONTENT and stored(hub, "main") is None
    commits = [r for r in control(hub, "GET", "/_requests") if "/commit/" in r["path"]]
    assert [r["query"] for r in commits] == [{"create_pr": "1"}] * 2


def test_upload_to_a_branch(hub: StartedServer, tmp_path: Path, data_file: Path):
    run_client(
        hub,
        tmp_path,
        """
        setup(branch="v1.0.0")
        api.create_branch(REPO, repo_type="dataset", branch="v1.0.0", exist_ok=True)
        emit(upload(revision="v1.0.0").commit_url)
        """,
        file=str(data_file),
    )
    assert stored(hub, "v1.0.0") == CONTENT and stored(hub, "main") is None
    assert control(hub, "GET", "/_state")["repos"][REPO]["refs"]["main"] == {}


def test_collection_item_is_recorded_once(hub: StartedServer, tmp_path: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup()
        collections = [
            api.add_collection_item(collection_slug="test-org/nightly-runs", item_id=REPO, item_type="dataset",
                                    exists_ok=True)
            for _ in range(2)
        ]
        emit([[(item.item_id, item.item_type) for item in c.items] + [c.slug] for c in collections])
        """,
    )
    assert result == [[[REPO, "dataset"], "test-org/nightly-runs"]] * 2
    state = control(hub, "GET", "/_state")
    assert state["collections"] == {"test-org/nightly-runs": [{"item_id": REPO, "item_type": "dataset"}]}


def test_hf_hub_download_is_byte_identical(hub: StartedServer, tmp_path: Path, data_file: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup(branch="v1.0.0")
        upload()
        upload(revision="v1.0.0", path_in_repo="nested/data.jsonl")
        emit([
            hf_hub_download(REPO, "data.jsonl", repo_type="dataset", token=TOKEN, local_dir=ARGS["local_dir"]),
            hf_hub_download(REPO, "nested/data.jsonl", repo_type="dataset", revision="v1.0.0", token=TOKEN,
                            local_dir=ARGS["local_dir"]),
            hf_hub_download(REPO, "data.jsonl", repo_type="dataset", revision=None, token=TOKEN),
            hf_hub_download(REPO, "nested/data.jsonl", repo_type="dataset", revision="v1.0.0", token=TOKEN),
        ])
        """,
        file=str(data_file),
        local_dir=str(tmp_path / "local"),
    )
    local_dir = tmp_path / "local"
    assert result[:2] == [str(local_dir / "data.jsonl"), str(local_dir / "nested" / "data.jsonl")]
    assert all(Path(path).read_bytes() == CONTENT for path in result)
    assert all(path.startswith(str(tmp_path / "hf_home" / "hub")) for path in result[2:])
    downloads = [r for r in control(hub, "GET", "/_requests") if "/resolve/" in r["path"]]
    # the cache is content-addressed by ETag: the last file has the same bytes as the third, so no GET
    assert [r["method"] for r in downloads] == ["HEAD", "GET"] * 3 + ["HEAD"]
    assert all(r["authorization_ok"] for r in downloads)


def test_resolve_answers_with_the_headers_the_client_needs(
    hub: StartedServer, tmp_path: Path, data_file: Path
):
    run_client(hub, tmp_path, "setup(); emit(upload().oid)", file=str(data_file))
    request = urllib.request.Request(
        f"{hub.url}/datasets/{REPO}/resolve/main/data.jsonl",
        method="HEAD",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        headers = answer.headers
    blob_sha1 = hashlib.sha1(b"blob %d\0" % len(CONTENT) + CONTENT).hexdigest()
    assert headers["ETag"] == f'"{blob_sha1}"' and headers["Content-Length"] == str(len(CONTENT))
    assert len(headers["X-Repo-Commit"]) == 40 and "X-Xet-Hash" not in headers


def test_list_repo_files(hub: StartedServer, tmp_path: Path, data_file: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup(branch="v1.0.0")
        upload()
        upload(path_in_repo="shards/part-0.jsonl")
        upload(revision="v1.0.0", path_in_repo="only-on-branch.jsonl")
        emit([sorted(api.list_repo_files(REPO, repo_type="dataset", revision=revision))
              for revision in (None, "v1.0.0")])
        """,
        file=str(data_file),
    )
    assert result == [["data.jsonl", "shards/part-0.jsonl"], ["only-on-branch.jsonl"]]


def test_wrong_token_is_refused_with_401(hub: StartedServer, tmp_path: Path, data_file: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup()
        upload()
        intruder = HfApi(token="hf_wrong")
        emit([
            outcome(lambda: intruder.create_repo("test-org/other", repo_type="dataset", exist_ok=True)),
            outcome(lambda: intruder.upload_file(path_or_fileobj=ARGS["file"], path_in_repo="evil.jsonl",
                                                 repo_id=REPO, repo_type="dataset")),
            outcome(lambda: hf_hub_download(REPO, "data.jsonl", repo_type="dataset", token="hf_wrong",
                                            local_dir=ARGS["local_dir"])),
            outcome(lambda: intruder.list_repo_files(REPO, repo_type="dataset")),
            outcome(lambda: HfApi(token=False).list_repo_files(REPO, repo_type="dataset")),
        ])
        """,
        file=str(data_file),
        local_dir=str(tmp_path / "local"),
    )
    for attempt in result:
        assert attempt["raised"] is not None and "HfHubHTTPError" in attempt["classes"], attempt
        assert attempt["status"] == 401 and attempt["raised"] != "RepositoryNotFoundError", attempt
    assert len(result) == 5 and not (tmp_path / "local" / "data.jsonl").exists()
    state = control(hub, "GET", "/_state")
    assert list(state["repos"]) == [REPO] and list(state["repos"][REPO]["refs"]["main"]) == ["data.jsonl"]
    refused = [r for r in control(hub, "GET", "/_requests") if not r["authorization_ok"]]
    assert refused and all(r["path"] != f"/api/datasets/{REPO}/commit/main" for r in refused)
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(f"{hub.url}/datasets/{REPO}/resolve/main/data.jsonl", timeout=10)
    assert raised.value.code == 401 and "error" in orjson.loads(raised.value.read())


def test_missing_repo_and_missing_file_raise_the_client_errors(hub: StartedServer, tmp_path: Path):
    result = run_client(
        hub,
        tmp_path,
        """
        setup()
        emit([
            outcome(lambda: hf_hub_download("test-org/absent", "data.jsonl", repo_type="dataset", token=TOKEN)),
            outcome(lambda: api.list_repo_files("test-org/absent", repo_type="dataset")),
            outcome(lambda: hf_hub_download(REPO, "absent.jsonl", repo_type="dataset", token=TOKEN)),
            outcome(lambda: hf_hub_download(REPO, "data.jsonl", repo_type="dataset", revision="nope",
                                            token=TOKEN)),
        ])
        """,
    )
    assert [(r["raised"], r["status"]) for r in result] == [
        ("RepositoryNotFoundError", 404),
        ("RepositoryNotFoundError", 404),
        ("RemoteEntryNotFoundError", 404),
        ("RevisionNotFoundError", 404),
    ]


def test_dropped_commit_makes_upload_raise_and_stores_nothing(
    hub: StartedServer, tmp_path: Path, data_file: Path
):
    control(hub, "POST", "/_faults", {"drop_commit": True})
    result = run_client(
        hub,
        tmp_path,
        """
        setup()
        emit([outcome(upload), outcome(lambda: upload(path_in_repo="second.jsonl").oid)])
        """,
        file=str(data_file),
    )
    dropped, second = result
    assert dropped["raised"] is not None and dropped["status"] is None, dropped  # no HTTP answer at all
    assert second["raised"] is None  # the fault fires once
    assert stored(hub, path="data.jsonl") is None and stored(hub, path="second.jsonl") == CONTENT
    commits = [r for r in control(hub, "GET", "/_requests") if "/commit/" in r["path"]]
    assert len(commits) == 2 and commits[0]["body_size"] > len(CONTENT)  # the client does not retry commits


def test_lasting_truncated_download_makes_hf_hub_download_raise(
    hub: StartedServer, tmp_path: Path, data_file: Path
):
    run_client(hub, tmp_path, "setup(); emit(upload().oid)", file=str(data_file))
    control(hub, "POST", "/_faults", {"truncate_download": True})
    result = run_client(
        hub,
        tmp_path,
        """
        emit(outcome(lambda: hf_hub_download(REPO, "data.jsonl", repo_type="dataset", token=TOKEN,
                                             local_dir=ARGS["local_dir"])))
        """,
        local_dir=str(tmp_path / "local"),
    )
    assert result["raised"] == "RemoteProtocolError", result
    assert not (tmp_path / "local" / "data.jsonl").exists()
    gets = [r for r in control(hub, "GET", "/_requests") if r["method"] == "GET" and "/resolve/" in r["path"]]
    assert len(gets) > 1  # the client resumed (with a Range request) before giving up


def test_one_cut_download_is_resumed_by_the_client(hub: StartedServer, tmp_path: Path, data_file: Path):
    run_client(hub, tmp_path, "setup(); emit(upload().oid)", file=str(data_file))
    control(hub, "POST", "/_faults", {"truncate_download": 1})
    result = run_client(
        hub,
        tmp_path,
        """
        emit(hf_hub_download(REPO, "data.jsonl", repo_type="dataset", token=TOKEN, local_dir=ARGS["local_dir"]))
        """,
        local_dir=str(tmp_path / "local"),
    )
    assert Path(result).read_bytes() == CONTENT
    gets = [r for r in control(hub, "GET", "/_requests") if r["method"] == "GET" and "/resolve/" in r["path"]]
    assert len(gets) == 2


def test_reset_forgets_everything(hub: StartedServer, tmp_path: Path, data_file: Path):
    run_client(hub, tmp_path, "setup(); emit(upload().oid)", file=str(data_file))
    control(hub, "POST", "/_faults", {"drop_commit": 3})
    control(hub, "POST", "/_reset", {})
    assert control(hub, "GET", "/_state") == {"repos": {}, "collections": {}}
    assert control(hub, "GET", "/_requests") == []
    run_client(hub, tmp_path, "setup(); emit(upload().oid)", file=str(data_file))
    assert stored(hub) == CONTENT
