"""NeMo Gym 0.7's rollout health checks: which collected rollouts are fit to learn from or report.

Each rollout of a results file gets a verdict (`healthy`, `unhealthy`, `unobserved` when the record
lacks the data to judge it) with the findings behind it; `quality_summary.json` and
`rollout_verdicts.jsonl` go beside the results. The checks read what Gym's results rows hold: the
response's output items, status and usage, `failure_kind`, and the `_ng_task_index` / `_ng_rollout_index`
identity. The checks of 0.7 that read its per-model-call capture (`ng_model_call_capture`,
`ng_trajectory`) are listed in NOT_IMPLEMENTED: Gym's records do not carry that capture.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import Field, field_validator

from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, write_atomically
from nemo_gym.config.key_names import ROLLOUT_ID_KEY_NAME
from nemo_gym.wire import failure_kinds

logger = logging.getLogger("nemo_gym.rollout_health")
SUMMARY_FILE = "quality_summary.json"
VERDICTS_FILE = "rollout_verdicts.jsonl"
DEFAULT_ROLLOUTS_FILE = "rollouts.jsonl"
MAX_DEFAULT_WORKERS = 8
LINES_PER_WORKER_CHUNK = 2000  # below this many lines one process does the work: spawning costs more

RECORD_UNREADABLE = "record_unreadable"
CHECK_EXECUTION_ERROR = "check_execution_error"
DUPLICATE_IDENTITY = "rollout_duplicate_identity"
MISSING_AGENT_TURNS = "rollout_missing_agent_turns"
ENDED_ON_FAILED_MODEL_CALL = "rollout_ended_on_failed_model_call"
HOLLOW_TURN = "agent_turn_hollow"
ZERO_COMPLETION_TOKENS = "model_call_zero_completion_tokens"
MISSING_TOKEN_COUNTS = "model_call_missing_token_counts"
RUNAWAY_GENERATION = "model_call_runaway_generation"
TASK_CONSISTENTLY_UNHEALTHY = "task_consistently_unhealthy"
IMPLEMENTED = (
    RECORD_UNREADABLE, CHECK_EXECUTION_ERROR, DUPLICATE_IDENTITY, MISSING_AGENT_TURNS, ENDED_ON_FAILED_MODEL_CALL,
    HOLLOW_TURN, ZERO_COMPLETION_TOKENS, MISSING_TOKEN_COUNTS, RUNAWAY_GENERATION, TASK_CONSISTENTLY_UNHEALTHY,
)  # fmt: skip
# 0.7's checks that compare per-call capture records with the trajectory: Gym's records have neither.
NOT_IMPLEMENTED = (
    "trajectory_capture_mismatch",
    "model_call_failed",
    "rollout_token_count_mismatch",
    "task_no_successful_model_calls",
)
KNOWN_CHECKS = (*IMPLEMENTED, *NOT_IMPLEMENTED)
# failure_kind values that say the model call itself failed, not the tools or the grading.
MODEL_FAILURE_KINDS = frozenset(
    {
        failure_kinds.PROVIDER_UNAVAILABLE,
        failure_kinds.PROVIDER_QUOTA_EXHAUSTED,
        failure_kinds.PROVIDER_OOM_KILLED,
        failure_kinds.TRANSPORT_UNREACHABLE,
        failure_kinds.TRANSPORT_PEER_DROP,
        failure_kinds.TRANSPORT_TIMEOUT,
    }
)
TOKEN_CHECKS = (ZERO_COMPLETION_TOKENS, MISSING_TOKEN_COUNTS)
NOT_AGENT_ROLES = frozenset({"user", "system", "developer"})

Finding = dict[str, Any]


@dataclass
class HealthCheckResult:
    """The verdicts of one results file, and where they were written."""

    rollouts_path: Path
    output_dir: Path
    verdicts: list[dict[str, Any]]
    task_findings: dict[int, list[Finding]] = field(default_factory=dict)
    ignored_checks: tuple[str, ...] = ()

    @property
    def counts(self) -> Counter[str]:
        return Counter(verdict["verdict"] for verdict in self.verdicts)

    @property
    def healthy(self) -> bool:
        return not self.counts["unhealthy"] and not self.task_findings

    def summary(self) -> dict[str, Any]:
        findings = Counter(f["check"] for v in self.verdicts for f in v["findings"])
        findings.update(f["check"] for task in self.task_findings.values() for f in task)
        tokens: Counter[str] = Counter()
        tasks: dict[str, dict[str, Any]] = {}
        for verdict in self.verdicts:
            tokens.update(verdict.get("_tokens", {}))
            task = tasks.setdefault(str(verdict[TASK_INDEX_KEY]), Counter({"rollouts": 0}))
            task["rollouts"] += 1
            task[verdict["verdict"]] += 1
        per_task = {
            key: {**tasks[key], "findings": self.task_findings.get(_as_int(key), [])}
            for key in sorted(tasks, key=lambda key: (not key.lstrip("-").isdigit(), _as_int(key)))
        }
        return {
            "rollouts_file": str(self.rollouts_path),
            "num_rollouts": len(self.verdicts),
            "verdicts": {name: self.counts[name] for name in ("healthy", "unhealthy", "unobserved")},
            "findings_by_check": dict(sorted(findings.items())),
            "token_totals": dict(tokens),
            "ignored_checks": list(self.ignored_checks),
            "not_implemented_checks": list(NOT_IMPLEMENTED),
            "tasks": per_task,
        }


def checked_ignore_list(ignored: Iterable[str] | str | None) -> tuple[str, ...]:
    """Check ids to ignore, from a list or a comma-separated string; an unknown id is a ValueError."""
    names = ignored.split(",") if isinstance(ignored, str) else list(ignored or ())
    names = [name.strip() for name in names if name and name.strip()]
    unknown = [name for name in names if name not in KNOWN_CHECKS]
    if unknown:
        raise ValueError(f"unknown health check id(s) {', '.join(unknown)}; known: {', '.join(KNOWN_CHECKS)}")
    return tuple(names)


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS))


def run_health_checks(
    rollout_paths: Path | str | Iterable[Path | str],
    *,
    output_dir: Path | str | None = None,
    workers: int | None = None,
    ignored_checks: Iterable[str] | str = (),
) -> HealthCheckResult:
    """Judge every rollout of the file(s), write the two verdict files into `output_dir` (default: the
    first file's folder). A missing file is a FileNotFoundError, an unknown check id a ValueError."""
    paths = (
        [Path(rollout_paths)] if isinstance(rollout_paths, str | Path) else [Path(p) for p in rollout_paths]
    )
    ignored = checked_ignore_list(ignored_checks)
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    judged = list(_judged(_chunks(paths), workers or default_workers()))
    _find_duplicates(judged)
    for verdict in judged:
        verdict["findings"] = [f for f in verdict["findings"] if f["check"] not in ignored]
        verdict["verdict"] = _verdict(verdict)
    folder = Path(output_dir) if output_dir else paths[0].parent
    result = HealthCheckResult(paths[0], folder, judged, ignored_checks=ignored)
    if TASK_CONSISTENTLY_UNHEALTHY not in ignored:
        result.task_findings = _consistently_unhealthy_tasks(judged)
    _write(result)
    return result


Chunk = list[tuple[str, int, bytes]]


def _chunks(paths: list[Path]) -> Iterator[Chunk]:
    """The files' non-blank lines, LINES_PER_WORKER_CHUNK at a time (a file is never read whole)."""
    chunk: Chunk = []
    for path in paths:
        with path.open("rb") as file:
            for number, raw in enumerate(file, start=1):
                if raw.strip():
                    chunk.append((str(path), number, raw))
                if len(chunk) == LINES_PER_WORKER_CHUNK:
                    yield chunk
                    chunk = []
    if chunk:
        yield chunk


def _judged(chunks: Iterator[Chunk], workers: int) -> Iterator[dict[str, Any]]:
    """Each line's verdict, in file order: in this process for a single chunk or a single worker, else in
    `workers` processes with at most two chunks each waiting."""
    first, second = next(chunks, None), next(chunks, None)
    if second is None or workers == 1:
        for chunk in itertools.chain(filter(None, (first, second)), chunks):
            yield from _judge_chunk(chunk)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process that runs threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        pending: deque[Future[list[dict[str, Any]]]] = deque()
        for chunk in itertools.chain((first, second), chunks):
            pending.append(pool.submit(_judge_chunk, chunk))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def _judge_chunk(chunk: list[tuple[str, int, bytes]]) -> list[dict[str, Any]]:
    return [judge_line(raw, number, file) for file, number, raw in chunk]


def judge_line(raw: bytes, line: int, file: str = "") -> dict[str, Any]:
    """One rollout's findings before the cross-rollout checks; `_tokens` feeds the summary's totals."""
    verdict: dict[str, Any] = {
        TASK_INDEX_KEY: None, ROLLOUT_INDEX_KEY: None, "rollout_id": None, "line": line, "findings": [],
        "unobserved": [], "_file": file,
    }  # fmt: skip
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        record, problem = None, f"not JSON ({error})"
    else:
        problem = None if isinstance(record, dict) else f"a JSON {type(record).__name__}, not an object"
    if problem is not None or not isinstance(record, dict):
        verdict["findings"].append({"check": RECORD_UNREADABLE, "locator": f"line {line}", "detail": problem})
        return verdict
    verdict[TASK_INDEX_KEY] = record.get(TASK_INDEX_KEY)
    verdict[ROLLOUT_INDEX_KEY] = record.get(ROLLOUT_INDEX_KEY)
    verdict["rollout_id"] = record.get(ROLLOUT_ID_KEY_NAME)
    response = record.get("response")
    if not isinstance(response, dict):
        verdict["unobserved"] = [name for name, _ in RESPONSE_CHECKS] + list(TOKEN_CHECKS)
        return verdict
    for name, check in RESPONSE_CHECKS:
        try:
            verdict["findings"] += check(record, response)
        except Exception as error:  # a check's own fault is a finding, never the end of the run
            verdict["findings"].append(
                {"check": CHECK_EXECUTION_ERROR, "detail": f"{name}: {type(error).__name__}: {error}"}
            )
    usage = response.get("usage")
    if isinstance(usage, dict):
        verdict["findings"] += _token_findings(usage)
        verdict["_tokens"] = {k: v for k in ("input_tokens", "output_tokens") if _is_count(v := usage.get(k))}
    else:
        verdict["unobserved"] = list(TOKEN_CHECKS)
    return verdict


def _agent_items(response: dict[str, Any]) -> list[dict[str, Any]]:
    output = response.get("output")
    items = [item for item in output if isinstance(item, dict)] if isinstance(output, list) else []
    return [
        item
        for item in items
        if item.get("type") != "function_call_output" and item.get("role") not in NOT_AGENT_ROLES
    ]


def _missing_agent_turns(record: dict[str, Any], response: dict[str, Any]) -> list[Finding]:
    if _agent_items(response):
        return []
    return [{"check": MISSING_AGENT_TURNS, "detail": "the response holds no item the model produced"}]


def _ended_on_failed_model_call(record: dict[str, Any], response: dict[str, Any]) -> list[Finding]:
    kind = record.get("failure_kind")
    if response.get("status") == "failed" or response.get("error"):
        error = response.get("error")
        cause = error.get("message") if isinstance(error, dict) else error
        detail = f"the last model call failed{f': {cause}' if cause else ''}"
    elif kind in MODEL_FAILURE_KINDS:
        detail = f"failure_kind {kind}: {record.get('failure_reason') or 'the model call failed'}"
    else:
        return []
    return [{"check": ENDED_ON_FAILED_MODEL_CALL, "detail": detail}]


def _hollow_turns(record: dict[str, Any], response: dict[str, Any]) -> list[Finding]:
    """Assistant messages with no text at all (a turn that said nothing and called nothing)."""
    findings = []
    for index, item in enumerate(response.get("output") or []):
        if not isinstance(item, dict) or item.get("type") != "message" or item.get("role") != "assistant":
            continue
        content = item.get("content")
        parts = content if isinstance(content, list) else [{"text": content}]
        if not any(str(part.get("text") or "").strip() for part in parts if isinstance(part, dict)):
            findings.append({"check": HOLLOW_TURN, "locator": f"output[{index}]", "detail": "empty message"})
    return findings


def _runaway_generation(record: dict[str, Any], response: dict[str, Any]) -> list[Finding]:
    details = response.get("incomplete_details")
    if isinstance(details, dict) and details.get("reason") == "max_output_tokens":
        limit = (record.get("responses_create_params") or {}).get("max_output_tokens")
        shown = f" ({limit})" if limit else ""
        return [{"check": RUNAWAY_GENERATION, "detail": f"the model stopped at max_output_tokens{shown}"}]
    return []


RESPONSE_CHECKS: tuple[tuple[str, Callable[[dict[str, Any], dict[str, Any]], list[Finding]]], ...] = (
    (MISSING_AGENT_TURNS, _missing_agent_turns),
    (ENDED_ON_FAILED_MODEL_CALL, _ended_on_failed_model_call),
    (HOLLOW_TURN, _hollow_turns),
    (RUNAWAY_GENERATION, _runaway_generation),
)


def _token_findings(usage: dict[str, Any]) -> list[Finding]:
    missing = [key for key in ("input_tokens", "output_tokens") if not _is_count(usage.get(key))]
    if missing:
        return [{"check": MISSING_TOKEN_COUNTS, "detail": f"usage lacks {', '.join(missing)}"}]
    if usage["output_tokens"] == 0:
        return [{"check": ZERO_COMPLETION_TOKENS, "detail": "usage.output_tokens is 0"}]
    return []


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _as_int(value: str) -> int | str:
    return int(value) if value.lstrip("-").isdigit() else value


def _find_duplicates(verdicts: list[dict[str, Any]]) -> None:
    """Every rollout after the first with the same (task, rollout) index is a duplicate."""
    first_seen: dict[tuple[Any, Any], tuple[str, int]] = {}
    for verdict in verdicts:
        identity = (verdict[TASK_INDEX_KEY], verdict[ROLLOUT_INDEX_KEY])
        if any(part is None for part in identity):
            if not any(f["check"] == RECORD_UNREADABLE for f in verdict["findings"]):
                verdict["unobserved"].append(DUPLICATE_IDENTITY)
            continue
        if identity in first_seen:
            file, line = first_seen[identity]
            where = f"line {line}" + ("" if file == verdict["_file"] else f" of {file}")
            verdict["findings"].append(
                {
                    "check": DUPLICATE_IDENTITY,
                    "locator": f"line {verdict['line']}",
                    "detail": f"task {identity[0]} rollout {identity[1]} is also on {where}",
                }
            )
        else:
            first_seen[identity] = (verdict["_file"], verdict["line"])


def _verdict(verdict: dict[str, Any]) -> str:
    if verdict["findings"]:
        return "unhealthy"
    return "unobserved" if MISSING_AGENT_TURNS in verdict["unobserved"] else "healthy"


def _consistently_unhealthy_tasks(verdicts: list[dict[str, Any]]) -> dict[int, list[Finding]]:
    """Tasks of two or more rollouts that are all unhealthy: the task, not luck, is likely the cause."""
    by_task: dict[Any, list[str]] = {}
    for verdict in verdicts:
        if verdict[TASK_INDEX_KEY] is not None:
            by_task.setdefault(verdict[TASK_INDEX_KEY], []).append(verdict["verdict"])
    return {
        task: [{"check": TASK_CONSISTENTLY_UNHEALTHY, "detail": f"all {len(found)} rollouts are unhealthy"}]
        for task, found in by_task.items()
        if len(found) >= 2 and all(v == "unhealthy" for v in found)
    }


def _write(result: HealthCheckResult) -> None:
    result.output_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for verdict in result.verdicts:
        public = {
            k: v
            for k, v in verdict.items()
            if not k.startswith("_") or k in (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY)
        }
        lines.append(orjson.dumps(public) + b"\n")
    summary = result.summary()
    write_atomically(result.output_dir / VERDICTS_FILE, lines)
    write_atomically(result.output_dir / SUMMARY_FILE, [orjson.dumps(summary, option=orjson.OPT_INDENT_2)])


def health_check_run_dir(
    run_dir: Path | str,
    *,
    rollout_file: str | None = None,
    workers: int | None = None,
    ignored_checks: Iterable[str] | str = (),
    json_output: bool = False,
) -> HealthCheckResult:
    """`gym eval health-check RUN_DIR`: check RUN_DIR/`rollout_file` (default rollouts.jsonl), write the
    verdict files into RUN_DIR and print the report (or the summary as JSON)."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"run folder {folder} does not exist")
    path = folder / (rollout_file or DEFAULT_ROLLOUTS_FILE)
    if not path.is_file():
        raise FileNotFoundError(f"no rollouts file {path} (choose one with --rollouts-file)")
    result = run_health_checks(path, output_dir=folder, workers=workers, ignored_checks=ignored_checks)
    if json_output:
        print(orjson.dumps(result.summary(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(format_health_report(result))
    return result


MAX_REPORTED_FINDINGS = 5


def format_health_report(result: HealthCheckResult) -> str:
    """A few lines: verdict counts, findings by check with their first examples, where the files are."""
    counts = result.counts
    lines = [
        f"Rollout health of {result.rollouts_path}: {len(result.verdicts)} rollout(s): {counts['healthy']} "
        f"healthy, {counts['unhealthy']} unhealthy, {counts['unobserved']} unobserved."
    ]
    examples = [
        (f["check"], f"line {v['line']}: {f['detail']}") for v in result.verdicts for f in v["findings"]
    ]
    examples += [
        (f["check"], f"task {task}: {f['detail']}") for task, fs in result.task_findings.items() for f in fs
    ]
    for check, count in sorted(Counter(check for check, _ in examples).items()):
        lines.append(f"  {check}: {count}")
        lines += [f"    {text}" for name, text in examples if name == check][:MAX_REPORTED_FINDINGS]
    if result.ignored_checks:
        lines.append(f"  ignored: {', '.join(result.ignored_checks)}")
    lines.append(f"Wrote {SUMMARY_FILE} and {VERDICTS_FILE} to {result.output_dir}.")
    return "\n".join(lines)


class RolloutHealthSettings(BaseNeMoGymCLIConfig):
    """The health-check keys of NeMo Gym 0.7's collection and aggregation settings."""

    disable_health_check: bool = Field(
        default=False, description="skip the rollout health checks (and gym eval run's pre-flight check)"
    )
    health_check_workers: int | None = Field(
        default=None,
        ge=1,
        description=f"processes judging rollouts (default min(cpus, {MAX_DEFAULT_WORKERS}))",
    )
    health_check_ignored_checks: list[str] | str = Field(
        default_factory=list, description="check ids to ignore: a list, or comma-separated"
    )

    @field_validator("health_check_ignored_checks")
    @classmethod
    def _known_checks(cls, value: list[str] | str) -> list[str]:
        return list(checked_ignore_list(value))


def check_after_run(rollout_paths: list[Path], output_dir: Path, settings: RolloutHealthSettings) -> None:
    """The checks a finished collection or aggregation runs on its results, unless disabled: the report
    is printed; the checker's own failure is logged and never fails the run."""
    if settings.disable_health_check:
        return
    try:
        result = run_health_checks(
            rollout_paths,
            output_dir=output_dir,
            workers=settings.health_check_workers,
            ignored_checks=settings.health_check_ignored_checks,
        )
    except Exception:
        logger.exception("the rollout health check failed; the run's results are unaffected")
        return
    print(format_health_report(result), flush=True)
