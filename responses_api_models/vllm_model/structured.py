"""The decoding constraint of a continued turn, so it obeys the request as vLLM's chat endpoint would.

vLLM's chat endpoint constrains a `required` or named `tool_choice` to JSON (a list of calls, or the
named function's arguments) and honours `response_format`. A token-in/token-out turn goes through
`/v1/completions`, which knows no tools, so the same constraint is sent as its `response_format`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from responses_api_models.vllm_model.conversion import RequestConversionError
from responses_api_models.vllm_model.parsers import Tools

EMPTY_PARAMETERS = {"type": "object", "properties": {}}


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool.get("function") or {}


def tool_choice_schema(tools: Tools | None, tool_choice: Any) -> dict[str, Any] | None:
    """The JSON schema a forced tool choice decodes under, or None when the model may choose."""
    if not tools:
        return None
    if isinstance(tool_choice, Mapping):
        name = (tool_choice.get("function") or {}).get("name")
        for tool in tools:
            if _function(tool).get("name") == name:
                return dict(_function(tool).get("parameters") or EMPTY_PARAMETERS)
        raise RequestConversionError(f"tool_choice: function {name!r} is not among the request's tools")
    if tool_choice != "required":
        return None
    alternatives = [
        {
            "properties": {
                "name": {"type": "string", "enum": [_function(tool).get("name")]},
                "parameters": _function(tool).get("parameters") or EMPTY_PARAMETERS,
            },
            "required": ["name", "parameters"],
        }
        for tool in tools
    ]
    return {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": alternatives}}


def completion_response_format(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    """The `response_format` of the `/v1/completions` call continuing the chat request `payload`."""
    schema = tool_choice_schema(payload.get("tools"), payload.get("tool_choice"))
    if schema is not None:
        return {"type": "json_schema", "json_schema": {"name": "tool_calls", "schema": schema}}
    return payload.get("response_format")
