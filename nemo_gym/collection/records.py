"""What collection writes about a rollout besides the agent's answer: the agent it ran on, the failure
record of a failed attempt, and how many attempts a rollout gets."""

from __future__ import annotations

import os
from typing import Any, Literal

import orjson

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.key_names import TASK_SOURCE_KEY_NAME
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.wire.validation_errors import MAX_REPORTED_PROBLEMS, describe_problem

FAILURE_MESSAGE_KEY = "_ng_failure_message"
FAILURE_ATTEMPT_KEY = "_ng_failure_attempt"
FAILURE_STATUS_KEY = "_ng_failure_status"
FAILURE_TERMINAL_KEY = "_ng_failure_terminal"
NO_PERSIST_KEY = "_ng_no_persist"
MAX_ATTEMPTS_ENV_VAR_NAME = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_MAX_ATTEMPTS = 3
MAX_FAILURE_MESSAGE_CHARS = 500
# 4xx answers that retrying could fix; any other 4xx means the row itself is wrong.
RETRYABLE_CLIENT_STATUSES = frozenset({408, 409, 425, 429})

FailureClass = Literal["timeout", "connection", "invalid_response", "invalid_request"] | str


DEFAULT_ROUTE = "_default"


def agent_name_of(record: dict[str, Any]) -> str | None:
    ref = record.get(AGENT_REF_KEY)
    return ref.get("name") if isinstance(ref, dict) else None


def mapped_agent(row: dict[str, Any], agent_map: dict[str, str] | None) -> str | None:
    """The agent `agent_map` sends a row to: by its agent or its `task_source`, else `_default`; None
    when the map says nothing about it."""
    if not agent_map:
        return None
    key = agent_name_of(row) or row.get(TASK_SOURCE_KEY_NAME)
    return agent_map.get(key) or agent_map.get(DEFAULT_ROUTE)


def agent_map_with_agent_name(
    agent_map: dict[str, str] | None, agent_name: str | None
) -> dict[str, str] | None:
    """NeMo Gym 0.7's `agent_name`: every row runs on it (`agent_map._default`), whatever its agent_ref,
    unless `agent_map` names the row's agent or task_source. Both giving a different default is an error."""
    if not agent_name:
        return agent_map
    default = (agent_map or {}).get(DEFAULT_ROUTE)
    if default not in (None, agent_name):
        raise ValueError(
            f"agent_name={agent_name} and agent_map._default={default} both name the agent of every row; keep one"
        )
    return {**(agent_map or {}), DEFAULT_ROUTE: agent_name}


def error_message(body: bytes) -> str:
    """The useful part of an error answer: the envelope's message and its cause's, else the raw text."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", errors="replace")
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and error.get("message"):
        inner = _cause_text(error.get("cause"))
        return f"{error['message']}: {inner}" if inner else str(error["message"])
    if isinstance(parsed, dict) and "detail" in parsed:
        return f"invalid request: {_described_detail(parsed['detail'])}"
    return body.decode("utf-8", errors="replace")


def _cause_text(cause: Any) -> str | None:
    """What an inner server said: its error's message, the fields of its 422, or its text."""
    if isinstance(cause, str):
        return cause
    if not isinstance(cause, dict):
        return None
    if cause.get("message"):
        return str(cause["message"])
    if "detail" in cause:
        return f"invalid request: {_described_detail(cause['detail'])}"
    return None


def _described_detail(detail: Any) -> str:
    """A 422's list of pydantic problems in the wording of nemo_gym.wire.validation_errors; other details as
    JSON."""
    if not isinstance(detail, list) or not all(
        isinstance(problem, dict) and "loc" in problem and "msg" in problem for problem in detail
    ):
        return orjson.dumps(detail).decode()
    described = [describe_problem(problem) for problem in detail[:MAX_REPORTED_PROBLEMS]]
    if len(detail) > MAX_REPORTED_PROBLEMS:
        described.append(f"... and {len(detail) - MAX_REPORTED_PROBLEMS} more")
    return "; ".join(described)


def failure_record(
    row: dict[str, Any],
    failure_class: str,
    message: str,
    attempt: int,
    status: int | None = None,
    terminal: bool | None = None,
) -> dict[str, Any]:
    """The failures-file line of one failed attempt: which rollout, what went wrong, whether to retry
    (`terminal`: as the failing server said, else judged from the class and status)."""
    if terminal is None:
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


def max_rollout_attempts() -> int:
    raw = os.environ.get(MAX_ATTEMPTS_ENV_VAR_NAME, str(DEFAULT_MAX_ATTEMPTS))
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{MAX_ATTEMPTS_ENV_VAR_NAME} must be a whole number >= 1, got {raw!r}")
    return int(raw)
