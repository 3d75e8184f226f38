"""Execution side shared by bird_sql and spider2_lite: find each db_id's SQLite file, run the gold and
the predicted query on it in a CPU-pool worker, and the grading fields (`sql_failure` codes) that gives.

Queries run through text_to_sql's `run_query`: a `mode=ro` connection with `PRAGMA query_only`, an
authorizer that allows reading only, a progress-handler deadline (a runaway query is aborted and reported
as `ran longer than N s`) and a row cap. The comparison runs in the worker too (result sets can be large);
it is a module-level function of the calling folder, so it pickles.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from nemo_gym.config_types import ConfigError
from nemo_gym.http.errors import GymError
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.text_to_sql.sql_grading import QueryError, run_query

Rows = list[tuple[Any, ...]]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SEARCH_DEPTH = 3  # <dir>/<db_id>.sqlite, <dir>/<db_id>/<db_id>.sqlite, <dir>/dev_databases/<db_id>/...

# sql_failure values (NeMo Gym's `failure_reason` codes; that name is the base answer's "not measured" reason here)
NONE, NO_SQL, EXECUTION_ERROR, GOLD_ERROR = (
    "none",
    "no_sql_extracted",
    "execution_error",
    "gold_execution_error",
)
# The grading fields of an answer without an SQL query.
NO_SQL_GRADE: dict[str, Any] = {
    "reward": 0.0,
    "execution_match": False,
    "sql_failure": NO_SQL,
    "execution_error": None,
}


@dataclass(frozen=True)
class Execution:
    """What running both queries gave. `gold_error` set: the row could not be graded (not the model's
    fault). `predicted_error` set: the model's query failed. Otherwise `match` is the comparison."""

    gold_error: str | None = None
    predicted_error: str | None = None
    match: bool = False


def locate_databases(root: Path) -> dict[str, Path]:
    """db_id → file for every `<db_id>.sqlite` up to three levels under `root`, so both BIRD's layout
    (`dev_databases/<db_id>/<db_id>.sqlite`) and Spider 2.0-Lite's flat folder work as downloaded."""
    if not root.is_dir():
        raise ConfigError(f"database folder {root} does not exist")
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.sqlite")):
        if len(path.relative_to(root).parts) > SEARCH_DEPTH:
            continue
        if path.stem in found:
            raise ConfigError(
                f"database folder {root}: two files for db_id {path.stem!r}: {found[path.stem]}, {path}"
            )
        found[path.stem] = path
    if not found:
        raise ConfigError(f"database folder {root}: no <db_id>.sqlite files")
    return found


def open_databases(
    app: FastAPI, configured: str | None, build_bundled: Callable[[Path], object], label: str
) -> dict[str, Path]:
    """db_id → file: from the configured folder (relative paths are from the project root, as NeMo Gym
    resolves them), or else the folder's bundled databases, built now into a temporary folder that is
    removed at shutdown."""
    if configured:
        root = Path(configured)
        return locate_databases(root if root.is_absolute() else PROJECT_ROOT / root)
    build_dir = Path(tempfile.mkdtemp(prefix=f"gym-{label}-"))
    app.router.on_shutdown.append(lambda: shutil.rmtree(build_dir, ignore_errors=True))
    build_bundled(build_dir)
    return locate_databases(build_dir)


def execute_and_compare(
    database: Path,
    gold_sql: str | None,
    predicted_sql: str,
    timeout_s: float,
    max_rows: int,
    compare: Callable[..., bool],
    compare_args: Sequence[Any] = (),
) -> Execution:
    """Run the gold query (if any; its rows go first to `compare`, else None) then the predicted one, each
    read-only with its own deadline; `compare(gold_rows, predicted_rows, *compare_args)`."""
    gold_rows: Rows | None = None
    if gold_sql is not None:
        try:
            gold_rows = run_query(database, gold_sql, timeout_s, max_rows)
        except QueryError as problem:
            return Execution(gold_error=str(problem))
    try:
        predicted_rows = run_query(database, predicted_sql, timeout_s, max_rows)
    except QueryError as error:
        return Execution(predicted_error=str(error))
    return Execution(match=compare(gold_rows, predicted_rows, *compare_args))


class SqlRunner:
    """Runs `execute_and_compare` in the CPU pool, at most `max_concurrency` at a time."""

    def __init__(self, timeout_s: float, max_rows: int, max_concurrency: int) -> None:
        self.timeout_s, self.max_rows = timeout_s, max_rows
        self._slots = asyncio.Semaphore(max_concurrency)

    async def run(
        self,
        database: Path,
        gold_sql: str | None,
        predicted_sql: str,
        compare: Callable[..., bool],
        compare_args: Sequence[Any] = (),
    ) -> Execution:
        # Each query stops itself at its deadline; the pool deadline is only a backstop (the base server
        # marks an answer graded by this fallback as not measured).
        backstop_s = 2 * self.timeout_s + 5
        fallback = Execution(gold_error=f"grading exceeded {backstop_s} s")
        async with self._slots:
            return await run_cpu_bound(
                execute_and_compare,
                database,
                gold_sql,
                predicted_sql,
                self.timeout_s,
                self.max_rows,
                compare,
                tuple(compare_args),
                timeout_s=backstop_s,
                on_timeout=fallback,
            )


def find_database(databases: dict[str, Path], db_id: str) -> Path:
    """The task's database file; an unknown db_id is the row's fault (422)."""
    if db_id not in databases:
        known = ", ".join(sorted(databases)[:20])
        raise GymError(422, "invalid_row", f"db_id: no database {db_id!r} (this server has {known})")
    return databases[db_id]


def execution_grade(result: Execution, gold_field: str) -> dict[str, Any]:
    """The grading fields of an executed query: reward 1.0 on a match; a gold query that failed (named by
    the row's `gold_field`) leaves the row ungraded (masked, a verifier error)."""
    if result.gold_error is not None:
        return {
            "reward": 0.0,
            "execution_match": False,
            "sql_failure": GOLD_ERROR,
            "execution_error": None,
            "mask_sample": True,
            "failure_kind": VERIFIER_ERROR,
            "failure_reason": f"{gold_field}: {result.gold_error}",
        }
    return {
        "reward": 1.0 if result.match else 0.0,
        "execution_match": result.match,
        "sql_failure": NONE if result.match else EXECUTION_ERROR,
        "execution_error": result.predicted_error,
    }
