"""text_to_sql over HTTP (one real server on the shipped databases), plus the SQL helpers in-process."""

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.config_types import ConfigError
from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.text_to_sql.sql_grading import (
    QueryError,
    extract_sql,
    orders_rows,
    prepare_databases,
    run_query,
    same_results,
)

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
SQL_TIMEOUT_S = 1.0
MAX_ROWS = 50
UNORDERED = ROWS[3]  # German airport codes
ORDERED = ROWS[1]  # three most expensive fantasy books, most expensive first


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("text_to_sql")


@pytest.fixture(scope="module")
def server(workdir: Path) -> Iterator[StartedServer]:
    with run_resources_server(
        "text_to_sql", workdir, domain="coding", sql_timeout_s=SQL_TIMEOUT_S, max_result_rows=MAX_ROWS
    ) as started:
        yield started


async def post_verify(server: StartedServer, text: str, row: dict, **changes: Any) -> tuple[int, Any]:
    body = {**row, **changes, "response": response_with(message_item(text))}
    return await post_json(server.url + "/verify", body)


async def verify(server: StartedServer, text: str, row: dict = UNORDERED, **changes: Any) -> dict:
    status, answer = await post_verify(server, text, row, **changes)
    assert status == 200, answer
    assert answer["reward"] == (1.0 if answer["result_match"] else 0.0)
    return answer


async def reward(server: StartedServer, text: str, row: dict = UNORDERED, **changes: Any) -> float:
    return (await verify(server, text, row, **changes))["reward"]


@pytest.mark.parametrize(
    "text",
    [
        "```sql\nSELECT code FROM airports WHERE country = 'Germany';\n```",
        "Here:\n```SQL\nSELECT code FROM airports WHERE country = 'Germany'\n```",
        "```\nSELECT code FROM airports WHERE country = 'Germany'\n```",
        "SELECT code FROM airports WHERE country = 'Germany';;",
        "```sql\nSELECT 1\n```\nBetter:\n```sql\nSELECT code FROM airports WHERE country = 'Germany'\n```",
        "```sql\nSELECT code FROM airports WHERE country = 'Germany'\n```\n```\nSELECT 1\n```",
    ],
)
async def test_the_sql_is_the_last_sql_fence_else_the_last_plain_fence_else_the_whole_text(server, text):
    answer = await verify(server, text)
    assert answer["reward"] == 1.0
    assert answer["extracted_sql"] == "SELECT code FROM airports WHERE country = 'Germany'"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT code FROM airports WHERE country = 'Germany' ORDER BY code DESC", 1.0),
        ("SELECT a.code AS iata FROM airports AS a WHERE a.city IN ('Berlin', 'Munich', 'Frankfurt')", 1.0),
        ("SELECT origin FROM flights WHERE origin IN ('FRA', 'MUC', 'BER')", 0.0),
        ("SELECT DISTINCT origin FROM flights WHERE origin IN ('FRA', 'MUC', 'BER')", 1.0),
        ("SELECT code, city FROM airports WHERE country = 'Germany'", 0.0),
        ("SELECT code FROM airports WHERE country = 'France'", 0.0),
    ],
)
async def test_without_order_by_in_the_gold_query_rows_compare_as_a_multiset(server, text, expected):
    assert await reward(server, text) == expected


async def test_with_order_by_in_the_gold_query_the_order_counts(server):
    descending = "SELECT title FROM books WHERE genre = 'fantasy' ORDER BY price DESC LIMIT 3"
    assert await reward(server, descending, ORDERED) == 1.0
    same_rows_reordered = (
        "SELECT title FROM (SELECT title, price FROM books WHERE genre = 'fantasy' "
        "ORDER BY price DESC LIMIT 3) ORDER BY title"
    )
    assert await reward(server, same_rows_reordered, ORDERED) == 0.0


async def test_floats_compare_after_rounding_to_6_decimals(server):
    gold = "SELECT SUM(price) FROM books WHERE genre = 'fantasy'"
    assert await reward(server, "SELECT 9.99 + 10.99 + 11.49 + 17.99 + 15.25", ORDERED, gold_sql=gold) == 1.0
    assert await reward(server, "SELECT 65.7", ORDERED, gold_sql=gold) == 0.0


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("DELETE FROM airports", "not authorized"),
        ("INSERT INTO airports VALUES ('XXX', 'x', 'x', 'Germany')", "not authorized"),
        ("UPDATE airports SET country = 'Germany'", "not authorized"),
        ("DROP TABLE airports", "not authorized"),
        ("CREATE TEMP TABLE t AS SELECT code FROM airports", "not authorized"),
        ("ATTACH DATABASE '/tmp/gym-evil.db' AS evil", "not authorized"),
        ("PRAGMA query_only = OFF", "not authorized"),
        ("SELECT load_extension('/tmp/evil.so')", "not authorized to use function: load_extension"),
        ("VACUUM INTO '/tmp/gym-copy.db'", "authorization denied"),
        ("SELECT 1; DELETE FROM airports", "You can only execute one statement at a time"),
        ("SELECT zeroblob(5000000)", "string or blob too big"),
        ("SELECT code FROM airport", "no such table: airport"),
    ],
)
async def test_the_predicted_query_can_only_read(server, text, error):
    answer = await verify(server, text)
    assert answer["reward"] == 0.0 and error in answer["execution_error"]
    assert await reward(server, "SELECT code FROM airports WHERE country = 'Germany'") == 1.0, "data intact"
    assert not Path("/tmp/gym-evil.db").exists() and not Path("/tmp/gym-copy.db").exists()


async def test_a_query_past_its_time_limit_fails_and_the_server_keeps_answering(server):
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    answer = await verify(server, endless)
    assert answer["reward"] == 0.0 and answer["execution_error"] == f"ran longer than {SQL_TIMEOUT_S} s"
    assert await reward(server, "SELECT code FROM airports WHERE country = 'Germany'") == 1.0


async def test_a_query_past_the_row_cap_fails(server):
    answer = await verify(server, "SELECT a.code FROM airports AS a, airports AS b, airports AS c")
    assert answer["execution_error"] == f"returned more than {MAX_ROWS} rows"


@pytest.mark.parametrize("text", ["", "   ", "```sql\n;\n```"])
async def test_an_answer_without_sql_earns_0(server, text):
    answer = await verify(server, text)
    assert answer["extracted_sql"] is None and answer["execution_error"] == "no SQL in the answer"


async def test_row_fields_are_echoed_and_cannot_forge_results(server):
    answer = await verify(server, "SELECT 1", hint="x", result_match=True, reward=1.0)
    assert (answer["result_match"], answer["reward"], answer["hint"]) == (False, 0.0, "x")
    assert {
        key: answer[key] for key in ("db_id", "question", "evidence", "gold_sql", "difficulty", "id")
    } == {key: UNORDERED[key] for key in ("db_id", "question", "evidence", "gold_sql", "difficulty", "id")}


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"db_id": "world"}, "db_id: no database 'world' (this server has bookstore, flights)"),
        ({"gold_sql": "SELECT nope FROM airports"}, "gold_sql: OperationalError: no such column: nope"),
        ({"gold_sql": "DELETE FROM airports"}, "gold_sql: DatabaseError: not authorized"),
        (
            {"gold_sql": "SELECT a.code FROM airports a, airports b, airports c"},
            "gold_sql: returned more than 50 rows",
        ),
    ],
)
async def test_a_row_the_server_cannot_grade_is_a_422_naming_the_field(server, changes, message):
    status, answer = await post_verify(server, "SELECT 1", UNORDERED, **changes)
    assert (
        status == 422 and answer["error"]["type"] == "invalid_row" and answer["error"]["message"] == message
    )


@pytest.mark.parametrize("field", ["db_id", "gold_sql", "question"])
async def test_a_row_without_a_required_field_is_a_422_naming_it(server, field):
    row = {key: value for key, value in UNORDERED.items() if key != field}
    status, answer = await post_verify(server, "SELECT 1", row)
    assert status == 422 and ["body", field] in [error["loc"] for error in answer["detail"]]


async def test_aggregate_metrics_report_pass_and_majority_at_k_per_difficulty(server):
    right, wrong = "SELECT code FROM airports WHERE country = 'Germany'", "SELECT 1"
    results = [await verify(server, right), await verify(server, wrong), await verify(server, right)]
    rollouts = [{**result, "_ng_task_index": 0, "_ng_rollout_index": i} for i, result in enumerate(results)]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["key_metrics"]
    assert metrics["pass@3/accuracy"] == 100.0 and metrics["majority@3/accuracy"] == 100.0
    assert metrics["pass@1[avg-of-3]/accuracy"] == pytest.approx(200 / 3)
    assert body["agent_metrics"]["simple/pass@1[avg-of-3]/accuracy"] == pytest.approx(200 / 3)


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_verify_to_their_recorded_result(server, index):
    rollout = ROLLOUTS[index]
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    fields = ("reward", "extracted_sql", "execution_error", "result_match", "db_id", "id")
    assert {key: body[key] for key in fields} == {key: rollout[key] for key in fields}


def test_recorded_rollouts_mix_right_wrong_and_failing_queries():
    assert [rollout["reward"] for rollout in ROLLOUTS] == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert ROLLOUTS[4]["execution_error"] == "OperationalError: no such column: f.state"


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "text_to_sql", "coding")
    assert resources.model_extra["database_dir"] == "databases"


def test_a_broken_database_script_stops_the_server_at_startup(workdir, tmp_path):
    (tmp_path / "broken.sql").write_text("CREATE TABLE t (a);\nINSERT INTO missing VALUES (1);\n")
    with pytest.raises(RuntimeError, match="broken.sql: no such table: missing"):
        with run_resources_server("text_to_sql", workdir, domain="coding", database_dir=str(tmp_path)):
            pass


def test_databases_are_built_from_scripts_and_sqlite_files_are_used_in_place(tmp_path):
    source, build = tmp_path / "source", tmp_path / "build"
    source.mkdir(), build.mkdir()
    (source / "a.sql").write_text("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
    with closing(sqlite3.connect(source / "b.sqlite")) as connection:
        connection.execute("CREATE TABLE u (y)")
    assert prepare_databases(source, build) == {"a": build / "a.sqlite", "b": source / "b.sqlite"}
    with closing(sqlite3.connect(build / "a.sqlite")) as connection:
        assert connection.execute("SELECT x FROM t").fetchall() == [(1,)]
    with pytest.raises(ConfigError, match="no <db_id>.sql or <db_id>.sqlite files"):
        prepare_databases(tmp_path / "empty", build)
    with pytest.raises(QueryError, match="UnicodeEncodeError"):
        run_query(build / "a.sqlite", "SELECT '\ud800'", 1.0, 10)
    with pytest.raises(QueryError, match="unable to open database file"):
        run_query(build / "missing.sqlite", "SELECT 1", 1.0, 10)


@pytest.mark.parametrize(
    ("sql", "ordered"),
    [
        ("SELECT a FROM t ORDER BY a", True),
        ("select a from t order\n  by a desc limit 3", True),
        ("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", True),
        ("SELECT a FROM (SELECT a FROM t ORDER BY a)", False),
        ("SELECT rank() OVER (ORDER BY a) FROM t", False),
        ("SELECT 'order by' FROM t", False),
        ('SELECT "order by" FROM t -- order by a', False),
        ("SELECT [order by] FROM t /* order by */", False),
        ("SELECT a FROM t WHERE b = 'it''s' ORDER BY a", True),
    ],
)
def test_only_a_top_level_order_by_orders_the_result(sql, ordered):
    assert orders_rows(sql) is ordered


def test_extract_sql_strips_semicolons_and_ignores_other_languages():
    assert extract_sql("```python\nprint(1)\n```\n```sql\nSELECT 2;\n```") == "SELECT 2"
    assert extract_sql("```python\nprint(1)\n```") == "```python\nprint(1)\n```"
    assert extract_sql(" ;; ") is None


def test_same_results_ignores_order_only_when_told():
    rows, reordered = [(1, "a"), (2, "b")], [(2, "b"), (1, "a")]
    assert same_results(rows, reordered, ordered=False) and not same_results(rows, reordered, ordered=True)
    assert not same_results([(1,), (1,)], [(1,)], ordered=False), "duplicates count"
    assert same_results([(0.1 + 0.2,)], [(0.3,)], ordered=True) and same_results(
        [(1,)], [(1.0,)], ordered=True
    )
