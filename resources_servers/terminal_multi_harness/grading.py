"""Next-action comparison for tool-calling agent harnesses (Codex, OpenCode, ...): the model's next step
is a chat message, one tool call, or a batch of tool calls in one turn, and it must be the demonstrated
step: same kind, same tool names, arguments equal (strings close enough), volatile arguments ignored.

Runs in a CPU-pool worker: difflib is quadratic in the length of the strings it compares.
"""

from __future__ import annotations

import json
from collections import Counter
from difflib import SequenceMatcher
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from nemo_gym.openai_utils import NeMoGymResponse


class StepRewardCategory(StrEnum):
    """Why a step earned its reward (NeMo Gym's sentences, so results compare across both)."""

    NO_ACTION_FOUND = "No tool call or chat message was found in the response"
    ACTION_TYPE_MISMATCH = "The actual action type does not match the expected action type"
    MESSAGE_CONTENT_DIFFERENT = "The assistant message content is different than expected"
    EXPECTED_CHAT_MESSAGE_FOUND = "A chat message that matches the expected message was found"
    UNEXPECTED_TOOL = "The tool in a tool call is not the expected tool"
    ARGUMENTS_DECODE_ERROR = "An error occurred when decoding the arguments string in a tool call as JSON"
    ARGUMENT_VALUE_TYPE_DIFFERENT = "The type of an argument value in a tool call is different than expected"
    ARGUMENT_OBJECT_KEYS_DIFFERENT = "The keys in an object argument value are different than expected"
    ARGUMENT_LIST_LENGTH_DIFFERENT = "A list in an argument value has a different length than expected"
    ARGUMENT_VALUE_DIFFERENT = "An argument value in a tool call is different than expected"
    FUNCTION_CALL_BATCH_LENGTH_DIFFERENT = "The number of tool calls in a batch is different than expected"
    FUNCTION_CALL_BATCH_CALL_DIFFERENT = "A tool call in the batch does not match the expected batch"
    EXPECTED_TOOL_CALL = "A tool call that matches the expected tool call was found"
    EXPECTED_TOOL_CALL_BATCH = "A tool-call batch that matches the expected batch was found"


MATCHES = frozenset(
    {
        StepRewardCategory.EXPECTED_CHAT_MESSAGE_FOUND,
        StepRewardCategory.EXPECTED_TOOL_CALL,
        StepRewardCategory.EXPECTED_TOOL_CALL_BATCH,
    }
)


class ToolCallComparatorConfig(BaseModel):
    """Strings compare by difflib ratio (`string_similarity_threshold`, NeMo Gym's later key) or, when
    only `word_count_similarity_threshold` is given (its earlier key), by shared words."""

    model_config = ConfigDict(extra="forbid")

    string_similarity_threshold: float | None = Field(default=None, ge=0, le=1)
    word_count_similarity_threshold: float | None = Field(default=None, ge=0, le=0.5)
    floating_point_comparison_threshold: float = Field(default=1e-6, ge=0)
    ignored_argument_keys_by_tool: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_string_measure(self) -> ToolCallComparatorConfig:
        if (self.string_similarity_threshold is None) == (self.word_count_similarity_threshold is None):
            raise ValueError(
                "set exactly one of string_similarity_threshold, word_count_similarity_threshold"
            )
        return self


class MessageAction(BaseModel):
    type: Literal["message"]
    content: str


class FunctionCallAction(BaseModel):
    type: Literal["function_call"]
    name: str
    arguments: str


def _json_arguments(value: str) -> str:
    try:
        json.loads(value)
    except (ValueError, RecursionError):
        raise ValueError("arguments must be JSON text") from None
    return value


class ExpectedFunctionCall(FunctionCallAction):
    """A gold call: its arguments must decode (a model's may not; that is graded, not refused)."""

    @field_validator("arguments")
    @classmethod
    def _decodes(cls, value: str) -> str:
        return _json_arguments(value)


class FunctionCallBatchAction(BaseModel):
    type: Literal["function_call_batch"]
    calls: list[FunctionCallAction]
    ordered: bool = True


class ExpectedFunctionCallBatch(FunctionCallBatchAction):
    calls: list[ExpectedFunctionCall] = Field(min_length=1)


ExpectedAction = Annotated[
    MessageAction | ExpectedFunctionCall | ExpectedFunctionCallBatch, Field(discriminator="type")
]
Action = MessageAction | FunctionCallAction | FunctionCallBatchAction


def action_of(response: NeMoGymResponse) -> Action | None:
    """The model's step: its function calls (one is a call, more a batch in output order); without any,
    the first output text of its first assistant message; else None."""
    calls: list[FunctionCallAction] = []
    text: str | None = None
    for item in response.output:
        kind = getattr(item, "type", None)
        if kind == "function_call":
            calls.append(FunctionCallAction(type="function_call", name=item.name, arguments=item.arguments))
        elif kind == "message" and getattr(item, "role", None) == "assistant" and text is None:
            parts = item.content if isinstance(item.content, list) else []
            text = next((part.text for part in parts if getattr(part, "type", None) == "output_text"), None)
    if len(calls) == 1:
        return calls[0]
    if calls:
        return FunctionCallBatchAction(type="function_call_batch", calls=calls, ordered=True)
    return MessageAction(type="message", content=text) if text is not None else None


def texts_match(expected: str, actual: str, config: ToolCallComparatorConfig) -> bool:
    if config.string_similarity_threshold is not None:
        return SequenceMatcher(None, expected, actual).ratio() >= config.string_similarity_threshold
    wanted, said = Counter(expected.strip().lower().split()), Counter(actual.strip().lower().split())
    if wanted.total() < 2 or said.total() < 2:
        return expected == actual
    shared = (wanted & said).total() / (wanted.total() + said.total())
    return shared >= config.word_count_similarity_threshold


def without_ignored(tool: str, value: Any, config: ToolCallComparatorConfig) -> Any:
    """`value` without the tool's volatile keys (timeouts, output caps) at any depth. OpenCode's `batch`
    tool carries `tool_calls: [{"tool", "parameters"}]`: each child's parameters drop its own tool's keys."""
    if isinstance(value, list):
        return [without_ignored(tool, item, config) for item in value]
    if not isinstance(value, dict):
        return value
    ignored = set(config.ignored_argument_keys_by_tool.get(tool, ()))
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if key in ignored:
            continue
        if tool == "batch" and key == "tool_calls" and isinstance(item, list):
            kept[key] = [_child_without_ignored(child, config) for child in item]
        else:
            kept[key] = without_ignored(tool, item, config)
    return kept


def _child_without_ignored(child: Any, config: ToolCallComparatorConfig) -> Any:
    if isinstance(child, dict) and isinstance(child.get("tool"), str):
        return {**child, "parameters": without_ignored(child["tool"], child.get("parameters"), config)}
    return child


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def values_differ(expected: Any, actual: Any, config: ToolCallComparatorConfig) -> StepRewardCategory | None:
    """The first difference between two decoded argument values, or None when they match."""
    if _kind(expected) != _kind(actual):
        return StepRewardCategory.ARGUMENT_VALUE_TYPE_DIFFERENT
    if isinstance(expected, dict):
        if set(expected) != set(actual):
            return StepRewardCategory.ARGUMENT_OBJECT_KEYS_DIFFERENT
        return next(
            (found for key in expected if (found := values_differ(expected[key], actual[key], config))), None
        )
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return StepRewardCategory.ARGUMENT_LIST_LENGTH_DIFFERENT
        return next(
            (found for e, a in zip(expected, actual, strict=True) if (found := values_differ(e, a, config))),
            None,
        )
    if _kind(expected) == "number":
        close = abs(actual - expected) < config.floating_point_comparison_threshold
        return None if close else StepRewardCategory.ARGUMENT_VALUE_DIFFERENT
    if isinstance(expected, str):
        return None if texts_match(expected, actual, config) else StepRewardCategory.ARGUMENT_VALUE_DIFFERENT
    return None if expected == actual else StepRewardCategory.ARGUMENT_VALUE_DIFFERENT


def compare_call(
    expected: FunctionCallAction, actual: FunctionCallAction, config: ToolCallComparatorConfig
) -> StepRewardCategory:
    if expected.name != actual.name:
        return StepRewardCategory.UNEXPECTED_TOOL
    try:
        wanted, given = json.loads(expected.arguments), json.loads(actual.arguments)
    except (ValueError, RecursionError):
        return StepRewardCategory.ARGUMENTS_DECODE_ERROR
    try:
        difference = values_differ(
            without_ignored(expected.name, wanted, config),
            without_ignored(actual.name, given, config),
            config,
        )
    except RecursionError:
        difference = StepRewardCategory.ARGUMENT_VALUE_DIFFERENT
    return difference or StepRewardCategory.EXPECTED_TOOL_CALL


def compare_batch(
    expected: FunctionCallBatchAction, actual: FunctionCallBatchAction, config: ToolCallComparatorConfig
) -> StepRewardCategory:
    """Same number of calls; in order when the gold batch is `ordered`, else each gold call takes the
    first still unmatched call that matches it."""
    if len(expected.calls) != len(actual.calls):
        return StepRewardCategory.FUNCTION_CALL_BATCH_LENGTH_DIFFERENT
    if expected.ordered:
        for wanted, given in zip(expected.calls, actual.calls, strict=True):
            if (found := compare_call(wanted, given, config)) not in MATCHES:
                return found
        return StepRewardCategory.EXPECTED_TOOL_CALL_BATCH
    unmatched = list(actual.calls)
    for wanted in expected.calls:
        last_miss = StepRewardCategory.FUNCTION_CALL_BATCH_CALL_DIFFERENT
        for index, given in enumerate(unmatched):
            found = compare_call(wanted, given, config)
            if found in MATCHES:
                unmatched.pop(index)
                break
            last_miss = found
        else:
            return last_miss
    return StepRewardCategory.EXPECTED_TOOL_CALL_BATCH


def grade_action(
    expected: Action, actual: Action | None, config: ToolCallComparatorConfig
) -> StepRewardCategory:
    if actual is None:
        return StepRewardCategory.NO_ACTION_FOUND
    if expected.type != actual.type:
        return StepRewardCategory.ACTION_TYPE_MISMATCH
    if isinstance(expected, MessageAction):
        if texts_match(expected.content, actual.content, config):
            return StepRewardCategory.EXPECTED_CHAT_MESSAGE_FOUND
        return StepRewardCategory.MESSAGE_CONTENT_DIFFERENT
    if isinstance(expected, FunctionCallBatchAction):
        return compare_batch(expected, actual, config)
    return compare_call(expected, actual, config)
