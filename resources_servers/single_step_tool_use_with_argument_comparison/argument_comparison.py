"""single_step_tool_use_with_argument_comparison's expected actions (as rows carry them) and the pure
grading that compares the model's next action with the expected one, argument by argument.

Grading runs in a CPU-pool worker: difflib's ratio is quadratic in the length of the strings it compares, and
both the arguments and the expected values can be long.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class StepRewardCategory(StrEnum):
    """Why a step earned its reward; the values are NeMo Gym's, so results can be compared across both."""

    NO_ACTION_FOUND = "No tool call or chat message was found in the response"
    NO_EXPECTED_TOOL_CALL = "No tool call was found when one was expected"
    EXPECTED_CHAT_MESSAGE_FOUND = "A chat message was found as expected"
    NO_EXPECTED_CHAT_MESSAGE = "A tool call was executed when a chat message was expected"
    UNEXPECTED_TOOL = "The tool in a tool call is not the expected tool"
    ARGUMENTS_DECODE_ERROR = (
        "An error occurred when decoding the arguments string in a tool call as a JSON object"
    )
    ARGUMENT_VALUE_TYPE_DIFFERENT = (
        "The type of an argument value in a tool call is different than the expected type"
    )
    ARGUMENT_OBJECT_KEYS_DIFFERENT = "The keys in an object in an argument value in a tool call are different than the keys in the expected object"
    ARGUMENT_LIST_LENGTH_DIFFERENT = (
        "A list in an argument value in a tool call has a different length than the expected list"
    )
    ARGUMENT_VALUE_DIFFERENT = "An argument value in a tool call is different than the expected value"
    CLOSE_TOOL_CALL = (
        "The tool call has the expected tool and arguments close to, not equal to, the expected ones"
    )
    EXPECTED_TOOL_CALL = "A tool call that matches the expected tool call was found"


class ToolCallComparatorConfig(BaseModel):
    """How arguments are compared; NeMo Gym's keys plus `string_similarity` and `partial_credit`."""

    model_config = ConfigDict(extra="forbid")

    string_similarity: Literal["word_count", "difflib"] = "word_count"
    word_count_similarity_threshold: float = Field(default=0.1, ge=0, le=0.5)
    difflib_similarity_threshold: float = Field(default=0.8, ge=0, le=1)
    floating_point_comparison_threshold: float = Field(default=1e-6, ge=0)
    partial_credit: bool = False


class ExpectedMessage(BaseModel):
    type: Literal["message"]
    content: str


class ExpectedFunctionCall(BaseModel):
    type: Literal["function_call"]
    name: str
    arguments: str

    @field_validator("arguments")
    @classmethod
    def _json_object(cls, value: str) -> str:
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise ValueError('must be a JSON object encoded as a string, e.g. \'{"city": "Paris"}\'')
        return value


ExpectedAction = Annotated[ExpectedMessage | ExpectedFunctionCall, Field(discriminator="type")]


@dataclass(frozen=True)
class Action:
    """A step as plain data: a function call (name, raw arguments) or a chat message."""

    kind: Literal["function_call", "message"]
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True)
class ActionGrade:
    reward: float
    category: StepRewardCategory
    name_match: bool | None = None
    argument_scores: dict[str, float] = field(default_factory=dict)


def expected_of(action: ExpectedMessage | ExpectedFunctionCall) -> Action:
    if isinstance(action, ExpectedMessage):
        return Action("message")
    return Action("function_call", action.name, action.arguments)


def normalized(text: str) -> str:
    return " ".join(text.casefold().split())


def string_similarity(expected: str, actual: str, config: ToolCallComparatorConfig) -> tuple[float, bool]:
    """(score in [0, 1], close enough?) of two strings after normalization (case, whitespace)."""
    expected, actual = normalized(expected), normalized(actual)
    if expected == actual:
        return 1.0, True
    if config.string_similarity == "difflib":
        ratio = difflib.SequenceMatcher(None, expected, actual, autojunk=False).ratio()
        return ratio, ratio >= config.difflib_similarity_threshold
    expected_words, actual_words = Counter(expected.split()), Counter(actual.split())
    if expected_words.total() < 2 or actual_words.total() < 2:
        return 0.0, False
    shared = (expected_words & actual_words).total() / (expected_words.total() + actual_words.total())
    return 2 * shared, shared >= config.word_count_similarity_threshold


def kind_of(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(type(value))
    return "number" if isinstance(value, int | float) else type(value).__name__


def compare_values(
    expected: Any, actual: Any, config: ToolCallComparatorConfig
) -> tuple[float, StepRewardCategory | None]:
    """(score, why it fails or None): strings by similarity, numbers within the float tolerance, other
    values exactly; containers need the same keys or length and score as their worst element."""
    if kind_of(expected) != kind_of(actual):
        return 0.0, StepRewardCategory.ARGUMENT_VALUE_TYPE_DIFFERENT
    if isinstance(expected, str):
        score, close = string_similarity(expected, actual, config)
        return score, None if close else StepRewardCategory.ARGUMENT_VALUE_DIFFERENT
    if isinstance(expected, dict | list):
        if isinstance(expected, dict) and set(expected) != set(actual):
            return 0.0, StepRewardCategory.ARGUMENT_OBJECT_KEYS_DIFFERENT
        if isinstance(expected, list) and len(expected) != len(actual):
            return 0.0, StepRewardCategory.ARGUMENT_LIST_LENGTH_DIFFERENT
        if isinstance(expected, dict):
            pairs = [(expected[key], actual[key]) for key in expected]
        else:
            pairs = list(zip(expected, actual, strict=True))
        results = [compare_values(want, got, config) for want, got in pairs]
        failure = next((category for _, category in results if category is not None), None)
        return min((score for score, _ in results), default=1.0), failure
    if kind_of(expected) == "number":
        close = abs(expected - actual) <= config.floating_point_comparison_threshold
        return (1.0, None) if close else (0.0, StepRewardCategory.ARGUMENT_VALUE_DIFFERENT)
    return (1.0, None) if expected == actual else (0.0, StepRewardCategory.ARGUMENT_VALUE_DIFFERENT)


def compare_calls(expected: Action, actual: Action, config: ToolCallComparatorConfig) -> ActionGrade:
    """Same tool is checked by the caller; here the arguments decide, one score per argument name."""
    expected_arguments: dict[str, Any] = json.loads(expected.arguments)  # checked when the row was read
    try:
        arguments = json.loads(actual.arguments)
    except (ValueError, RecursionError):
        arguments = None
    if not isinstance(arguments, dict):
        return ActionGrade(0.0, StepRewardCategory.ARGUMENTS_DECODE_ERROR, name_match=True)
    results = {
        key: compare_values(expected_arguments[key], arguments[key], config)
        if key in arguments
        else (0.0, None)
        for key in expected_arguments
    }
    scores = {key: score for key, (score, _) in results.items()}
    scores |= {key: 0.0 for key in arguments if key not in expected_arguments}
    if set(arguments) != set(expected_arguments):
        return ActionGrade(0.0, StepRewardCategory.ARGUMENT_OBJECT_KEYS_DIFFERENT, True, scores)
    failure = next((category for _, category in results.values() if category is not None), None)
    if failure is not None:
        return ActionGrade(0.0, failure, True, scores)
    if all(score == 1.0 for score in scores.values()) or not config.partial_credit:
        return ActionGrade(1.0, StepRewardCategory.EXPECTED_TOOL_CALL, True, scores)
    return ActionGrade(sum(scores.values()) / len(scores), StepRewardCategory.CLOSE_TOOL_CALL, True, scores)


def grade_action(expected: Action, actual: Action | None, config: ToolCallComparatorConfig) -> ActionGrade:
    """The reward and category of the model's first action against the expected one."""
    if actual is None:
        return ActionGrade(0.0, StepRewardCategory.NO_ACTION_FOUND)
    if expected.kind == "message":
        if actual.kind == "message":
            return ActionGrade(1.0, StepRewardCategory.EXPECTED_CHAT_MESSAGE_FOUND)
        return ActionGrade(0.0, StepRewardCategory.NO_EXPECTED_CHAT_MESSAGE)
    if actual.kind == "message":
        return ActionGrade(0.0, StepRewardCategory.NO_EXPECTED_TOOL_CALL)
    if actual.name != expected.name:
        return ActionGrade(0.0, StepRewardCategory.UNEXPECTED_TOOL, name_match=False)
    try:
        return compare_calls(expected, actual, config)
    except RecursionError:  # arguments nested hundreds of levels deep
        return ActionGrade(0.0, StepRewardCategory.ARGUMENT_VALUE_DIFFERENT, name_match=True)
