"""The per-row bookkeeping of a collection (task indices, rollout counters, finished pairs, failed
attempts) in a temporary SQLite file, so memory does not grow with the dataset."""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY


class CollectionLedger:
    """Task indices of seen lines, rollout counters, finished pairs and failed attempts, in SQLite.

    A million-row dataset would need hundreds of MB in Python dicts; here it costs a temporary file.
    """

    def __init__(self) -> None:
        self._directory = tempfile.TemporaryDirectory(prefix="gym-collect-")
        self._db = sqlite3.connect(Path(self._directory.name) / "ledger.sqlite3", isolation_level=None)
        self._db.executescript(
            """
            PRAGMA journal_mode = OFF;
            PRAGMA synchronous = OFF;
            CREATE TABLE line_tasks (digest BLOB PRIMARY KEY, task INTEGER) WITHOUT ROWID;
            CREATE TABLE rollout_counters (task INTEGER PRIMARY KEY, next_rollout INTEGER);
            CREATE TABLE done (task INTEGER, rollout INTEGER, PRIMARY KEY (task, rollout)) WITHOUT ROWID;
            CREATE TABLE positions (
                task INTEGER, rollout INTEGER, file INTEGER, offset INTEGER, PRIMARY KEY (task, rollout)
            ) WITHOUT ROWID;
            CREATE TABLE failed (
                task INTEGER, rollout INTEGER, agent TEXT, class TEXT, attempts INTEGER, terminal INTEGER,
                PRIMARY KEY (task, rollout)
            ) WITHOUT ROWID;
            BEGIN;
            """
        )
        self._next_task = 0

    def close(self) -> None:
        self._db.close()
        self._directory.cleanup()

    def commit(self) -> None:
        """Batch writes in one transaction (SQLite is slow per-commit); reads see uncommitted rows."""
        self._db.execute("COMMIT")
        self._db.execute("BEGIN")

    def task_of_line(self, line: bytes) -> int:
        """Identical raw lines share a task index; new lines get the next one in first-seen order."""
        digest = hashlib.blake2b(line, digest_size=16).digest()
        found = self._db.execute("SELECT task FROM line_tasks WHERE digest = ?", (digest,)).fetchone()
        if found:
            return found[0]
        task = self._next_task
        self._next_task += 1
        self._db.execute("INSERT INTO line_tasks VALUES (?, ?)", (digest, task))
        return task

    def next_rollout(self, task: int) -> int:
        """The running rollout counter of a task (it continues across duplicate lines)."""
        found = self._db.execute(
            "SELECT next_rollout FROM rollout_counters WHERE task = ?", (task,)
        ).fetchone()
        rollout = found[0] if found else 0
        self._db.execute("INSERT OR REPLACE INTO rollout_counters VALUES (?, ?)", (task, rollout + 1))
        return rollout

    def mark_done(self, key: tuple[int, int]) -> bool:
        """False if the pair already had a result (a duplicate to drop)."""
        return self._db.execute("INSERT OR IGNORE INTO done VALUES (?, ?)", key).rowcount == 1

    def record_position(self, key: tuple[int, int], file_index: int, offset: int) -> bool:
        """Remember where a result line is; False if the pair already has one (a duplicate)."""
        if not self.mark_done(key):
            return False
        self._db.execute("INSERT INTO positions VALUES (?, ?, ?, ?)", (*key, file_index, offset))
        return True

    def positions_in_order(self) -> Iterator[tuple[int, int]]:
        """(file index, byte offset) of every recorded result, by (task, rollout)."""
        yield from self._db.execute("SELECT file, offset FROM positions ORDER BY task, rollout")

    def is_done(self, key: tuple[int, int]) -> bool:
        return (
            self._db.execute("SELECT 1 FROM done WHERE task = ? AND rollout = ?", key).fetchone() is not None
        )

    def record_failure(
        self, key: tuple[int, int], agent: str | None, failure_class: str, terminal: bool
    ) -> None:
        self._db.execute(
            """INSERT INTO failed VALUES (?, ?, ?, ?, 1, ?)
               ON CONFLICT (task, rollout) DO UPDATE SET
                 class = excluded.class, attempts = attempts + 1, terminal = terminal OR excluded.terminal""",
            (*key, agent, failure_class, int(terminal)),
        )

    def failed_attempts(self, key: tuple[int, int]) -> tuple[int, bool]:
        """(failed attempts so far, whether the last failure ruled out a retry)."""
        found = self._db.execute("SELECT attempts, terminal FROM failed WHERE task = ? AND rollout = ?", key)
        row = found.fetchone()
        return (row[0], bool(row[1])) if row else (0, False)

    def unresolved_failure_records(self) -> Iterator[dict[str, Any]]:
        """One record (the latest class) per pair that failed and still has no result."""
        rows = self._db.execute(
            """SELECT task, rollout, agent, class FROM failed
               WHERE NOT EXISTS (SELECT 1 FROM done WHERE done.task = failed.task AND done.rollout = failed.rollout)
               ORDER BY task, rollout"""
        )
        for task, rollout, agent, failure_class in rows:
            yield {
                TASK_INDEX_KEY: task,
                ROLLOUT_INDEX_KEY: rollout,
                AGENT_REF_KEY: {"name": agent},
                FAILURE_CLASS_KEY: failure_class,
            }

    def retryable_unresolved(self, max_attempts: int) -> int:
        """Pairs without a result that a resume would run again: no terminal failure, attempts left."""
        (count,) = self._db.execute(
            """SELECT COUNT(*) FROM failed
               WHERE NOT terminal AND attempts < ?
               AND NOT EXISTS (SELECT 1 FROM done WHERE done.task = failed.task AND done.rollout = failed.rollout)""",
            (max_attempts,),
        ).fetchone()
        return count

    def unresolved_failures(self) -> dict[str, Counter[str]]:
        """Per agent, the latest failure class of every pair that still has no result."""
        counts: dict[str, Counter[str]] = {}
        for record in self.unresolved_failure_records():
            counts.setdefault(agent_name_of(record) or "", Counter())[record[FAILURE_CLASS_KEY]] += 1
        return counts
