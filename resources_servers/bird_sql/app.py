"""bird_sql: BIRD text-to-SQL, rewarded 1.0 when the predicted query's result set equals the gold query's
(as sets: row order and duplicate rows do not count), both run on the task's SQLite database.

NeMo Gym downloads BIRD's dev databases at startup; here `bird_sql_dir` points at databases already on
disk, and without it the two small bundled databases (make_databases.py) are built into a temporary
folder. Execution is read-only with a deadline, in the CPU pool (sql_exec.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.bird_sql.make_databases import build_databases
from resources_servers.bird_sql.sql_exec import (
    NO_SQL_GRADE,
    Rows,
    SqlRunner,
    execution_grade,
    find_database,
    open_databases,
)

SQL_FENCE = re.compile(r"```sql(.*?)```", re.DOTALL | re.IGNORECASE)
COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.DOTALL)
BOLD_HEADER = re.compile(r"^\*\*.*?\*\*")


class BirdSqlConfig(BaseResourcesServerConfig):
    # A folder holding <db_id>.sqlite files (e.g. BIRD's dev_databases/<db_id>/<db_id>.sqlite); unset: bundled.
    bird_sql_dir: str | None = None
    max_concurrency: int = Field(default=32, gt=0)
    sql_execution_timeout_s: float = Field(default=30.0, gt=0)
    max_result_rows: int = Field(default=1_000_000, gt=0)


class BirdSqlVerifyRequest(BaseVerifyRequest):
    """Other row fields are kept and echoed."""

    model_config = ConfigDict(extra="allow")

    question: str
    gt_sql: str
    db_id: str
    difficulty: str | None = None
    id: int | str | None = None


class BirdSqlVerifyResponse(BirdSqlVerifyRequest, BaseVerifyResponse):
    model_output: str
    extracted_sql: str | None
    had_codeblock: bool
    execution_match: bool
    sql_failure: str
    execution_error: str | None


def extract_bird_sql(text: str) -> tuple[str | None, bool]:
    """(SQL, had a ```sql block): the last ```sql block with a letter in it, comments removed, spaces
    collapsed and a leading **bold** header dropped (BIRD's evaluator in NeMo Skills does the same)."""
    blocks = [body for body in SQL_FENCE.findall(text) if re.search(r"[A-Za-z]", body)]
    if not blocks:
        return None, False
    sql = " ".join(COMMENT.sub(" ", blocks[-1]).split())
    sql = BOLD_HEADER.sub("", sql).strip().rstrip(";").strip()
    return sql or None, True


def same_row_set(gold: Rows | None, predicted: Rows) -> bool:
    """BIRD's rule: the two results hold the same distinct rows, in any order (column names ignored)."""
    return set(gold or ()) == set(predicted)


class BirdSqlResourcesServer(SimpleResourcesServer):
    config: BirdSqlConfig
    pass_at_k = PassAtK(answer_key="extracted_sql", subset_key="difficulty")
    key_metric_patterns = ("mean/*", "pass@1[avg-of-{k}]/*", "pass@{k}/*")
    _databases: dict[str, Path] = PrivateAttr(default_factory=dict)
    _runner: SqlRunner = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._databases = open_databases(app, self.config.bird_sql_dir, build_databases, "bird_sql")
        config = self.config
        self._runner = SqlRunner(
            config.sql_execution_timeout_s, config.max_result_rows, config.max_concurrency
        )
        return app

    def database(self, db_id: str) -> Path:
        """The task's database file; an unknown db_id is the row's fault (422)."""
        return find_database(self._databases, db_id)

    async def verify(self, body: BirdSqlVerifyRequest) -> BirdSqlVerifyResponse:
        """reward 1.0 iff the extracted query runs and returns the gold query's set of rows."""
        database = self.database(body.db_id)
        text = body.response.output_text or ""
        sql, had_codeblock = extract_bird_sql(text)
        row = body.model_dump(
            exclude=set(BirdSqlVerifyResponse.model_fields) - set(BirdSqlVerifyRequest.model_fields)
        )
        grade = {"model_output": text, "extracted_sql": sql, "had_codeblock": had_codeblock}
        if sql is None:
            return BirdSqlVerifyResponse(**row, **grade, **NO_SQL_GRADE)
        result = await self._runner.run(database, body.gt_sql, sql, same_row_set)
        return BirdSqlVerifyResponse(**row, **grade, **execution_grade(result, "gt_sql"))


if __name__ == "__main__":
    BirdSqlResourcesServer.run_webserver()
