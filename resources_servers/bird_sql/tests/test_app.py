"""bird_sql over HTTP (a real server on the bundled databases), plus its pieces in-process."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    StartedServer,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.bird_sql.app import extract_bird_sql, same_row_set
from resources_servers.bird_sql.make_databases import build_databases
from resources_servers.bird_sql.sql_exec import locate_databases

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
LYON = ROWS[0]  # SELECT name FROM students WHERE city = 'Lyon'
PATIENTS = ROWS[3]  # patients who saw a cardiologist
TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("bird_sql")
    with run_resources_server(
        "bird_sql", workdir, domain="coding", sql_execution_timeout_s=TIMEOUT_S
    ) as started:
        yield started


async def post_verify(server: StartedServer, text: str, row: dict, **changes: Any) -> tuple[int, Any]:
    body = {**row, **changes, "response": response_with(message_item(text))}
    return await post_json(server.url + "/verify", body)


async def verify(server: StartedServer, text: str, row: dict = LYON, **changes: Any) -> dict:
    status, answer = await post_verify(server, text, row, **changes)
    assert status == 200, answer
    assert answer["reward"] == (1.0 if answer["execution_match"] else 0.0)
    return answer


def fenced(sql: str) -> str:
    return f"Here is the query:\n```sql\n{sql}\n```"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM students WHERE city = 'Lyon'",
        "SELECT s.name FROM students AS s WHERE s.city IN ('Lyon') ORDER BY s.name DESC",  # other order
        "SELECT name FROM students WHERE student_id IN (SELECT student_id FROM students WHERE city = 'Lyon')",
    ],
)
async def test_an_equivalent_query_earns_1(server, sql):
    answer = await verify(server, fenced(sql))
    assert (answer["reward"], answer["sql_failure"], answer["execution_error"]) == (1.0, "none", None)
    assert answer["had_codeblock"] is True and answer["mask_sample"] is False


async def test_rows_compare_as_sets_so_duplicates_do_not_count(server):
    duplicated = "SELECT p.name FROM patients p JOIN visits v ON v.patient_id = p.patient_id " + (
        "JOIN doctors d ON d.doctor_id = v.doctor_id WHERE d.specialty = 'cardiology'"
    )
    assert (await verify(server, fenced(duplicated), PATIENTS))["reward"] == 1.0


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM students WHERE city = 'Nantes'",
        "SELECT name, city FROM students WHERE city = 'Lyon'",  # an extra column
        "SELECT name FROM students",
    ],
)
async def test_a_wrong_query_earns_0(server, sql):
    answer = await verify(server, fenced(sql))
    assert (answer["reward"], answer["sql_failure"], answer["execution_error"]) == (
        0.0,
        "execution_error",
        None,
    )


async def test_a_failing_query_earns_0_with_the_reason(server):
    answer = await verify(server, fenced("SELECT nme FROM students"))
    assert answer["reward"] == 0.0 and answer["sql_failure"] == "execution_error"
    assert answer["execution_error"] == "OperationalError: no such column: nme"
    assert answer["mask_sample"] is False


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM students",
        "UPDATE students SET city = 'Lyon'",
        "INSERT INTO students VALUES (9, 'X', 10, 'Lyon')",
        "DROP TABLE students",
        "ATTACH DATABASE '/tmp/gym-bird-evil.db' AS evil",
    ],
)
async def test_a_write_is_refused_and_leaves_the_database_intact(server, sql):
    answer = await verify(server, fenced(sql))
    assert answer["reward"] == 0.0 and "not authorized" in answer["execution_error"]
    assert (await verify(server, fenced("SELECT name FROM students WHERE city = 'Lyon'")))["reward"] == 1.0
    assert not Path("/tmp/gym-bird-evil.db").exists()


async def test_a_runaway_query_is_cut_off_at_the_deadline_and_the_server_keeps_answering(server):
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    answer = await verify(server, fenced(endless))
    assert answer["reward"] == 0.0 and answer["execution_error"] == f"ran longer than {TIMEOUT_S} s"
    assert answer["mask_sample"] is False  # the model's query, the model's fault
    assert (await verify(server, fenced("SELECT name FROM students WHERE city = 'Lyon'")))["reward"] == 1.0


@pytest.mark.parametrize(
    "text",
    ["", "SELECT name FROM students WHERE city = 'Lyon'", "```\nSELECT 1\n```", "```sql\n-- nothing\n```"],
)
async def test_an_answer_without_a_sql_block_earns_0(server, text):
    answer = await verify(server, text)
    assert (answer["reward"], answer["extracted_sql"], answer["sql_failure"]) == (
        0.0,
        None,
        "no_sql_extracted",
    )


async def test_an_unknown_db_id_is_a_422_naming_the_field(server):
    status, answer = await post_verify(server, fenced("SELECT 1"), LYON, db_id="world")
    assert status == 422 and answer["error"]["type"] == "invalid_row"
    assert answer["error"]["message"] == "db_id: no database 'world' (this server has clinic, school)"


async def test_a_failing_gold_query_masks_the_rollout(server):
    answer = await verify(server, fenced("SELECT 1"), gt_sql="SELECT nope FROM students")
    assert answer["reward"] == 0.0 and answer["sql_failure"] == "gold_execution_error"
    assert answer["mask_sample"] is True and answer["failure_kind"] == "verifier_error"
    assert answer["failure_reason"] == "gt_sql: OperationalError: no such column: nope"


async def test_row_fields_are_echoed_and_cannot_forge_the_grade(server):
    answer = await verify(server, fenced("SELECT 1"), evidence="x", execution_match=True, reward=1.0)
    assert (answer["execution_match"], answer["reward"], answer["evidence"]) == (False, 0.0, "x")
    assert {key: answer[key] for key in ("id", "db_id", "question", "gt_sql", "difficulty")} == {
        key: LYON[key] for key in ("id", "db_id", "question", "gt_sql", "difficulty")
    }


@pytest.mark.parametrize("field", ["db_id", "gt_sql", "question"])
async def test_a_row_without_a_required_field_is_a_422_naming_it(server, field):
    row = {key: value for key, value in LYON.items() if key != field}
    status, answer = await post_verify(server, fenced("SELECT 1"), row)
    assert status == 422 and ["body", field] in [error["loc"] for error in answer["detail"]]


def test_extraction_takes_the_last_sql_block_without_comments():
    text = "```sql\nSELECT 1\n```\nbetter:\n```SQL\n-- names\nSELECT name /* all */\n  FROM students;\n```"
    assert extract_bird_sql(text) == ("SELECT name FROM students", True)
    assert extract_bird_sql("```sql\n**Answer** SELECT 2\n```") == ("SELECT 2", True)


def test_same_row_set_ignores_order_and_duplicates_but_not_values():
    assert same_row_set([(1, "a"), (2, "b")], [(2, "b"), (1, "a"), (1, "a")])
    assert not same_row_set([(1, "a")], [(1, "b")])
    assert same_row_set([], [])


def test_real_databases_are_found_in_birds_layout(tmp_path):
    build_databases(tmp_path / "dev_databases")
    found = locate_databases(tmp_path)
    assert found == {
        name: tmp_path / "dev_databases" / name / f"{name}.sqlite" for name in ("clinic", "school")
    }
    with pytest.raises(ConfigError, match="does not exist"):
        locate_databases(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no <db_id>.sqlite"):
        locate_databases(tmp_path / "empty")


async def test_bird_sql_dir_points_at_downloaded_databases(tmp_path):
    downloaded = tmp_path / "bird" / "dev_databases"
    build_databases(downloaded)
    with run_resources_server(
        "bird_sql", tmp_path, domain="coding", bird_sql_dir=str(tmp_path / "bird")
    ) as started:
        answer = await verify(started, fenced("SELECT name FROM students WHERE city = 'Lyon'"))
    assert answer["reward"] == 1.0


async def test_aggregate_metrics_report_pass_at_k_per_difficulty(server):
    right, wrong = fenced("SELECT name FROM students WHERE city = 'Lyon'"), fenced("SELECT 1")
    results = [await verify(server, right), await verify(server, wrong)]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    assert body["key_metrics"]["pass@2/accuracy"] == 100.0
    assert body["key_metrics"]["pass@1[avg-of-2]/accuracy"] == 50.0
