"""spider2_lite's prepare script: the Spider2 repository archive from a local file host standing for GitHub,
the databases zip from a local path (SPIDER2_LITE_DATABASES_ZIP, the manual step when Google Drive answers
with a page), then its rows through `gym eval run` offline on those databases."""

import io
import json
import sqlite3
import zipfile
from pathlib import Path

import pytest
import requests

from benchmarks.spider2_lite.prepare import DATABASES_URL, DATABASES_ZIP_ENV, REPOSITORY_URL
from nemo_gym.benchmarks import MIRROR_ENV
from nemo_gym.testing import run_server
from tests.benchmark_checks import check_benchmark
from tests.helpers import run_gym

TOP = "Spider2-main/spider2-lite/"
TASKS = [
    {"instance_id": "bq001", "db": "ga360", "question": "A BigQuery task, left out."},
    {"instance_id": "local010", "db": "Orchard", "question": "How many trees of each kind are there?",
     "external_knowledge": None},
    {"instance_id": "local002", "db": "Orchard", "question": "Which tree is the tallest?", "external_knowledge": None},
    {"instance_id": "local007", "db": "depot", "question": "List the crates heavier than 10 kg.",
     "external_knowledge": None},
]  # fmt: skip
SETTINGS = [
    {"instance_id": "local002", "condition_cols": [], "ignore_order": True},
    {"instance_id": "local007", "condition_cols": [0], "ignore_order": True},
    {"instance_id": "local010", "condition_cols": [], "ignore_order": False},
]
REPOSITORY = {
    "spider2-lite.jsonl": "".join(json.dumps(task) + "\n" for task in TASKS),
    "evaluation_suite/gold/spider2lite_eval.jsonl": "".join(json.dumps(entry) + "\n" for entry in SETTINGS),
    "evaluation_suite/gold/exec_result/local002.csv": "name\nOak\n",
    "evaluation_suite/gold/exec_result/local007_a.csv": "crate_id,kg\n2,12.5\n3,40\n",
    "evaluation_suite/gold/exec_result/local007_b.csv": "crate_id\n2\n3\n",
    "evaluation_suite/gold/exec_result/local010.csv": "kind,trees\napple,2\npear,1\n",
    "evaluation_suite/gold/sql/local010.sql": "SELECT kind, COUNT(*) FROM trees GROUP BY kind ORDER BY kind;\n",
}
DATABASES = {
    "Orchard": ["CREATE TABLE trees (name TEXT, kind TEXT, height REAL)",
                "INSERT INTO trees VALUES ('Oak', 'apple', 9.5), ('Ash', 'apple', 4), ('Elm', 'pear', 3)"],
    "depot": ["CREATE TABLE crates (crate_id INTEGER, kg REAL)",
              "INSERT INTO crates VALUES (1, 8.0), (2, 12.5), (3, 40)"],
}  # fmt: skip
RIGHT = {
    "local002": "SELECT name FROM trees ORDER BY height DESC LIMIT 1",
    "local007": "SELECT crate_id, kg FROM crates WHERE kg > 10",
}
WRONG = "```sql\nSELECT kind, COUNT(*) FROM trees WHERE height > 3 GROUP BY kind\n```"


def zipped(files: dict[str, bytes | str]) -> bytes:
    content = io.BytesIO()
    with zipfile.ZipFile(content, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return content.getvalue()


def databases_zip(scratch: Path) -> Path:
    """The Drive zip's layout: a folder of <db>.sqlite files."""
    scratch.mkdir()
    members = {}
    for db_id, statements in DATABASES.items():
        path = scratch / f"{db_id}.sqlite"
        with sqlite3.connect(path) as connection:
            for statement in statements:
                connection.execute(statement)
        members[f"spider2-localdb/{db_id}.sqlite"] = path.read_bytes()
    archive = scratch / "local_sqlite.zip"
    archive.write_bytes(zipped(members))
    return archive


def test_prepares_the_local_tasks_and_scores_them_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATABASES_ZIP_ENV, str(databases_zip(tmp_path / "source")))
    databases = tmp_path / "benchmarks" / "spider2_lite" / "data" / "databases"
    rows = check_benchmark(
        "spider2_lite",
        {},
        lambda row: f"```sql\n{RIGHT[row['instance_id']]}\n```",
        WRONG,
        tmp_path,
        url_files={REPOSITORY_URL: zipped({TOP + path: text for path, text in REPOSITORY.items()})},
        run_overrides=[
            f"++spider2_lite_benchmark_resources_server.resources_servers.spider2_lite.spider2_lite_dir={databases}"
        ],
    )
    assert [row["instance_id"] for row in rows] == ["local002", "local007", "local010"]
    assert rows[1]["gold_result"] == [[[2, 12.5], [3, 40]], [[2], [3]]] and rows[1]["condition_cols"] == [0]
    assert rows[2]["gold_sql"].startswith("SELECT kind") and "gold_sql" not in rows[0]
    assert (
        "CREATE TABLE trees (name TEXT, kind TEXT, height REAL)"
        in rows[0]["responses_create_params"]["input"][1]["content"]
    )
    assert sorted(path.name for path in databases.iterdir()) == ["Orchard.sqlite", "depot.sqlite"]


def test_a_drive_page_instead_of_the_zip_names_the_manual_step(tmp_path: Path) -> None:
    with run_server(["-m", "tests.public_files"], tmp_path) as host:
        drive = DATABASES_URL.split("://")[1].split("?")[0]
        page = b"<html>Google Drive can't scan this file for viruses</html>"
        requests.put(f"{host.url}/_files", params={"path": drive}, data=page, timeout=30).raise_for_status()
        prepared = run_gym(
            "eval", "prepare", "--benchmark", "spider2_lite", cwd=tmp_path, env={MIRROR_ENV: host.url}
        )
    assert prepared.returncode != 0
    assert f"set {DATABASES_ZIP_ENV}=" in prepared.stderr and "Traceback" not in prepared.stderr
    assert not list((tmp_path / "benchmarks" / "spider2_lite" / "data").glob("*.zip"))
