"""text_to_sql's SQLite side: build the task databases, and grade an answer (find its SQL, run it
read-only with limits, compare its rows with the gold query's).

Grading runs in a CPU-pool worker. The predicted query is untrusted, so it runs on a connection that cannot
write: the database is opened with `mode=ro`, `PRAGMA query_only` is on, and an authorizer allows only
reading (no ATTACH, PRAGMA, writes, or load_extension). A progress handler ends it at its deadline, and
no more than `max_rows` rows (nor values longer than MAX_VALUE_BYTES) are ever materialised.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nemo_gym.config_types import ConfigError
from nemo_gym.text.extraction import closed_fenced_blocks, one_line

PROGRESS_STEPS = 10_000
MAX_VALUE_BYTES = 1_000_000
FLOAT_DIGITS = 6
ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
DENIED_FUNCTIONS = {"load_extension"}
CLOSING = {"'": "'", '"': '"', "`": "`", "[": "]"}


class QueryError(Exception):
    """The query could not run to completion within the limits; the message says why, on one line."""


@dataclass(frozen=True)
class SqlGrade:
    extracted_sql: str | None
    execution_error: str | None
    result_match: bool
    gold_problem: str | None = None


def prepare_databases(source: Path, build_dir: Path) -> dict[str, Path]:
    """db_id → database file: each `<db_id>.sql` script built into `build_dir`, each `<db_id>.sqlite` as is."""
    databases = {path.stem: path for path in sorted(source.glob("*.sqlite"))}
    for script in sorted(source.glob("*.sql")):
        built = build_dir / f"{script.stem}.sqlite"
        try:
            with closing(sqlite3.connect(built)) as connection:
                connection.executescript(script.read_text())
        except (sqlite3.Error, UnicodeDecodeError) as error:
            raise ConfigError(f"database script {script}: {error}") from None
        databases[script.stem] = built
    if not databases:
        raise ConfigError(f"database_dir {source}: no <db_id>.sql or <db_id>.sqlite files")
    return databases


def extract_sql(text: str) -> str | None:
    """The last closed ```sql block; else the last closed unlabelled block; else the whole text. Stripped
    of surrounding space and trailing semicolons; None when nothing is left."""
    labelled: dict[str, list[str]] = {"sql": [], "": []}
    for label, body in closed_fenced_blocks(text):
        if label in labelled:
            labelled[label].append(body)
    blocks = labelled["sql"] or labelled[""]
    sql = (blocks[-1] if blocks else text).strip().rstrip(";").strip()
    return sql or None


def top_level_text(sql: str) -> str:
    """`sql` with quoted strings, identifiers, comments and everything inside parentheses blanked out."""
    kept, depth, index = [], 0, 0
    while index < len(sql):
        char = sql[index]
        if char in CLOSING:
            index = _after(sql, CLOSING[char], index + 1)
        elif sql.startswith("--", index):
            index = _after(sql, "\n", index)
        elif sql.startswith("/*", index):
            index = _after(sql, "*/", index + 2)
        else:
            depth += (char == "(") - (char == ")")
            kept.append(char if depth == 0 and char != ")" else " ")
            index += 1
            continue
        kept.append(" ")
    return "".join(kept)


def _after(sql: str, closing: str, start: int) -> int:
    end = sql.find(closing, start)
    return len(sql) if end < 0 else end + len(closing)


def orders_rows(sql: str) -> bool:
    """Whether the query's own result is ordered: an ORDER BY outside every parenthesis (one in a
    subquery or a window does not order the result)."""
    return ORDER_BY.search(top_level_text(sql)) is not None


def _read_only(
    action: int, first: str | None, second: str | None, database: str | None, source: str | None
) -> int:
    if action in READ_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and (second or "").lower() not in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _lenient_text(raw: bytes) -> str:
    """Some published databases hold text that is not valid UTF-8; both queries see it the same way."""
    return raw.decode(errors="replace")


def read_only_connection(database: Path, deadline: float) -> sqlite3.Connection:
    """A connection that can only read `database`, and aborts any statement still running at `deadline`."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, isolation_level=None)
    connection.text_factory = _lenient_text
    connection.execute("PRAGMA query_only = ON")
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    connection.set_authorizer(_read_only)
    connection.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
    return connection


def run_query(database: Path, sql: str, timeout_s: float, max_rows: int) -> list[tuple[Any, ...]]:
    """The rows `sql` returns on a read-only connection; QueryError past the deadline or the row cap."""
    deadline = time.monotonic() + timeout_s
    try:
        with closing(read_only_connection(database, deadline)) as connection:
            rows = connection.execute(sql).fetchmany(max_rows + 1)
    except (sqlite3.Error, ValueError) as error:  # ValueError: NUL or unencodable characters in the query
        if time.monotonic() > deadline:
            raise QueryError(f"ran longer than {timeout_s} s") from None
        raise QueryError(one_line(f"{type(error).__name__}: {error}")) from None
    if len(rows) > max_rows:
        raise QueryError(f"returned more than {max_rows} rows")
    return rows


def normalized(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Floats rounded so that sums taken in another order still compare equal (1 and 1.0 already do)."""
    return [
        tuple(round(value, FLOAT_DIGITS) if isinstance(value, float) else value for value in row)
        for row in rows
    ]


def same_results(gold: list[tuple[Any, ...]], predicted: list[tuple[Any, ...]], ordered: bool) -> bool:
    """Equal as sequences when the gold query orders its rows, else as multisets (column names ignored)."""
    gold, predicted = normalized(gold), normalized(predicted)
    return gold == predicted if ordered else Counter(gold) == Counter(predicted)


def grade_sql(database: Path, gold_sql: str, answer: str, timeout_s: float, max_rows: int) -> SqlGrade:
    """Run the gold query first (a failing gold query is the row's fault), then the extracted answer."""
    extracted = extract_sql(answer)
    try:
        gold_rows = run_query(database, gold_sql, timeout_s, max_rows)
    except QueryError as problem:
        return SqlGrade(extracted, None, False, gold_problem=str(problem))
    if extracted is None:
        return SqlGrade(None, "no SQL in the answer", False)
    try:
        predicted_rows = run_query(database, extracted, timeout_s, max_rows)
    except QueryError as error:
        return SqlGrade(extracted, str(error), False)
    return SqlGrade(extracted, None, same_results(gold_rows, predicted_rows, orders_rows(gold_sql)))
