"""`cline --json` output, one JSON record a line, read as Gym output items.

`agent_event` records carry the agent loop's events: a `content_start` / `content_end` pair per piece of
content (`contentType` text, reasoning or tool; the end holds the final text, or the tool's output or
error), `usage` with the running token totals, `error`, and `done`. The last record, `run_result`, says
how the run ended (`finishReason`) with its aggregate usage. Text becomes a Responses message, reasoning a
reasoning item, a tool a function_call with its function_call_output, in the order they ended; `hook_event`
records repeat the tool boundaries and are skipped.
"""

from __future__ import annotations

from typing import Any

import orjson

from nemo_gym.agents.cli_trajectories import (
    Trajectory,
    assistant_message,
    json_events,
    tool_call_items,
    usage_of,
)

# finishReason values of a run that ended normally (a final answer, or its iteration limit).
FINISHED_REASONS = {"completed": "completed", "max_iterations": "max_iterations"}


def parse_cline_json(stdout: str) -> Trajectory:
    output: list[dict[str, Any]] = []
    usage = usage_of(0, 0)
    started_tools: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    result: dict[str, Any] | None = None
    for record in json_events(stdout):
        if record.get("type") == "run_result":
            result = record
        elif record.get("type") == "error":
            errors.append(str(record.get("message") or "error"))
        elif record.get("type") == "agent_event" and isinstance(record.get("event"), dict):
            event = record["event"]
            kind, content = event.get("type"), event.get("contentType")
            if kind == "content_start" and content == "tool":
                started_tools[str(event.get("toolCallId") or "")] = event
            elif kind == "content_end":
                output.extend(_ended(event, content, started_tools, len(output)))
            elif kind == "usage":
                usage = _usage(event, "total")
            elif kind == "error":
                error = event.get("error")
                errors.append(str(error.get("message") if isinstance(error, dict) else error or "error"))
    if result is None:
        return Trajectory(output=output, usage=usage, finished=False, error="; ".join(errors)[:1000] or None)
    if isinstance(result.get("aggregateUsage") or result.get("usage"), dict):
        usage = _usage(result.get("aggregateUsage") or result["usage"], "")
    reason = str(result.get("finishReason") or "")
    outcome = FINISHED_REASONS.get(reason)
    if outcome is None:
        errors.append(f"finishReason {reason or 'missing'}")
    return Trajectory(
        output=output,
        usage=usage,
        finished=outcome is not None,
        error=None if outcome else "; ".join(errors)[:1000],
        metadata={
            "cli_outcome": outcome or "failed",
            "finish_reason": reason,
            "iterations": str(result.get("iterations", "")),
        },
    )


def _ended(
    event: dict[str, Any], content: Any, started_tools: dict[str, dict[str, Any]], index: int
) -> list[dict[str, Any]]:
    if content == "text" and str(event.get("text") or "").strip():
        return [assistant_message(event["text"], f"msg_{index}")]
    if content == "reasoning" and str(event.get("reasoning") or "").strip():
        return [
            {"id": f"rs_{index}", "type": "reasoning",
             "summary": [{"type": "summary_text", "text": event["reasoning"]}]}
        ]  # fmt: skip
    if content == "tool":
        call_id = str(event.get("toolCallId") or f"call_{index}")
        start = started_tools.pop(call_id, {})
        arguments = start.get("input", event.get("input"))
        result = event.get("error") or event.get("output")
        return tool_call_items(
            call_id,
            str(start.get("toolName") or event.get("toolName") or ""),
            _text(arguments or {}),
            _text(result),
        )
    return []


def _usage(totals: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Cline's token counts (`inputTokens`, or `totalInputTokens` on a running total) in Gym's shape."""

    def count(name: str) -> int:
        key = f"{prefix}{name[0].upper()}{name[1:]}" if prefix else name
        return int(totals.get(key) or 0)

    cached = count("cacheReadTokens")
    return usage_of(count("inputTokens") + cached, count("outputTokens"), cached=cached)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else orjson.dumps(value).decode()
