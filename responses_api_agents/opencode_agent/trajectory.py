"""An `opencode run` session, read from the sqlite database OpenCode keeps it in, as Gym output items.

OpenCode stores a session as messages (user or assistant, their JSON in `message.data`: role, error,
completion time) and each message's parts (`part.data`): `text`, `reasoning`, `tool` (the call id, tool
name and a state holding its input and output or error) and `step-finish` (one per model call, with its
token counts). Parts become Responses items in the order they were made: assistant text a message,
reasoning a reasoning item, a tool part a function_call with its function_call_output. The database is
opened read-only; what `--format json` printed is read only for the errors it reports.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.agents.cli_trajectories import (
    Trajectory,
    assistant_message,
    json_events,
    tool_call_items,
    usage_of,
)

MESSAGES = "select id, data, session_id from message"
PARTS = "select part.id, part.message_id, part.data from part order by part.time_created, part.id"


def parse_session(db_path: Path, stdout: str) -> Trajectory | None:
    """The run's trajectory, or None when it left no session to read (it then failed)."""
    if not db_path.is_file():
        return None
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as db:
        messages = {row[0]: _json(row[1]) | {"session": row[2]} for row in db.execute(MESSAGES)}
        parts = [(message_id, _json(data)) for _, message_id, data in db.execute(PARTS)]
    output: list[dict[str, Any]] = []
    totals = {"input": 0, "output": 0, "reasoning": 0, "cached": 0}
    for message_id, part in parts:
        if messages.get(message_id, {}).get("role") != "assistant":
            continue
        if part.get("type") == "step-finish":
            tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
            cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
            totals["cached"] += int(cache.get("read") or 0)
            totals["input"] += int(tokens.get("input") or 0) + int(cache.get("read") or 0)
            totals["output"] += int(tokens.get("output") or 0)
            totals["reasoning"] += int(tokens.get("reasoning") or 0)
        output.extend(_items(part, len(output)))
    replies = [message for message in messages.values() if message.get("role") == "assistant"]
    errors = [_error_text(message["error"]) for message in replies if message.get("error")]
    errors += [
        _error_text(event.get("error")) for event in json_events(stdout) if event.get("type") == "error"
    ]
    last = max(replies, key=lambda message: _created(message), default={})
    finished = bool(last.get("time", {}).get("completed")) and not errors
    return Trajectory(
        output=output,
        usage=usage_of(
            totals["input"], totals["output"], cached=totals["cached"], reasoning=totals["reasoning"]
        ),
        finished=finished,
        error="; ".join(errors)[:1000] or None,
        metadata={
            "cli_outcome": "completed" if finished else "failed",
            "finish_reason": str(last.get("finish") or ""),
            "session_id": str(last.get("session") or ""),
        },
    )


def _items(part: dict[str, Any], index: int) -> list[dict[str, Any]]:
    kind, text = part.get("type"), part.get("text")
    if kind == "text" and isinstance(text, str) and text.strip() and not part.get("synthetic"):
        return [assistant_message(text, f"msg_{index}")]
    if kind == "reasoning" and isinstance(text, str) and text.strip():
        return [
            {"id": f"rs_{index}", "type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}
        ]
    if kind == "tool":
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        result = state.get("output") if state.get("status") == "completed" else state.get("error")
        arguments = state.get("input") if isinstance(state.get("input"), dict) else {}
        return tool_call_items(
            str(part.get("callID") or f"call_{index}"),
            str(part.get("tool") or ""),
            orjson.dumps(arguments).decode(),
            result if isinstance(result, str) else orjson.dumps(result).decode(),
        )
    return []


def _created(message: dict[str, Any]) -> float:
    time = message.get("time")
    return float(time.get("created") or 0) if isinstance(time, dict) else 0.0


def _error_text(error: Any) -> str:
    """OpenCode's errors are `{name, data: {message}}`."""
    if isinstance(error, dict):
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        return str(data.get("message") or error.get("message") or error.get("name") or "error")
    return str(error)


def _json(text: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}
