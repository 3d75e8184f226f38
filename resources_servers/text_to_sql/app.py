"""text_to_sql: reward SQL whose result on the task's SQLite database equals the gold query's result.

The databases are built at startup from the `.sql` scripts of `database_dir` (small and diffable) into a
private temporary folder, removed at shutdown; `.sqlite` files there are used in place. The predicted
query runs read-only with a time limit and a row cap, in the CPU pool (see sql_grading.py).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.http.errors import GymError
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.text_to_sql.sql_grading import SqlGrade, grade_sql, prepare_databases

FOLDER = Path(__file__).resolve().parent


class TextToSqlConfig(BaseResourcesServerConfig):
    database_dir: str = "databases"
    sql_timeout_s: float = Field(default=5.0, gt=0)
    max_result_rows: int = Field(default=10_000, gt=0)


class TextToSqlVerifyRequest(BaseVerifyRequest):
    """Other row fields are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    db_id: str
    question: str
    gold_sql: str
    evidence: str = ""
    difficulty: str | None = None


class TextToSqlVerifyResponse(TextToSqlVerifyRequest, BaseVerifyResponse):
    extracted_sql: str | None
    execution_error: str | None
    result_match: bool


class TextToSqlResourcesServer(SimpleResourcesServer):
    config: TextToSqlConfig
    pass_at_k = PassAtK(answer_key="extracted_sql", subset_key="difficulty")  # votes on the SQL text
    key_metric_patterns = ("mean/*", "pass@1[avg-of-{k}]/*", "pass@{k}/*", "majority@{k}/*")
    _databases: dict[str, Path] = PrivateAttr(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        build_dir = Path(tempfile.mkdtemp(prefix="gym-text_to_sql-"))
        app.router.on_shutdown.append(lambda: shutil.rmtree(build_dir, ignore_errors=True))
        try:
            self._databases = prepare_databases(FOLDER / self.config.database_dir, build_dir)
        except ConfigError:
            shutil.rmtree(build_dir, ignore_errors=True)
            raise
        return app

    async def verify(self, body: TextToSqlVerifyRequest) -> TextToSqlVerifyResponse:
        """reward 1.0 iff the extracted query runs and returns the gold query's rows."""
        database = self._databases.get(body.db_id)
        if database is None:
            known = ", ".join(sorted(self._databases))
            raise GymError(422, "invalid_row", f"db_id: no database {body.db_id!r} (this server has {known})")
        result = await self._grade(database, body.gold_sql, body.response.output_text)
        if result.gold_problem is not None:
            raise GymError(422, "invalid_row", f"gold_sql: {result.gold_problem}")
        row = body.model_dump(exclude={"reward", "extracted_sql", "execution_error", "result_match"})
        return TextToSqlVerifyResponse(
            **row,
            reward=1.0 if result.result_match else 0.0,
            extracted_sql=result.extracted_sql,
            execution_error=result.execution_error,
            result_match=result.result_match,
        )

    async def _grade(self, database: Path, gold_sql: str, answer: str) -> SqlGrade:
        query_s, max_rows = self.config.sql_timeout_s, self.config.max_result_rows
        # Two queries, each stopped by its own progress handler; the pool deadline is a backstop.
        deadline_s = 2 * query_s + 1
        return await run_cpu_bound(
            grade_sql,
            database,
            gold_sql,
            answer,
            query_s,
            max_rows,
            timeout_s=deadline_s,
            on_timeout=SqlGrade(None, f"grading exceeded {deadline_s} s", False),
        )


if __name__ == "__main__":
    TextToSqlResourcesServer.run_webserver()
