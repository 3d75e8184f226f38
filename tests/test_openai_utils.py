"""NeMo Gym's import path `nemo_gym.openai_utils`: every public name is there, and the types it names accept
NeMo Gym's real data unchanged. The types themselves are tested beside their modules
(tests/core/wire/test_responses.py, tests/core/wire/test_chat_completions.py)."""

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from nemo_gym import openai_utils
from nemo_gym.openai_utils import (
    RETRY_ERROR_CODES,
    NeMoGymEasyInputMessage,
    NeMoGymFunctionCallOutput,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseInputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseReasoningItem,
    TokenIDLogProbMixin,
)

PUBLIC_NAMES = """
TokenIDLogProbMixin TokenIDLogProbTypedDictMixin
NeMoGymSummary NeMoGymResponseReasoningItem NeMoGymResponseOutputText NeMoGymResponseOutputRefusal
NeMoGymContent NeMoGymResponseOutputMessage NeMoGymEasyInputMessage NeMoGymMessage NeMoGymFunctionCallOutput
NeMoGymResponseFunctionToolCall NeMoGymResponseInputText
NeMoGymEasyInputMessageForTraining NeMoGymMessageForTraining NeMoGymResponseOutputMessageForTraining
NeMoGymResponseFunctionToolCallForTraining NeMoGymResponseReasoningItemForTraining RESPONSES_TO_TRAIN
NeMoGymResponseInputItem NeMoGymResponseInput NeMoGymResponseOutputItem
NeMoGymResponseCreateParamsNonStreaming NeMoGymResponse
NeMoGymFunction NeMoGymChatCompletionMessageToolCall NeMoGymChatCompletionMessage
NeMoGymChatCompletionMessageForTraining NeMoGymChoice NeMoGymChatCompletion
NeMoGymFunctionDefinition NeMoGymChatCompletionToolParam NeMoGymChatCompletionContentPartTextParam
NeMoGymChatCompletionUserMessageParam NeMoGymChatCompletionSystemMessageParam
NeMoGymChatCompletionDeveloperMessageParam NeMoGymChatCompletionMessageToolCallFunctionParam
NeMoGymChatCompletionMessageToolCallParam NeMoGymChatCompletionAssistantMessageParam
NeMoGymChatCompletionAssistantMessageForTrainingParam NeMoGymChatCompletionToolMessageParam
NeMoGymFunctionToolParam NeMoGymChatCompletionMessageParam NeMoGymChatCompletionCreateParamsNonStreaming
RATE_LIMIT_ERROR_CODES RETRY_ERROR_CODES assistant_texts
""".split()


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


REPO_ROOT = Path(__file__).resolve().parents[1]
# The example data of every server folder, plus the reference data beside the project where it exists.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
DATA_FILES = sorted(REPO_ROOT.glob("*/*/data/*.jsonl")) + sorted(SHARED_DATA.glob("*/*.jsonl"))
# Files of rollout results (each row has the `response` of one rollout).
ROLLOUT_FILES = [path for path in DATA_FILES if any("response" in row for row in read_rows(path))]

ITEM_ADAPTER = TypeAdapter(NeMoGymResponseInputItem)


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def test_every_public_name_is_defined() -> None:
    missing = [name for name in PUBLIC_NAMES if not hasattr(openai_utils, name)]
    assert missing == []


def test_retry_codes() -> None:
    assert openai_utils.RATE_LIMIT_ERROR_CODES == [429, 502, 503, 504, 520]
    assert sorted(RETRY_ERROR_CODES) == [429, 500, 502, 503, 504, 520]


def test_recorded_data_is_found() -> None:
    assert DATA_FILES
    assert {path for path in DATA_FILES if path.name == "example_rollouts.jsonl"} <= set(ROLLOUT_FILES)


def data_file_id(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT.parent))


@pytest.mark.parametrize("path", DATA_FILES, ids=data_file_id)
def test_recorded_create_params_round_trip(path: Path) -> None:
    for row in read_rows(path):
        raw = row["responses_create_params"]
        params = NeMoGymResponseCreateParamsNonStreaming.model_validate(raw)
        assert dump(params) == raw
        if set(raw) == set(NeMoGymResponseCreateParamsNonStreaming.model_fields):
            # Rows written by a rollout carry every default: our defaults must reproduce them exactly.
            assert params.model_dump(mode="json") == raw


@pytest.mark.parametrize("path", ROLLOUT_FILES, ids=data_file_id)
def test_recorded_rollout_responses_round_trip(path: Path) -> None:
    for row in read_rows(path):
        response = NeMoGymResponse.model_validate(row["response"])
        assert dump(response) == row["response"]
        for item, raw in zip(response.output, row["response"]["output"], strict=True):
            assert not isinstance(item, TokenIDLogProbMixin)
            if set(type(item).model_fields) <= set(raw):
                assert item.model_dump(mode="json") == raw


def test_recorded_rollout_items_validate_as_the_expected_classes() -> None:
    expected = {
        ("message", "assistant"): NeMoGymResponseOutputMessage,
        ("message", "user"): NeMoGymEasyInputMessage,
        ("function_call", None): NeMoGymResponseFunctionToolCall,
        ("function_call_output", None): NeMoGymFunctionCallOutput,
        ("reasoning", None): NeMoGymResponseReasoningItem,
    }
    seen = set()
    for path in ROLLOUT_FILES:
        for row in read_rows(path):
            for raw in row["response"]["output"]:
                key = (raw["type"], raw.get("role"))
                assert type(ITEM_ADAPTER.validate_python(raw)) is expected[key]
                seen.add(key)
    # The project's own example rollouts alone hold tool calls, their outputs and final messages.
    assert {("function_call", None), ("function_call_output", None), ("message", "assistant")} <= seen
