"""The three reward components of example_tool_call_multireward, each 0.0 or 1.0, from the response's calls."""

import json
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym.openai_utils import NeMoGymResponse


class ExpectedCall(BaseModel):
    """The call the task wants. An empty object (no `name`) can never be matched."""

    name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)


class PredictedCall(BaseModel):
    name: str
    arguments: dict[str, Any]


def parse_arguments(arguments: str) -> dict[str, Any] | None:
    """The call's arguments as an object, or None when they are not a JSON object."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def required_parameters(tools: list[Any], name: str) -> list[str]:
    """`parameters.required` of the function tool called `name`; an unknown tool requires nothing."""
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name") == name:
            return list((tool.get("parameters") or {}).get("required") or [])
    return []


def format_score(response: NeMoGymResponse) -> float:
    """1.0 for exactly one function call and no message at all (the task asks for a bare call)."""
    calls = sum(item.type == "function_call" for item in response.output)
    messages = sum(item.type == "message" for item in response.output)
    return float(calls == 1 and messages == 0)


def schema_score(first_call: Any, tools: list[Any]) -> float:
    """1.0 when the first call's arguments are an object holding every required parameter of its tool."""
    if first_call is None:
        return 0.0
    arguments = parse_arguments(first_call.arguments)
    if arguments is None:
        return 0.0
    return float(all(key in arguments for key in required_parameters(tools, first_call.name)))


def correctness_score(predicted: list[PredictedCall], expected: ExpectedCall) -> float:
    """1.0 when some call has the expected name and every expected argument; extra arguments are allowed."""
    if expected.name is None:
        return 0.0
    return float(
        any(
            call.name == expected.name
            and all(
                key in call.arguments and call.arguments[key] == value
                for key, value in expected.arguments.items()
            )
            for call in predicted
        )
    )
