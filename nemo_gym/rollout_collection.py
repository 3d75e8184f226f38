"""Rollout collection: run a JSONL dataset through agents' `/run` and keep every result.

`gym collect` (and the trainer-facing `RolloutCollectionHelper`) works as a bounded pipeline: rows are
read from the materialized inputs one at a time, at most `num_samples_in_parallel` rollouts are in flight,
and each result is appended to the output as one whole line the moment it completes. Memory therefore
does not grow with the dataset: the only per-row state is a small on-disk ledger of task indices and
finished (task, rollout) pairs.

A rollout that fails (HTTP error, deadline, connection, unusable answer) becomes a record in the failures
file with its class, message and attempt number; collection goes on. `resume_from_cache=true` runs
exactly the (task, rollout) pairs that have no result yet, even after a `kill -9`.

Files, for `output_jsonl_fpath = out/r.jsonl`:
    out/r_materialized_inputs.jsonl   every rollout to run (row + agent_ref + _ng_task_index/_ng_rollout_index)
    out/r.jsonl                       results, in completion order
    out/r_failures.jsonl              one line per failed attempt
    out/r_aggregate_metrics.json      per agent: agent_metrics, key_metrics, group_level_metrics
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import hashlib
import itertools
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiohttp
import orjson
from pydantic import Field, field_validator

from nemo_gym.config_types import (
    AGENT_REF_KEY,
    AggregateMetrics,
    BaseNeMoGymCLIConfig,
    BaseServerConfig,
    ConfigError,
    ServerRefNotFoundError,
)
from nemo_gym.global_config import command_settings, locate_data_file, parse_global_config_dict
from nemo_gym.http_client import (
    DeadlineExceededError,
    RequestFailedError,
    RetryPolicy,
    default_retry_policy,
    raise_for_status,
    request,
)
from nemo_gym.jsonl import (
    FAILURE_CLASS_KEY,
    ROLLOUT_INDEX_KEY,
    TASK_INDEX_KEY,
    LineAppender,
    drop_torn_tail,
    iter_jsonl,
    rollout_key,
    write_atomically,
)
from nemo_gym.prompt_config import PromptTemplates
from nemo_gym.reward_profile import failure_metrics
from nemo_gym.server_utils import ServerClient, configure_http_client_from, head_server_config_from
from nemo_gym.wandb_logging import WandbRun

FAILURE_MESSAGE_KEY = "_ng_failure_message"
FAILURE_ATTEMPT_KEY = "_ng_failure_attempt"
FAILURE_STATUS_KEY = "_ng_failure_status"
FAILURE_TERMINAL_KEY = "_ng_failure_terminal"
NO_PERSIST_KEY = "_ng_no_persist"
MAX_ATTEMPTS_ENV_VAR_NAME = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_IN_FLIGHT = 1024
# The agent's own rollout deadline defaults to the global HTTP deadline; the collector waits a little
# longer, so the agent's structured 504 arrives before the collector gives up on its own.
COLLECTOR_DEADLINE_MARGIN_S = 30.0
MAX_FAILURE_MESSAGE_CHARS = 500
MAX_ROWS_LISTED = 10
PROGRESS_MILESTONES_PCT = (20, 40, 60, 80, 90, 95, 98, 99, 100)
# 4xx answers that retrying could fix; any other 4xx means the row itself is wrong.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 425, 429})

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")
FailureClass = Literal["timeout", "connection", "invalid_response", "invalid_request"] | str


class RolloutCollectionConfig(BaseNeMoGymCLIConfig):
    """Run the rows of a JSONL file through agents of a running deployment (`gym run`) and write the
    results, the failures and the aggregate metrics next to `output_jsonl_fpath`."""

    input_jsonl_fpath: str = Field(description="tasks, one JSON object per line")
    output_jsonl_fpath: str = Field(description="results; sibling files get the same stem")
    agent_name: str | None = Field(default=None, description="agent for rows without agent_ref")
    limit: int | None = Field(default=None, ge=0, description="read only the first N rows (0/null: all)")
    num_repeats: int | dict[str, int] | None = Field(
        default=1, description="rollouts per row: an int, or {agent name: n, _default: n}"
    )
    num_repeats_add_seed: bool = Field(default=False, description="seed = rollout index, via metadata")
    num_samples_in_parallel: int | None = Field(
        default=None, ge=1, description=f"rollouts in flight (default {DEFAULT_MAX_IN_FLIGHT})"
    )
    responses_create_params: dict[str, Any] = Field(
        default_factory=dict, description="overrides of each row's top-level responses_create_params keys"
    )
    resume_from_cache: bool = Field(default=False, description="run only the rollouts without a result")
    overwrite: bool = Field(default=False, description="replace the results already in output_jsonl_fpath")
    prompt_config: str | None = Field(default=None, description="YAML {system?, user} prompt templates")
    rollout_timeout_s: float | None = Field(
        default=None, gt=0, description="deadline of one rollout (default: global_http_deadline_s + 30)"
    )
    disable_aggregation: bool = Field(default=False, description="skip /aggregate_metrics")
    upload_rollouts_to_wandb: bool = Field(default=True, description="with W&B configured: a rollouts table")

    @field_validator("num_repeats")
    @classmethod
    def _positive_repeats(cls, value: int | dict[str, int] | None) -> int | dict[str, int]:
        if value is None:
            return 1
        counts = value.values() if isinstance(value, dict) else [value]
        if any(count < 1 for count in counts):
            raise ValueError("every repeat count must be at least 1")
        return value


@dataclass(frozen=True)
class CollectionPaths:
    output: Path
    materialized: Path
    failures: Path
    aggregate_metrics: Path

    @classmethod
    def for_output(cls, output: str | Path) -> CollectionPaths:
        path = Path(output)
        stem = path.parent / path.stem
        return cls(
            output=path,
            materialized=Path(f"{stem}_materialized_inputs.jsonl"),
            failures=Path(f"{stem}_failures.jsonl"),
            aggregate_metrics=Path(f"{stem}_aggregate_metrics.json"),
        )


def agent_name_of(record: dict[str, Any]) -> str | None:
    ref = record.get(AGENT_REF_KEY)
    return ref.get("name") if isinstance(ref, dict) else None


# ---- the ledger: per-row bookkeeping on disk ------------------------------------------------------------


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

    def unresolved_failures(self) -> dict[str, Counter[str]]:
        """Per agent, the latest failure class of every pair that still has no result."""
        counts: dict[str, Counter[str]] = {}
        for record in self.unresolved_failure_records():
            counts.setdefault(agent_name_of(record) or "", Counter())[record[FAILURE_CLASS_KEY]] += 1
        return counts


# ---- materialisation --------------------------------------------------------------------------------------


def seeded_metadata(params: dict[str, Any], seed: int, where: str) -> dict[str, Any]:
    """`metadata` with `{"seed": seed}` merged into its `extra_body` JSON string."""
    metadata = dict(params.get("metadata") or {})
    try:
        extra_body = json.loads(metadata.get("extra_body") or "{}")
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{where}: responses_create_params.metadata.extra_body is not JSON ({error})"
        ) from error
    metadata["extra_body"] = json.dumps({**extra_body, "seed": seed})
    return metadata


def repeats_for(num_repeats: int | dict[str, int], agent: str) -> int | None:
    if isinstance(num_repeats, int):
        return num_repeats
    return num_repeats.get(agent, num_repeats.get("_default"))


def _listed(items: list[str], total: int) -> str:
    more = f" and {total - len(items)} more" if total > len(items) else ""
    return ", ".join(items) + more


def materialize(
    config: RolloutCollectionConfig, input_path: Path, paths: CollectionPaths, ledger: CollectionLedger
) -> tuple[int, set[str]]:
    """Write the materialized inputs (atomically) and return how many rollouts and which agents they use.

    Rows without an agent, or whose agent has no repeat count, are collected into one error."""
    templates = PromptTemplates.load(config.prompt_config) if config.prompt_config else None
    agents: set[str] = set()
    unrouted: list[str] = []
    unrouted_total = 0
    unrepeated: dict[str, list[str]] = {}
    written = 0

    def rows() -> Iterator[bytes]:
        nonlocal written, unrouted_total
        for number, _, raw, row in iter_jsonl(input_path, config.limit):
            where = f"{input_path}:{number}"
            if templates is not None:
                row = templates.apply(row, where)
            if AGENT_REF_KEY not in row and config.agent_name:
                row[AGENT_REF_KEY] = {"name": config.agent_name}
            agent = agent_name_of(row)
            if not agent:
                unrouted_total += 1
                if len(unrouted) < MAX_ROWS_LISTED:
                    unrouted.append(str(number))
                continue
            repeats = repeats_for(config.num_repeats, agent)
            if repeats is None:
                unrepeated.setdefault(agent, []).append(str(number))
                continue
            agents.add(agent)
            if config.responses_create_params:
                row["responses_create_params"] = {
                    **(row.get("responses_create_params") or {}),
                    **config.responses_create_params,
                }
            task = (
                row[TASK_INDEX_KEY] if isinstance(row.get(TASK_INDEX_KEY), int) else ledger.task_of_line(raw)
            )
            for _ in range(repeats):
                rollout = ledger.next_rollout(task)
                copy = {**row, TASK_INDEX_KEY: task, ROLLOUT_INDEX_KEY: rollout}
                if config.num_repeats_add_seed:
                    params = dict(copy.get("responses_create_params") or {})
                    params["metadata"] = seeded_metadata(params, rollout, where)
                    copy["responses_create_params"] = params
                written += 1
                yield orjson.dumps(copy) + b"\n"
            if written % 10_000 == 0:
                ledger.commit()

    write_atomically(paths.materialized, rows())
    if unrouted_total or unrepeated:
        paths.materialized.unlink(missing_ok=True)
    if unrouted_total:
        raise ConfigError(
            f"{input_path}: {unrouted_total} row(s) name no agent (lines {_listed(unrouted, unrouted_total)}); "
            "give each row an agent_ref or pass +agent_name=<agent instance>"
        )
    if unrepeated:
        names = ", ".join(
            f"'{agent}' (lines {_listed(lines[:MAX_ROWS_LISTED], len(lines))})"
            for agent, lines in unrepeated.items()
        )
        raise ConfigError(
            f"num_repeats has no count for agent(s) {names}; add them or a `_default` to num_repeats"
        )
    ledger.commit()
    return written, agents


# ---- running rollouts -------------------------------------------------------------------------------------


def error_message(body: bytes) -> str:
    """The useful part of an error answer: the envelope's message and its cause's, else the raw text."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", errors="replace")
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and error.get("message"):
        cause = error.get("cause")
        inner = cause.get("message") if isinstance(cause, dict) else cause if isinstance(cause, str) else None
        return f"{error['message']}: {inner}" if inner else str(error["message"])
    if isinstance(parsed, dict) and "detail" in parsed:
        return f"invalid request: {orjson.dumps(parsed['detail']).decode()}"
    return body.decode("utf-8", errors="replace")


def failure_record(
    row: dict[str, Any], failure_class: str, message: str, attempt: int, status: int | None = None
) -> dict[str, Any]:
    """The failures-file line of one failed attempt: which rollout, what went wrong, whether to retry."""
    terminal = failure_class == "invalid_request" or (
        status is not None and 400 <= status < 500 and status not in RETRYABLE_CLIENT_STATUSES
    )
    record = {
        TASK_INDEX_KEY: row.get(TASK_INDEX_KEY),
        ROLLOUT_INDEX_KEY: row.get(ROLLOUT_INDEX_KEY),
        AGENT_REF_KEY: row.get(AGENT_REF_KEY),
        FAILURE_CLASS_KEY: failure_class,
        FAILURE_MESSAGE_KEY: message[:MAX_FAILURE_MESSAGE_CHARS],
        FAILURE_ATTEMPT_KEY: attempt,
    }
    if status is not None:
        record[FAILURE_STATUS_KEY] = status
    if terminal:
        record[FAILURE_TERMINAL_KEY] = True
    return record


def status_failure_class(status: int) -> str:
    """504 and 408 mean a deadline passed somewhere downstream: they count as timeouts."""
    return "timeout" if status in (408, 504) else f"http_{status}"


class RolloutCollectionHelper:
    """Runs rows through agents' `/run` with a bounded number in flight; usable from a trainer process.

    Every row yields `(row, result)`: the agent's answer stamped with the row's indices and agent_ref, or a
    failure record (it has `_ng_failure_class`) — never an exception for a failed rollout.
    """

    def __init__(
        self,
        server_client: ServerClient | None = None,
        *,
        head_server_config: BaseServerConfig | None = None,
        max_in_flight: int | None = None,
        rollout_timeout_s: float | None = None,
    ) -> None:
        self.server_client = server_client or ServerClient.load_from_global_config(head_server_config)
        self.max_in_flight = max_in_flight or DEFAULT_MAX_IN_FLIGHT
        self.rollout_timeout_s = rollout_timeout_s or (
            default_retry_policy().deadline_s + COLLECTOR_DEADLINE_MARGIN_S
        )

    def agent_url(self, agent: str) -> str:
        return self.server_client.server_base_url(agent)

    async def run_one(self, row: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
        """One `/run`, classified: the stamped result, or a failure record."""
        agent = agent_name_of(row)
        try:
            url = self.agent_url(agent or "") + "/run"
        except ServerRefNotFoundError as error:
            return failure_record(row, "invalid_request", f"agent_ref {agent!r}: {error}", attempt)
        policy = RetryPolicy(
            max_attempts=DEFAULT_MAX_ATTEMPTS,
            deadline_s=self.rollout_timeout_s,
            connect_timeout_s=min(default_retry_policy().connect_timeout_s, self.rollout_timeout_s),
        )
        try:
            async with asyncio.timeout(self.rollout_timeout_s):
                response = await request("POST", url, json=row, retry_policy=policy, idempotent=False)
                body = await response.read()
        except (DeadlineExceededError, TimeoutError):
            return failure_record(
                row, "timeout", f"no answer from {agent} within {self.rollout_timeout_s:g}s", attempt
            )
        except (RequestFailedError, aiohttp.ClientError, OSError) as error:
            return failure_record(row, "connection", f"{agent}: {error}", attempt)
        if not 200 <= response.status < 300:
            message = error_message(body)
            return failure_record(
                row, status_failure_class(response.status), message, attempt, response.status
            )
        try:
            result = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            return failure_record(row, "invalid_response", f"{agent} answered non-JSON ({error})", attempt)
        reward = result.get("reward") if isinstance(result, dict) else None
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            return failure_record(
                row, "invalid_response", f"{agent} answered without a numeric reward", attempt
            )
        result[TASK_INDEX_KEY] = row.get(TASK_INDEX_KEY)
        result[ROLLOUT_INDEX_KEY] = row.get(ROLLOUT_INDEX_KEY)
        result[AGENT_REF_KEY] = row.get(AGENT_REF_KEY)
        return result

    async def run_examples(
        self,
        rows: Iterable[dict[str, Any]] | AsyncIterable[dict[str, Any]],
        attempt_of: Callable[[dict[str, Any]], int] | None = None,
    ) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
        """`(row, result)` in completion order. Rows are pulled only as slots free up, so `rows` may be a
        lazy iterator over any number of rows; stopping the iteration cancels what is in flight.
        `attempt_of(row)` numbers the attempt recorded in a failure (default 1)."""

        async def run(row: dict[str, Any]) -> dict[str, Any]:
            return await self.run_one(row, attempt_of(row) if attempt_of else 1)

        async with contextlib.aclosing(completed_in_any_order(rows, run, self.max_in_flight)) as pairs:
            async for pair in pairs:
                yield pair


async def completed_in_any_order(
    items: Iterable[ItemT] | AsyncIterable[ItemT],
    work: Callable[[ItemT], Awaitable[ResultT]],
    max_in_flight: int,
) -> AsyncIterator[tuple[ItemT, ResultT]]:
    """`(item, await work(item))` in completion order, with at most `max_in_flight` under way. Items are
    pulled only as slots free up (so `items` may be lazy and endless); stopping the iteration cancels
    what is in flight."""

    async def paired(item: ItemT) -> tuple[ItemT, ResultT]:
        return item, await work(item)

    pending: set[asyncio.Task[tuple[ItemT, ResultT]]] = set()
    try:
        async for item in _as_async_iterator(items):
            if len(pending) >= max_in_flight:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    yield task.result()
            pending.add(asyncio.create_task(paired(item)))
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                yield task.result()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


async def _as_async_iterator(rows: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(rows, AsyncIterable):
        async for row in rows:
            yield row
    else:
        for row in rows:
            yield row


def refuse_to_replace(paths: CollectionPaths, overwrite: bool, resumable: bool = True) -> None:
    """Records of an earlier run (results or failures) are never dropped silently: say how to keep them
    or replace them."""
    if overwrite:
        return
    earlier = [
        f"{path} already holds {count} {what}"
        for path, what in ((paths.output, "result(s)"), (paths.failures, "failure record(s)"))
        if (count := _line_count(path))
    ]
    if not earlier:
        return
    resume = ", --resume (+resume_from_cache=true) to finish that run" if resumable else ""
    raise ConfigError(
        f"{' and '.join(earlier)} of an earlier run; pass --overwrite (+overwrite=true) to replace them"
        f"{resume}, or choose another --output"
    )


def _line_count(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as lines:
        return sum(1 for line in lines if line.strip())


# ---- the collector -----------------------------------------------------------------------------------------


@dataclass
class CollectionProgress:
    """Counts as results arrive; a live bar on a terminal, milestone lines (20 %, 40 %, ...) in a log."""

    total: int
    started: float = field(default_factory=time.monotonic)
    finished: int = 0
    succeeded: int = 0
    reward_sum: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)
    _bar: Any = None
    _next_milestone: int = 0

    def __post_init__(self) -> None:
        if sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, unit="rollout", dynamic_ncols=True, mininterval=0.5)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.succeeded if self.succeeded else None

    def rate(self) -> float:
        return self.finished / max(time.monotonic() - self.started, 1e-9)

    def add(self, result: dict[str, Any]) -> None:
        self.finished += 1
        if FAILURE_CLASS_KEY in result:
            self.failures[result[FAILURE_CLASS_KEY]] += 1
        else:
            self.succeeded += 1
            self.reward_sum += float(result["reward"])
        mean = "-" if self.mean_reward is None else f"{self.mean_reward:.3f}"
        if self._bar is not None:
            self._bar.set_postfix_str(
                f"mean reward {mean}, failed {sum(self.failures.values())}", refresh=False
            )
            self._bar.update(1)
            return
        passed = self._next_milestone
        while (
            passed < len(PROGRESS_MILESTONES_PCT)
            and self.finished * 100 >= PROGRESS_MILESTONES_PCT[passed] * self.total
        ):
            passed += 1
        if passed > self._next_milestone:
            self._next_milestone = passed
            print(
                f"collect: {PROGRESS_MILESTONES_PCT[passed - 1]}% ({self.finished}/{self.total}), "
                f"{self.rate():.1f} rollouts/s, mean reward {mean}, failed {sum(self.failures.values())}",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def stripped_for_aggregation(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its heavy parts: no request params, and of the response only its usage."""
    light = {
        key: value for key, value in result.items() if key not in ("responses_create_params", "response")
    }
    response = result.get("response")
    if isinstance(response, dict) and "usage" in response:
        light["response"] = {"usage": response["usage"]}
    return light


def max_rollout_attempts() -> int:
    raw = os.environ.get(MAX_ATTEMPTS_ENV_VAR_NAME, str(DEFAULT_MAX_ATTEMPTS))
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{MAX_ATTEMPTS_ENV_VAR_NAME} must be a whole number >= 1, got {raw!r}")
    return int(raw)


@dataclass
class CollectionSummary:
    paths: CollectionPaths
    to_run: int
    already_done: int
    progress: CollectionProgress
    unresolved_failures: dict[str, Counter[str]]
    aggregates: list[dict[str, Any]]
    aggregation_error: str | None = None

    @property
    def exit_code(self) -> int:
        failed = any(sum(classes.values()) for classes in self.unresolved_failures.values())
        return 1 if failed or self.aggregation_error else 0

    def lines(self) -> list[str]:
        progress = self.progress
        elapsed = time.monotonic() - progress.started
        lines = [
            f"Ran {progress.finished} rollout(s) in {elapsed:.1f}s ({progress.rate():.1f}/s): "
            f"{progress.succeeded} succeeded, {sum(progress.failures.values())} failed"
            + (f"; {self.already_done} already done before this run" if self.already_done else "")
        ]
        if progress.failures:
            by_class = ", ".join(f"{name} {count}" for name, count in progress.failures.most_common())
            lines.append(f"Failures by class: {by_class}")
        for entry in self.aggregates:
            shown = ", ".join(f"{key} {_fmt(value)}" for key, value in sorted(entry["key_metrics"].items()))
            lines.append(f"{entry[AGENT_REF_KEY]['name']}: {shown or 'no metrics'}")
        if self.aggregation_error:
            lines.append(f"Aggregation failed: {self.aggregation_error}")
        unresolved = sum(sum(classes.values()) for classes in self.unresolved_failures.values())
        if unresolved:
            lines.append(
                f"{unresolved} rollout(s) have no result; rerun with +resume_from_cache=true to retry them "
                f"(up to {MAX_ATTEMPTS_ENV_VAR_NAME} attempts each)"
            )
        lines.append(f"Results: {self.paths.output}")
        lines.append(f"Failures: {self.paths.failures}")
        lines.append(f"Materialized inputs: {self.paths.materialized}")
        if self.aggregates:
            lines.append(f"Aggregate metrics: {self.paths.aggregate_metrics}")
        return lines


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


async def aggregate_results(
    results: Iterable[dict[str, Any]],
    failures: Iterable[dict[str, Any]],
    server_client: ServerClient,
    destination: Path,
) -> list[dict[str, Any]]:
    """One `/aggregate_metrics` per agent over its results and its unresolved failures (which the servers
    count but keep out of the statistics), written to `destination`. The request bodies are assembled on
    disk, never as a list of parsed results."""
    failure_classes: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="gym-aggregate-") as scratch:
        bodies: dict[str, Any] = {}
        try:
            for record in itertools.chain(results, failures):
                agent = agent_name_of(record) or ""
                if agent not in bodies:
                    bodies[agent] = (Path(scratch) / f"{len(bodies)}.json").open("wb")
                    bodies[agent].write(b'{"verify_responses":[')
                else:
                    bodies[agent].write(b",")
                bodies[agent].write(orjson.dumps(stripped_for_aggregation(record)))
                if FAILURE_CLASS_KEY in record:
                    failure_classes.setdefault(agent, Counter())[record[FAILURE_CLASS_KEY]] += 1
        finally:
            for body in bodies.values():
                body.write(b"]}")
                body.close()
        entries = []
        for agent in sorted(bodies):
            response = await server_client.post(
                agent, "/aggregate_metrics", data=Path(bodies[agent].name).read_bytes(),
                headers={"Content-Type": "application/json"}, idempotent=True,
            )  # fmt: skip
            await raise_for_status(response)
            metrics = AggregateMetrics.model_validate_json(await response.read())
            counts = failure_metrics(failure_classes.get(agent, Counter()))
            for key, value in counts.items():  # servers that predate failure records do not count them
                metrics.agent_metrics.setdefault(key, value)
            if counts["num_failed_rollouts"]:
                metrics.key_metrics.update(counts)
            entries.append({AGENT_REF_KEY: {"name": agent}, **metrics.model_dump()})
    write_atomically(destination, [json.dumps(entries, indent=2).encode()])
    return entries


class RolloutCollector:
    """`gym collect`: materialize, run what is missing through a bounded pipeline, aggregate."""

    def __init__(self, config: RolloutCollectionConfig, helper: RolloutCollectionHelper) -> None:
        self.config = config
        self.helper = helper
        self.paths = CollectionPaths.for_output(config.output_jsonl_fpath)
        self._already_done = 0

    async def collect(self) -> CollectionSummary:
        input_path = locate_data_file(self.config.input_jsonl_fpath, "input_jsonl_fpath")
        self.paths.output.parent.mkdir(parents=True, exist_ok=True)
        max_attempts = max_rollout_attempts()
        ledger = CollectionLedger()
        try:
            resuming = (
                self.config.resume_from_cache
                and self.paths.materialized.exists()
                and self.paths.output.exists()
            )
            if self.config.resume_from_cache and not resuming:
                print("resume_from_cache: no earlier materialized inputs and results here; starting afresh.")
            if resuming:
                agents = self._load_earlier_run(ledger)
            else:
                refuse_to_replace(self.paths, self.config.overwrite)
                for path in (
                    self.paths.output,
                    self.paths.failures,
                    self.paths.aggregate_metrics,
                    self.paths.materialized,
                ):
                    path.unlink(missing_ok=True)
                _, agents = materialize(self.config, input_path, self.paths, ledger)
                self.paths.output.touch()
                self.paths.failures.touch()
            for agent in sorted(agents):
                self.helper.agent_url(agent)  # an unknown agent is a config error, before anything runs
            progress = await self._run_missing(ledger, max_attempts)
            summary = CollectionSummary(
                self.paths, progress.total, self._already_done, progress, ledger.unresolved_failures(), []
            )
            if not self.config.disable_aggregation:
                try:
                    summary.aggregates = await aggregate_results(
                        (result for _, _, _, result in iter_jsonl(self.paths.output)),
                        ledger.unresolved_failure_records(),
                        self.helper.server_client,
                        self.paths.aggregate_metrics,
                    )
                except (RequestFailedError, aiohttp.ClientError, ValueError) as error:
                    summary.aggregation_error = str(error)
        finally:
            ledger.close()
        return summary

    def _load_earlier_run(self, ledger: CollectionLedger) -> set[str]:
        drop_torn_tail(self.paths.output)
        drop_torn_tail(self.paths.failures)
        for _, _, _, result in iter_jsonl(self.paths.output):
            if ledger.mark_done(rollout_key(result)):
                self._already_done += 1
        for _, _, _, failure in iter_jsonl(self.paths.failures):
            ledger.record_failure(
                rollout_key(failure),
                agent_name_of(failure),
                failure[FAILURE_CLASS_KEY],
                bool(failure.get(FAILURE_TERMINAL_KEY)),
            )
        ledger.commit()
        return {
            agent for _, _, _, row in iter_jsonl(self.paths.materialized) if (agent := agent_name_of(row))
        }

    def _runnable(self, ledger: CollectionLedger, max_attempts: int) -> Iterator[dict[str, Any]]:
        for _, _, _, row in iter_jsonl(self.paths.materialized):
            key = rollout_key(row)
            if ledger.is_done(key):
                continue
            attempts, terminal = ledger.failed_attempts(key)
            if terminal or attempts >= max_attempts:
                continue
            yield row

    async def _run_missing(self, ledger: CollectionLedger, max_attempts: int) -> CollectionProgress:
        total = sum(1 for _ in self._runnable(ledger, max_attempts))
        progress = CollectionProgress(total=total)
        results = LineAppender(self.paths.output)
        failures = LineAppender(self.paths.failures)
        try:
            rows = self._runnable(ledger, max_attempts)
            attempt_of = lambda row: ledger.failed_attempts(rollout_key(row))[0] + 1  # noqa: E731
            async for row, result in self.helper.run_examples(rows, attempt_of):
                key = rollout_key(row)
                if FAILURE_CLASS_KEY in result:
                    failures.append(result)
                    ledger.record_failure(
                        key,
                        agent_name_of(row),
                        result[FAILURE_CLASS_KEY],
                        bool(result.get(FAILURE_TERMINAL_KEY)),
                    )
                elif ledger.mark_done(key) and not result.get(NO_PERSIST_KEY):
                    results.append(result)
                progress.add(result)
                if progress.finished % 1000 == 0:
                    ledger.commit()
        finally:
            results.close()
            failures.close()
            progress.close()
        return progress


async def collect_rollouts(overrides: list[str], server_client: ServerClient | None = None) -> int:
    """`gym collect`: the exit code is 0 when every rollout has a result and aggregation succeeded.
    `server_client` reaches the deployment (default: the one whose head server the config names)."""
    cfg = parse_global_config_dict(overrides)
    config = command_settings(RolloutCollectionConfig, cfg)
    configure_http_client_from(cfg)
    try:
        helper = RolloutCollectionHelper(
            server_client,
            head_server_config=head_server_config_from(cfg),
            max_in_flight=config.num_samples_in_parallel,
            rollout_timeout_s=config.rollout_timeout_s,
        )
    except ValueError as error:
        raise ConfigError(str(error)) from error
    wandb_run = WandbRun.start_if_configured(cfg, helper.server_client.global_config_dict)
    try:
        summary = await RolloutCollector(config, helper).collect()
        if wandb_run is not None:
            wandb_run.log_aggregates(summary.aggregates)
            if config.upload_rollouts_to_wandb:
                wandb_run.log_rollouts(result for _, _, _, result in iter_jsonl(summary.paths.output))
    finally:
        if wandb_run is not None:
            wandb_run.finish()
    for line in summary.lines():
        print(line)
    return summary.exit_code


# ---- merging shards (`gym eval aggregate`) ------------------------------------------------------------------

SIDECAR_SUFFIXES = ("_materialized_inputs.jsonl", "_failures.jsonl")


class ShardAggregationConfig(BaseNeMoGymCLIConfig):
    """Merge the results of sharded `gym collect` runs and aggregate them through a running deployment."""

    input_glob: str | list[str] = Field(description="glob, comma-separated globs or a list, of result files")
    output_jsonl_fpath: str = Field(
        description="where the merged results go (with merge_shards); names the metrics file"
    )
    merge_shards: bool = Field(default=False, description="also write every result, by (task, rollout)")


def shard_files(input_glob: str | list[str]) -> list[Path]:
    """The result files matched by each pattern (sorted per pattern, first match wins), sidecars left out."""
    found: dict[Path, None] = {}
    patterns = input_glob if isinstance(input_glob, list) else input_glob.split(",")
    for pattern in (part.strip() for part in patterns):
        if pattern:
            for match in sorted(glob.glob(os.path.expanduser(pattern))):
                if not match.endswith(SIDECAR_SUFFIXES) and Path(match).is_file():
                    found.setdefault(Path(match).resolve(), None)
    if not found:
        raise ConfigError(
            f"input_glob '{input_glob}' matches no result file; check the pattern and the folder"
        )
    return list(found)


def _load_shards(files: list[Path], ledger: CollectionLedger) -> int:
    count = 0
    for index, path in enumerate(files):
        for line in iter_jsonl(path):
            key = rollout_key(line.row, f"{path}:{line.number}")
            if not ledger.record_position(key, index, line.offset):
                raise ConfigError(
                    f"{path}:{line.number}: rollout (task {key[0]}, rollout {key[1]}) appears in more than one line "
                    "of the shards; remove the duplicate or narrow input_glob"
                )
            count += 1
        failures = CollectionPaths.for_output(path).failures
        if failures.exists():
            for line in iter_jsonl(failures):
                ledger.record_failure(
                    rollout_key(line.row), agent_name_of(line.row), line.row[FAILURE_CLASS_KEY],
                    bool(line.row.get(FAILURE_TERMINAL_KEY)),
                )  # fmt: skip
        ledger.commit()
    return count


def _results_in_order(files: list[Path], ledger: CollectionLedger) -> Iterator[bytes]:
    handles = [path.open("rb") for path in files]
    try:
        for file_index, offset in ledger.positions_in_order():
            handle = handles[file_index]
            handle.seek(offset)
            yield handle.readline().strip() + b"\n"
    finally:
        for handle in handles:
            handle.close()


async def aggregate_shards(overrides: list[str]) -> int:
    """`gym eval aggregate`: results of every shard, by (task, rollout), through `/aggregate_metrics`."""
    cfg = parse_global_config_dict(overrides)
    config = command_settings(ShardAggregationConfig, cfg)
    configure_http_client_from(cfg)
    files = shard_files(config.input_glob)
    paths = CollectionPaths.for_output(config.output_jsonl_fpath)
    if config.merge_shards and paths.output.resolve() in files:
        raise ConfigError(
            f"output_jsonl_fpath {paths.output} is one of the shards; write the merge elsewhere"
        )
    try:
        server_client = ServerClient.load_from_global_config(head_server_config_from(cfg))
    except ValueError as error:
        raise ConfigError(str(error)) from error
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    ledger = CollectionLedger()
    try:
        count = _load_shards(files, ledger)
        if config.merge_shards:
            write_atomically(paths.output, _results_in_order(files, ledger))
        results = (orjson.loads(line) for line in _results_in_order(files, ledger))
        entries = await aggregate_results(
            results, ledger.unresolved_failure_records(), server_client, paths.aggregate_metrics
        )
    finally:
        ledger.close()
    print(f"Aggregated {count} result(s) from {len(files)} file(s).")
    for entry in entries:
        shown = ", ".join(f"{key} {_fmt(value)}" for key, value in sorted(entry["key_metrics"].items()))
        print(f"{entry[AGENT_REF_KEY]['name']}: {shown or 'no metrics'}")
    if config.merge_shards:
        print(f"Merged results: {paths.output}")
    print(f"Aggregate metrics: {paths.aggregate_metrics}")
    return 0
