"""`claude -p --output-format stream-json --verbose` output, one JSON event a line, read as Gym output items.

`assistant` events carry the model's content blocks (text, thinking, tool_use), `user` events the results of
the tools Claude Code ran (tool_result blocks), and the last event, `result`, how the run ended and its usage.
Blocks become Responses items in the order they came: text a message, thinking a reasoning item, tool_use a
function_call, tool_result its function_call_output.
"""

from __future__ import annotations

from typing import Any

import orjson

from nemo_gym.agents.cli_trajectories import Trajectory, assistant_message, json_events, usage_of

# `result` subtypes that end a run normally: a final answer, or the --max-turns limit reached.
FINISHED_SUBTYPES = {"success": "completed", "error_max_turns": "max_turns"}


def parse_stream_json(stdout: str) -> Trajectory:
    output: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    for event in json_events(stdout):
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        blocks = [block for block in message.get("content") or [] if isinstance(block, dict)]
        if event.get("type") == "assistant":
            output.extend(item for block in blocks if (item := _assistant_item(block, len(output))))
        elif event.get("type") == "user":
            output.extend(_tool_result(block) for block in blocks if block.get("type") == "tool_result")
        elif event.get("type") == "result":
            result = event
    if result is None:
        return Trajectory(output=output, usage=usage_of(0, 0), finished=False)
    usage = result.get("usage") or {}
    outcome = FINISHED_SUBTYPES.get(str(result.get("subtype")))
    error = None
    if outcome is None or (result.get("is_error") and outcome == "completed"):
        error = f"{result.get('subtype')}: {str(result.get('result') or '')[:500]}".rstrip(": ")
    return Trajectory(
        output=output,
        usage=usage_of(
            int(usage.get("input_tokens") or 0),
            int(usage.get("output_tokens") or 0),
            cached=int(usage.get("cache_read_input_tokens") or 0),
        ),
        finished=outcome is not None,
        error=error,
        metadata={
            "cli_outcome": outcome or "failed",
            "num_turns": str(result.get("num_turns", "")),
            "session_id": str(result.get("session_id", "")),
        },
    )


def _assistant_item(block: dict[str, Any], index: int) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text" and block.get("text"):
        return assistant_message(block["text"], f"msg_{index}")
    if kind == "thinking" and block.get("thinking"):
        return {
            "id": f"rs_{index}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": block["thinking"]}],
        }
    if kind == "tool_use":
        call_id = str(block.get("id") or f"call_{index}")
        return {
            "id": call_id,
            "type": "function_call",
            "call_id": call_id,
            "name": str(block.get("name") or ""),
            "arguments": orjson.dumps(block.get("input") or {}).decode(),
            "status": "completed",
        }
    return None


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return {
        "type": "function_call_output",
        "call_id": str(block.get("tool_use_id") or ""),
        "output": str(content or ""),
    }
