"""spider2_lite: Spider 2.0-Lite text-to-SQL (its SQLite part), rewarded 1.0 when the predicted query's
result matches the gold one under Spider 2.0's column-matching rule (grading.py).

The gold is either a query (`gold_sql`, run on the same database) or stored results (`gold_result`, one
or more acceptable result tables). Execution reuses bird_sql's runner (read-only, a deadline per query,
in the CPU pool). NeMo Gym downloads the databases at startup; here `spider2_lite_dir` points at them on
disk, and without it the small bundled database (make_databases.py) is built into a temporary folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.bird_sql.sql_exec import (
    NO_SQL_GRADE,
    SqlRunner,
    execution_grade,
    find_database,
    open_databases,
)
from resources_servers.spider2_lite.grading import compare_with_gold, extract_spider_sql
from resources_servers.spider2_lite.make_databases import build_databases


class Spider2LiteConfig(BaseResourcesServerConfig):
    # A folder holding <db_id>.sqlite files (up to three levels down); unset: the bundled database.
    spider2_lite_dir: str | None = None
    max_concurrency: int = Field(default=32, gt=0)
    sql_execution_timeout_s: float = Field(default=30.0, gt=0)
    max_result_rows: int = Field(default=1_000_000, gt=0)


class Spider2LiteVerifyRequest(BaseVerifyRequest):
    """Other row fields are kept and echoed."""

    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    instance_id: str | None = None
    db_id: str
    question: str
    gold_sql: str | None = None
    gold_result: list[list[list[Any]]] | None = None
    ignore_order: bool = True
    condition_cols: list[Any] | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _has_a_gold(self) -> Spider2LiteVerifyRequest:
        if not self.gold_sql and not self.gold_result:
            raise ValueError("the row needs gold_sql or gold_result")
        return self


class Spider2LiteVerifyResponse(Spider2LiteVerifyRequest, BaseVerifyResponse):
    model_output: str
    extracted_sql: str | None
    execution_match: bool
    sql_failure: str
    execution_error: str | None


class Spider2LiteResourcesServer(SimpleResourcesServer):
    config: Spider2LiteConfig
    _databases: dict[str, Path] = PrivateAttr(default_factory=dict)
    _runner: SqlRunner = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._databases = open_databases(app, self.config.spider2_lite_dir, build_databases, "spider2_lite")
        config = self.config
        self._runner = SqlRunner(
            config.sql_execution_timeout_s, config.max_result_rows, config.max_concurrency
        )
        return app

    async def verify(self, body: Spider2LiteVerifyRequest) -> Spider2LiteVerifyResponse:
        """reward 1.0 iff the extracted query runs and its result matches the gold query's or a stored one."""
        database = find_database(self._databases, body.db_id)
        text = body.response.output_text or ""
        sql = extract_spider_sql(text)
        own = set(Spider2LiteVerifyResponse.model_fields) - set(Spider2LiteVerifyRequest.model_fields)
        row = {**body.model_dump(exclude=own), "model_output": text, "extracted_sql": sql}
        if sql is None:
            return Spider2LiteVerifyResponse(**row, **NO_SQL_GRADE)
        compare_args = (body.gold_result, body.condition_cols, body.ignore_order)
        result = await self._runner.run(database, body.gold_sql or None, sql, compare_with_gold, compare_args)
        return Spider2LiteVerifyResponse(**row, **execution_grade(result, "gold_sql"))


if __name__ == "__main__":
    Spider2LiteResourcesServer.run_webserver()
