"""`codex exec --json` output, one JSON event a line, read as Gym output items.

Codex reports each finished piece of work as an `item.completed` event (an agent_message, reasoning, a
command_execution with its output, an mcp_tool_call, a file_change, ...) and each turn's end as
`turn.completed` with the turn's usage, or `turn.failed` with an error. Messages become Responses messages,
reasoning a reasoning item, and each tool-like item a function_call with its function_call_output, named as
the tool Codex offered the model (`exec_command`, `apply_patch`, the MCP tool's own name).
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


def parse_exec_json(stdout: str) -> Trajectory:
    output: list[dict[str, Any]] = []
    totals = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "reasoning_output_tokens": 0}
    finished, errors, warnings = False, [], []
    for event in json_events(stdout):
        kind = event.get("type")
        if kind == "turn.completed":
            finished = True
            for key in totals:
                totals[key] += int((event.get("usage") or {}).get(key) or 0)
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if isinstance(event.get("error"), dict) else event
            errors.append(str(error.get("message") or kind))
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            item = event["item"]
            if item.get("type") == "error":  # Codex's notices (a deprecated setting, ...), not the run's end
                warnings.append(str(item.get("message") or ""))
            output.extend(_items(item))
    return Trajectory(
        output=output,
        usage=usage_of(
            totals["input_tokens"],
            totals["output_tokens"],
            cached=totals["cached_input_tokens"],
            reasoning=totals["reasoning_output_tokens"],
        ),
        finished=finished and not errors,
        error="; ".join(errors)[:1000] or None,
        metadata={
            "cli_outcome": "completed" if finished and not errors else "failed",
            "cli_notices": " | ".join(warnings)[:2000],
        },
    )


def _items(item: dict[str, Any]) -> list[dict[str, Any]]:
    kind, item_id = item.get("type"), str(item.get("id") or "")
    if kind == "agent_message":
        return [assistant_message(str(item.get("text") or ""), f"msg_{item_id}")]
    if kind == "reasoning" and item.get("text"):
        return [
            {
                "id": f"rs_{item_id}",
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": item["text"]}],
            }
        ]
    if kind == "command_execution":
        result = str(item.get("aggregated_output") or "")
        if item.get("exit_code") not in (None, 0):
            result += f"\n[exit code {item['exit_code']}]"
        return tool_call_items(
            f"call_{item_id}", "exec_command", _json({"cmd": item.get("command") or ""}), result
        )
    if kind == "mcp_tool_call":
        result = item.get("error") or item.get("result")
        return tool_call_items(
            f"call_{item_id}", str(item.get("tool") or ""), _json(item.get("arguments") or {}), _json(result)
        )
    if kind == "file_change":
        return tool_call_items(
            f"call_{item_id}",
            "apply_patch",
            _json({"changes": item.get("changes") or []}),
            str(item.get("status") or ""),
        )
    return []


def _json(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()
