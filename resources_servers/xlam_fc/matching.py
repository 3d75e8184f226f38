"""Matching the function calls of a response against the calls a task expects (xlam_fc's grading)."""

import json
from typing import Any

from pydantic import BaseModel, Field

from nemo_gym.openai_utils import NeMoGymResponse


class FunctionCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


def parse_arguments(arguments: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict; anything that is not a JSON object counts as no arguments."""
    try:
        parsed = json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def predicted_calls(response: NeMoGymResponse) -> list[FunctionCall]:
    """Every function call of the response, in output order."""
    return [
        FunctionCall(name=item.name, arguments=parse_arguments(item.arguments))
        for item in response.output
        if getattr(item, "type", None) == "function_call"
    ]


def call_matches(expected: FunctionCall, predicted: FunctionCall) -> bool:
    """Same name and every expected argument present with an equal value; extra predicted ones are allowed."""
    if expected.name != predicted.name:
        return False
    return all(
        key in predicted.arguments and predicted.arguments[key] == value
        for key, value in expected.arguments.items()
    )


def count_matches(expected: list[FunctionCall], predicted: list[FunctionCall]) -> int:
    """Greedy one-to-one matching: each expected call takes the first still-unused predicted call it matches."""
    used = [False] * len(predicted)
    matched = 0
    for want in expected:
        for index, got in enumerate(predicted):
            if not used[index] and call_matches(want, got):
                used[index] = True
                matched += 1
                break
    return matched
