"""spider2_lite over HTTP (a real server on the bundled database), plus its comparison in-process."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    StartedServer,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.spider2_lite.grading import extract_spider_sql, matches_any_gold, matches_result
from resources_servers.spider2_lite.make_databases import build_databases

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
NORTH = ROWS[0]  # cities with a store in the north: Porto, Braga
PER_CATEGORY = ROWS[1]  # category, units
STORED = ROWS[2]  # gold_result only: 79.0
TOP_REGION = ROWS[4]  # condition_cols [0]: only the region must match
TIMEOUT_S = 1.0
RIGHT_NORTH = "SELECT city FROM stores WHERE region = 'north'"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("spider2_lite")
    with run_resources_server(
        "spider2_lite", workdir, domain="coding", sql_execution_timeout_s=TIMEOUT_S
    ) as started:
        yield started


async def post_verify(server: StartedServer, text: str, row: dict, **changes: Any) -> tuple[int, Any]:
    body = {**row, **changes, "response": response_with(message_item(text))}
    return await post_json(server.url + "/verify", body)


async def verify(server: StartedServer, text: str, row: dict = NORTH, **changes: Any) -> dict:
    status, answer = await post_verify(server, text, row, **changes)
    assert status == 200, answer
    assert answer["reward"] == (1.0 if answer["execution_match"] else 0.0)
    return answer


def fenced(sql: str) -> str:
    return f"```sql\n{sql}\n```"


@pytest.mark.parametrize(
    ("sql", "row"),
    [
        (RIGHT_NORTH, NORTH),
        ("SELECT city FROM stores WHERE store_id IN (2, 1) ORDER BY city", NORTH),  # rows in another order
        ("SELECT store_id, city FROM stores WHERE region = 'north'", NORTH),  # an extra column is allowed
        (
            "SELECT SUM(s.quantity) AS units, p.category FROM products p JOIN sales s USING (product_id) "
            "GROUP BY p.category ORDER BY units",
            PER_CATEGORY,
        ),  # columns swapped
        (
            "SELECT SUM(s.quantity * p.unit_price) FROM sales s JOIN products p USING (product_id) "
            "JOIN stores st USING (store_id) WHERE st.city = 'Porto'",
            STORED,
        ),  # against the stored "79.0"
        ("SELECT 'north', 1", TOP_REGION),  # only the condition column counts
    ],
)
async def test_an_equivalent_query_earns_1(server, sql, row):
    answer = await verify(server, fenced(sql), row)
    assert (answer["reward"], answer["sql_failure"], answer["execution_error"]) == (1.0, "none", None)


@pytest.mark.parametrize(
    ("sql", "row"),
    [
        ("SELECT city FROM stores WHERE region = 'south'", NORTH),
        ("SELECT city FROM stores", NORTH),
        ("SELECT 79.5", STORED),  # beyond the 0.01 tolerance
        ("SELECT 'south', 23", TOP_REGION),
    ],
)
async def test_a_wrong_query_earns_0(server, sql, row):
    answer = await verify(server, fenced(sql), row)
    assert (answer["reward"], answer["sql_failure"], answer["execution_error"]) == (
        0.0,
        "execution_error",
        None,
    )


async def test_a_failing_query_earns_0_with_the_reason(server):
    answer = await verify(server, fenced("SELECT town FROM stores"))
    assert answer["reward"] == 0.0 and answer["execution_error"] == "OperationalError: no such column: town"


@pytest.mark.parametrize(
    "sql",
    ["DELETE FROM stores", "UPDATE stores SET region = 'north'", "DROP TABLE sales", "PRAGMA query_only = 0"],
)
async def test_a_write_is_refused_and_leaves_the_database_intact(server, sql):
    answer = await verify(server, fenced(sql))
    assert answer["reward"] == 0.0 and "not authorized" in answer["execution_error"]
    assert (await verify(server, fenced(RIGHT_NORTH)))["reward"] == 1.0


async def test_a_runaway_query_is_cut_off_at_the_deadline_and_the_server_keeps_answering(server):
    endless = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    answer = await verify(server, fenced(endless))
    assert answer["reward"] == 0.0 and answer["execution_error"] == f"ran longer than {TIMEOUT_S} s"
    assert (await verify(server, fenced(RIGHT_NORTH)))["reward"] == 1.0


@pytest.mark.parametrize("text", ["", "I cannot answer that.", "```sql\n\n```"])
async def test_an_answer_without_sql_earns_0(server, text):
    answer = await verify(server, text)
    assert (answer["reward"], answer["extracted_sql"], answer["sql_failure"]) == (
        0.0,
        None,
        "no_sql_extracted",
    )


async def test_an_unknown_db_id_is_a_422_naming_the_field(server):
    status, answer = await post_verify(server, fenced("SELECT 1"), NORTH, db_id="world")
    assert status == 422 and answer["error"]["type"] == "invalid_row"
    assert answer["error"]["message"] == "db_id: no database 'world' (this server has retail_shop)"


async def test_a_row_without_any_gold_is_a_422(server):
    status, answer = await post_verify(server, fenced("SELECT 1"), NORTH, gold_sql=None)
    assert status == 422 and "gold_sql or gold_result" in str(answer)


async def test_a_failing_gold_query_masks_the_rollout(server):
    answer = await verify(server, fenced("SELECT 1"), gold_sql="SELECT nope FROM stores")
    assert answer["sql_failure"] == "gold_execution_error" and answer["mask_sample"] is True
    assert answer["failure_reason"] == "gold_sql: OperationalError: no such column: nope"


def test_extraction_prefers_sql_blocks_then_statement_blocks_then_raw_text():
    assert extract_spider_sql("```sql\nSELECT 1\n```\n```SQL\nSELECT 2;\n```") == "SELECT 2;"
    assert extract_spider_sql("```\nnot sql\n```\n```\nWITH a AS (SELECT 1) SELECT * FROM a\n```") == (
        "WITH a AS (SELECT 1) SELECT * FROM a"
    )
    assert extract_spider_sql("The answer: SELECT city FROM stores; done") == "SELECT city FROM stores"
    assert extract_spider_sql("no query here") is None


def test_column_matching_rules():
    assert matches_result(
        [(None,), (2.0,)], [(0,), ("2",)], [], ignore_order=True
    )  # NULL is 0, text reads as numbers
    assert not matches_result([(1,), (2,)], [(2,), (1,)], [], ignore_order=False)
    assert matches_result([], [], [], ignore_order=True) and not matches_result(
        [(1,)], [], [], ignore_order=True
    )
    assert matches_any_gold([(5,)], [[(4,)], [(5.004,)]], None, ignore_order=True)  # any stored gold
    assert not matches_any_gold([(5,)], [[(4,)], [(6,)]], [[0], [0]], ignore_order=True)


async def test_spider2_lite_dir_points_at_downloaded_databases(tmp_path):
    (tmp_path / "spider2" / "resource" / "databases").mkdir(parents=True)
    build_databases(tmp_path / "spider2" / "resource" / "databases")
    config = {"domain": "coding", "spider2_lite_dir": str(tmp_path / "spider2")}
    with run_resources_server("spider2_lite", tmp_path, **config) as started:
        assert (await verify(started, fenced(RIGHT_NORTH)))["reward"] == 1.0
