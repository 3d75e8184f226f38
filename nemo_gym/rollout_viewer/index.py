"""An in-memory index of a results file and its sidecars, for paging, filtering and searching rollouts.

The index keeps one small summary per line (where the line starts, its indices, reward, token counts,
failure class and a short preview), never the lines themselves: a detail view reads its line again from
disk. It is built by a background thread, so the first page of a 100k-line file is served while the rest
is still being read; queries see the lines read so far and say whether the index is complete.

Files, for `out/r.jsonl` (the names rollout collection writes):
    out/r.jsonl                       results: one summary each
    out/r_failures.jsonl              failed attempts: a rollout with no result is listed as failed, and a
                                      result shows the attempts that failed before it
    out/r_materialized_inputs.jsonl   what was asked, shown for a failed rollout
    out/r_aggregate_metrics.json      shown as it is
"""

from __future__ import annotations

import bisect
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import orjson
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.rollout_viewer.records import RolloutSummary, detail, integer, summarize

MAX_UNREADABLE_REPORTED = 5
FIRST_PAGE_WAIT_S = 1.5
SEARCH_CHUNK_BYTES = 16 * 1024 * 1024
PASS_RATE_BINS = 11  # 0 %, 10 %, ..., 100 %

RESULT, FAILURE = "result", "failure"
SortKey = Literal["line", "task", "reward", "input_tokens", "output_tokens", "tool_calls"]


class Entry(NamedTuple):
    """Where a listed line is, and its summary."""

    source: str
    line: int
    offset: int
    summary: RolloutSummary

    def listed(self, row_id: int) -> dict[str, Any]:
        return {
            "id": row_id,
            "source": self.source,
            "line": self.line,
            "offset": self.offset,
        } | self.summary._asdict()


def sort_value(sort: str) -> Callable[[Entry], Any]:
    if sort == "task":
        return lambda entry: (
            None if entry.summary.task is None else (entry.summary.task, entry.summary.rollout or 0)
        )
    return lambda entry: getattr(entry.summary, sort)


def whole_line_chunks(path: Path, end: int) -> Iterator[tuple[int, bytes]]:
    """`path` up to byte `end` in lower-cased pieces of about SEARCH_CHUNK_BYTES that end at a line end,
    each with the offset where it starts."""
    base = 0
    with path.open("rb") as file:
        while base < end:
            chunk = file.read(min(SEARCH_CHUNK_BYTES, end - base))
            if not chunk:
                return
            cut = chunk.rfind(b"\n") + 1 if base + len(chunk) < end else len(chunk)
            cut = cut or len(chunk)
            file.seek(base + cut)
            yield base, chunk[:cut].lower()
            base += cut


class RolloutQuery(BaseModel):
    """Which rollouts a list shows, in which order, and which page of them."""

    model_config = ConfigDict(extra="forbid")

    offset: int = Field(default=0, ge=0, description="rows to skip")
    limit: int = Field(default=50, ge=1, le=1000, description="rows to return")
    sort: SortKey = Field(default="line", description="order of the list")
    order: Literal["asc", "desc"] = "asc"
    reward_min: float | None = Field(default=None, allow_inf_nan=False)
    reward_max: float | None = Field(default=None, allow_inf_nan=False)
    failed: bool | None = Field(default=None, description="true: only failed rollouts; false: none of them")
    task: int | None = Field(default=None, ge=0)
    agent: str | None = Field(default=None, max_length=500)
    q: str | None = Field(default=None, max_length=500, description="text the rollout's JSON line contains")


class TaskQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    offset: int = Field(default=0, ge=0)
    limit: int = Field(default=100, ge=1, le=1000)
    sort: Literal["task", "pass_rate"] = "task"
    order: Literal["asc", "desc"] = "asc"


@dataclass
class Unreadable:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, where: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_UNREADABLE_REPORTED:
            self.examples.append(where)


class RolloutIndex:
    def __init__(self, results: Path, pass_threshold: float = 1.0) -> None:
        self.files = CollectionPaths.for_output(results)
        self.pass_threshold = pass_threshold
        self.entries: list[Entry] = []
        self.complete = False
        self.bytes_total = results.stat().st_size
        self.bytes_read = 0
        self.unreadable = Unreadable()
        self.failed_attempts: dict[tuple[int, int], list[Entry]] = {}
        self.task_rows: dict[tuple[int, int], int] = {}
        self.aggregate_metrics, self.aggregate_metrics_error = self._read_aggregate_metrics()
        self._result_offsets: list[int] = []
        self._result_ends: list[int] = []
        self._grew = threading.Condition()
        self._search_cache: tuple[tuple[str, int], set[int]] | None = None
        self._order_cache: dict[tuple[str, str, int], list[int]] = {}

    # ---- building ----------------------------------------------------------------------------------------

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.build, name="rollout-index", daemon=True)
        thread.start()
        return thread

    def build(self) -> None:
        """Read the failures, then the results (listing each as soon as it is read), then list the failed
        rollouts that never got a result and find what they were asked."""
        try:
            for entry in self._read_lines(self.files.failures, FAILURE):
                if entry.summary.task is not None and entry.summary.rollout is not None:
                    self.failed_attempts.setdefault((entry.summary.task, entry.summary.rollout), []).append(
                        entry
                    )
            finished: set[tuple[int | None, int | None]] = set()
            for entry in self._read_lines(self.files.output, RESULT, track_bytes=True):
                finished.add((entry.summary.task, entry.summary.rollout))
                self._append(entry)
            unresolved = [
                attempts[-1] for key, attempts in self.failed_attempts.items() if key not in finished
            ]
            for entry in sorted(unresolved, key=lambda entry: entry.line):
                self._append(entry)
            if unresolved:
                self._find_task_rows({(entry.summary.task, entry.summary.rollout) for entry in unresolved})
        finally:
            with self._grew:
                self.complete = True
                self._grew.notify_all()

    def _append(self, entry: Entry) -> None:
        with self._grew:
            if entry.source == RESULT:
                self._result_offsets.append(entry.offset)
                self._result_ends.append(self.bytes_read)
            self.entries.append(entry)
            self._grew.notify_all()

    def _read_lines(self, path: Path, source: str, track_bytes: bool = False) -> Iterator[Entry]:
        """Summaries of the whole lines of `path`; an unreadable line is counted and skipped, and an
        unfinished last line (a run still writing, or killed mid-write) is left out."""
        if not path.is_file():
            return
        offset = 0
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                start, offset = offset, offset + len(raw)
                if track_bytes:
                    self.bytes_read = offset
                if not raw.endswith(b"\n") or not raw.strip():
                    continue
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError as error:
                    self.unreadable.add(f"{path.name}:{number}: not valid JSON ({error})")
                    continue
                if not isinstance(record, dict):
                    self.unreadable.add(f"{path.name}:{number}: not a JSON object")
                    continue
                yield Entry(source, number, start, summarize(record))

    def _find_task_rows(self, keys: set[tuple[int | None, int | None]]) -> None:
        path = self.files.materialized
        if not path.is_file():
            return
        offset = 0
        with path.open("rb") as lines:
            for raw in lines:
                start, offset = offset, offset + len(raw)
                try:
                    row = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(row, dict):
                    key = (integer(row.get(TASK_INDEX_KEY)), integer(row.get(ROLLOUT_INDEX_KEY)))
                    if key in keys:
                        self.task_rows[key] = start  # type: ignore[index]

    def _read_aggregate_metrics(self) -> tuple[Any, str | None]:
        path = self.files.aggregate_metrics
        if not path.is_file():
            return None, None
        try:
            return orjson.loads(path.read_bytes()), None
        except orjson.JSONDecodeError as error:
            return None, f"{path}: not valid JSON ({error})"

    # ---- reading -----------------------------------------------------------------------------------------

    def wait_for(self, count: int, timeout_s: float = FIRST_PAGE_WAIT_S) -> None:
        """Give the builder a moment to read the rows a page needs (the first page of a large file)."""
        with self._grew:
            self._grew.wait_for(lambda: self.complete or len(self.entries) >= count, timeout_s)

    def _named_files(self) -> dict[str, Path]:
        files = self.files
        return {
            "results": files.output,
            "failures": files.failures,
            "materialized_inputs": files.materialized,
            "aggregate_metrics": files.aggregate_metrics,
        }

    def summary(self) -> dict[str, Any]:
        entries = self.entries[: len(self.entries)]
        rewards = [entry.summary.reward for entry in entries if entry.summary.reward is not None]
        failures: dict[str, int] = {}
        for entry in entries:
            if entry.summary.failure:
                failures[entry.summary.failure] = failures.get(entry.summary.failure, 0) + 1
        return {
            "files": {name: str(path) for name, path in self._named_files().items() if path.exists()},
            "complete": self.complete,
            "progress": 1.0 if self.complete or not self.bytes_total else self.bytes_read / self.bytes_total,
            "rollouts": len(entries),
            "results": sum(1 for entry in entries if entry.source == RESULT),
            "failed": sum(failures.values()),
            "failed_attempts": sum(len(attempts) for attempts in self.failed_attempts.values()),
            "failure_classes": dict(sorted(failures.items(), key=lambda item: -item[1])),
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "agents": sorted({entry.summary.agent for entry in entries if entry.summary.agent}),
            "tasks": len({entry.summary.task for entry in entries if entry.summary.task is not None}),
            "pass_threshold": self.pass_threshold,
            "unreadable_lines": {"count": self.unreadable.count, "examples": self.unreadable.examples},
            "aggregate_metrics": self.aggregate_metrics,
            "aggregate_metrics_error": self.aggregate_metrics_error,
        }

    def rollouts(self, query: RolloutQuery) -> dict[str, Any]:
        self.wait_for(query.offset + query.limit)
        entries = self.entries[: len(self.entries)]
        matches = self._search(query.q) if query.q else None
        checks = self._checks(query)
        order = self._order(entries, query.sort, query.order)
        chosen = [
            row_id
            for row_id in order
            if (matches is None or row_id in matches) and all(check(entries[row_id]) for check in checks)
        ]
        page = chosen[query.offset : query.offset + query.limit]
        return {
            "total": len(chosen),
            "complete": self.complete,
            "rows": [entries[row_id].listed(row_id) for row_id in page],
        }

    @staticmethod
    def _checks(query: RolloutQuery) -> list[Callable[[Entry], bool]]:
        checks: list[Callable[[Entry], bool]] = []
        if query.reward_min is not None:
            checks.append(lambda e: e.summary.reward is not None and e.summary.reward >= query.reward_min)  # type: ignore[operator]
        if query.reward_max is not None:
            checks.append(lambda e: e.summary.reward is not None and e.summary.reward <= query.reward_max)  # type: ignore[operator]
        if query.failed is not None:
            checks.append(lambda e: (e.summary.failure is not None) == query.failed)
        if query.task is not None:
            checks.append(lambda e: e.summary.task == query.task)
        if query.agent:
            checks.append(lambda e: e.summary.agent == query.agent)
        return checks

    def _order(self, entries: list[Entry], sort: str, order: str) -> list[int]:
        """Row ids in the requested order; values that are missing come last either way."""
        cache_key = (sort, order, len(entries))
        if cached := self._order_cache.get(cache_key):
            return cached
        if sort == "line":
            ids = list(range(len(entries)))
            if order == "desc":
                ids.reverse()
        else:
            value = sort_value(sort)
            present: list[int] = []
            missing: list[int] = []
            for row_id, entry in enumerate(entries):
                (missing if value(entry) is None else present).append(row_id)
            present.sort(key=lambda row_id: value(entries[row_id]), reverse=order == "desc")
            ids = present + missing
        self._order_cache = {cache_key: ids}
        return ids

    def _search(self, text: str) -> set[int]:
        """Rows whose raw JSON line contains `text`, ignoring ASCII case. The text is looked for as JSON
        writes it, so quotes and line breaks in it match those in the rollout's strings."""
        cache_key = (text, len(self.entries))
        if self._search_cache and self._search_cache[0] == cache_key:
            return self._search_cache[1]
        needle = json.dumps(text, ensure_ascii=False)[1:-1].encode().lower()
        found: set[int] = set()
        result_count = len(self._result_offsets)
        if result_count:
            for base, chunk in whole_line_chunks(self.files.output, self._result_ends[result_count - 1]):
                position = chunk.find(needle)
                while position >= 0:
                    row = bisect.bisect_right(self._result_offsets, base + position, 0, result_count) - 1
                    if row >= 0 and base + position < self._result_ends[row]:
                        found.add(row)
                        resume = self._result_ends[row] - base
                    else:  # inside a line that is not listed (unreadable)
                        resume = chunk.find(b"\n", position) + 1 or len(chunk)
                    position = chunk.find(needle, resume)
        entries = self.entries[: len(self.entries)]
        if len(entries) > result_count:  # the failed rollouts, listed after the results
            with self.files.failures.open("rb") as failures:
                for row_id in range(result_count, len(entries)):
                    failures.seek(entries[row_id].offset)
                    if needle in failures.readline().lower():
                        found.add(row_id)
        self._search_cache = (cache_key, found)
        return found

    def _raw_line(self, entry: Entry) -> bytes:
        path = self.files.output if entry.source == RESULT else self.files.failures
        with path.open("rb") as file:
            file.seek(entry.offset)
            return file.readline()

    def rollout(self, row_id: int) -> dict[str, Any] | None:
        """The full view of one listed rollout, read again from disk; None for an id not listed (yet)."""
        if not 0 <= row_id < len(self.entries):
            return None
        entry = self.entries[row_id]
        record = orjson.loads(self._raw_line(entry))
        key = (entry.summary.task, entry.summary.rollout)
        task_row = None
        if entry.source == FAILURE and key in self.task_rows:
            with self.files.materialized.open("rb") as file:
                file.seek(self.task_rows[key])  # type: ignore[index]
                task_row = orjson.loads(file.readline())
        shown = detail(record, task_row)
        shown |= {"id": row_id, "source": entry.source, "line": entry.line}
        earlier = self.failed_attempts.get(key, []) if None not in key else []  # type: ignore[arg-type]
        if entry.source == FAILURE:
            earlier = earlier[:-1]  # the last attempt is the one shown
        shown["failed_attempts"] = [
            {"line": attempt.line, "failure": attempt.summary.failure, "message": attempt.summary.preview}
            for attempt in earlier
        ]
        shown["raw"] = record
        return shown

    # ---- per-task pass rates -----------------------------------------------------------------------------

    def task_stats(self) -> tuple[list[dict[str, Any]], list[int]]:
        """Per task: rollouts, how many passed (reward at least `pass_threshold`), mean reward, failures;
        and how many tasks fall in each tenth of pass rate."""
        per_task: dict[int, list[Any]] = {}  # task -> [rollouts, passed, rewards, reward sum, failed]
        for entry in self.entries[: len(self.entries)]:
            summary = entry.summary
            if summary.task is None:
                continue
            stats = per_task.setdefault(summary.task, [0, 0, 0, 0.0, 0])
            stats[0] += 1
            if summary.reward is not None:
                stats[1] += summary.reward >= self.pass_threshold
                stats[2] += 1
                stats[3] += summary.reward
            stats[4] += summary.failure is not None
        rows = [
            {
                "task": task,
                "rollouts": rollouts,
                "passed": passed,
                "pass_rate": passed / rollouts,
                "mean_reward": reward_sum / rewarded if rewarded else None,
                "failed": failed,
            }
            for task, (rollouts, passed, rewarded, reward_sum, failed) in sorted(per_task.items())
        ]
        histogram = [0] * PASS_RATE_BINS
        for row in rows:
            histogram[round(row["pass_rate"] * (PASS_RATE_BINS - 1))] += 1
        return rows, histogram

    def tasks(self, query: TaskQuery) -> dict[str, Any]:
        rows, histogram = self.task_stats()
        rows.sort(key=lambda row: (row[query.sort], row["task"]), reverse=query.order == "desc")
        return {
            "total": len(rows),
            "complete": self.complete,
            "histogram": histogram,
            "pass_threshold": self.pass_threshold,
            "rows": rows[query.offset : query.offset + query.limit],
        }
