"""Reading the image-tool calls out of a response: structured `function_call` items, and calls written in
the text as `<tool_call>` blocks (Qwen3-Coder XML, or a JSON object as Hermes-style parsers emit).

Text before the last `</think>` is reasoning and is not read: a call the model only thought about was
not made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
XML_FUNCTION = re.compile(r"^\s*<function=([^>\s]+)>(.*?)</function>\s*$", re.DOTALL)
XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>(.*?)</parameter>", re.DOTALL)
THINK_END = "</think>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


def after_thinking(text: str) -> str:
    return text.rsplit(THINK_END, 1)[-1]


def _value(raw: str) -> Any:
    """A parameter value: JSON when it parses (arrays, numbers), else the stripped text (strings)."""
    text = raw.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _from_block(block: str) -> ToolCall | None:
    xml = XML_FUNCTION.match(block)
    if xml:
        arguments = {name: _value(value) for name, value in XML_PARAMETER.findall(xml.group(2))}
        return ToolCall(xml.group(1), arguments)
    payload = _json_object(block.strip())
    if payload is None or not isinstance(payload.get("name"), str) or not payload["name"]:
        return None
    arguments = payload.get("arguments", {})
    if isinstance(arguments, str):
        arguments = _json_object(arguments)
    return ToolCall(payload["name"], arguments) if isinstance(arguments, dict) else None


def calls_in_text(text: str) -> list[ToolCall]:
    """Every well-formed `<tool_call>` block after the reasoning, in order; malformed blocks are skipped."""
    calls = (_from_block(block) for block in TOOL_CALL_BLOCK.findall(after_thinking(text)))
    return [call for call in calls if call is not None]


def calls_in_output(output: list[Any]) -> list[ToolCall]:
    """The tool calls of a response in output order: structured calls as they are, text calls parsed from
    each assistant message. A structured call whose arguments are not a JSON object keeps no arguments."""
    calls: list[ToolCall] = []
    for item in output:
        if item.type == "function_call":
            calls.append(ToolCall(item.name, _json_object(item.arguments) or {}))
        elif item.type == "message" and item.role == "assistant":
            calls.extend(calls_in_text(message_text(item)))
    return calls


def message_text(item: Any) -> str:
    return "".join(part.text for part in item.content if getattr(part, "text", None) is not None)


def assistant_text(output: list[Any]) -> str:
    return "\n".join(
        message_text(item) for item in output if item.type == "message" and item.role == "assistant"
    )
