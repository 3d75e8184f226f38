"""nemo_gym.wire.responses: the Responses API types accept the OpenAI spec's shapes unchanged, pick the
training variant of an item that carries token data, refuse what NeMo Gym refuses, sum usage, and never
put a reasoning item's `status` on the wire (real servers, the scripted upstream plays the model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from pydantic import TypeAdapter, ValidationError

from nemo_gym.config.sources import install_root
from nemo_gym.wire.base import TokenIDLogProbMixin, TokenIDLogProbTypedDictMixin
from nemo_gym.wire.responses import (
    RESPONSES_TO_TRAIN,
    NeMoGymEasyInputMessage,
    NeMoGymEasyInputMessageForTraining,
    NeMoGymFunctionCallOutput,
    NeMoGymMessage,
    NeMoGymMessageForTraining,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseFunctionToolCallForTraining,
    NeMoGymResponseInputItem,
    NeMoGymResponseOutputMessage,
    NeMoGymResponseOutputMessageForTraining,
    NeMoGymResponseOutputText,
    NeMoGymResponseReasoningItem,
    NeMoGymResponseReasoningItemForTraining,
    NeMoGymResponseUsage,
    NeMoGymSummary,
    accumulate_response_usage,
    assistant_texts,
)
from tests.helpers import counter_agent_stack
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call, reasoning

TOKENS = {
    "prompt_token_ids": [1, 2, 3],
    "generation_token_ids": [4, 5],
    "generation_log_probs": [-0.5, -0.25],
}


ITEM_ADAPTER = TypeAdapter(NeMoGymResponseInputItem)


WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "description": "",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


SPEC_INPUT_ROW_PARAMS = {
    "input": [
        {"role": "developer", "content": "You are helpful."},
        {"role": "user", "content": "what's it like in sf?"},
    ],
    "tools": [WEATHER_TOOL],
}


SPEC_VERIFY_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1795317170.38,
    "model": "fake-model",
    "output": [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "SF"}',
            "status": "completed",
        },
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": '{"city":"SF","weather_description":"The weather in SF is cold."}',
            "id": None,
            "status": None,
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "It is cold.", "annotations": [], "logprobs": None}],
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [WEATHER_TOOL],
    "incomplete_details": None,
    "usage": {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 30,
    },
}


TRAINABLE_ITEMS = [
    (
        {"role": "user", "content": "hi"},
        NeMoGymEasyInputMessage,
        NeMoGymEasyInputMessageForTraining,
    ),
    (
        {
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_text", "text": "hi"}],
        },
        NeMoGymMessage,
        NeMoGymMessageForTraining,
    ),
    (
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello", "annotations": []}],
        },
        NeMoGymResponseOutputMessage,
        NeMoGymResponseOutputMessageForTraining,
    ),
    (
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
        NeMoGymResponseFunctionToolCall,
        NeMoGymResponseFunctionToolCallForTraining,
    ),
    (
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]},
        NeMoGymResponseReasoningItem,
        NeMoGymResponseReasoningItemForTraining,
    ),
]


TRAINABLE_IDS = [plain.__name__ for _, plain, _ in TRAINABLE_ITEMS]


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def response_row(output: list[dict[str, Any]]) -> dict[str, Any]:
    return {**SPEC_VERIFY_RESPONSE, "output": output}


EXAMPLE_COUNTER_ROWS = "resources_servers/example_session_state_mgmt/data/example.jsonl"


def test_spec_input_row_round_trips() -> None:
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate(SPEC_INPUT_ROW_PARAMS)
    assert dump(params) == SPEC_INPUT_ROW_PARAMS
    assert [type(item) for item in params.input] == [NeMoGymEasyInputMessage, NeMoGymEasyInputMessage]


def test_spec_verify_response_round_trips() -> None:
    response = NeMoGymResponse.model_validate(SPEC_VERIFY_RESPONSE)
    assert dump(response) == SPEC_VERIFY_RESPONSE
    assert NeMoGymResponse.model_validate_json(response.model_dump_json(exclude_unset=True)) == response
    assert [type(item) for item in response.output] == [
        NeMoGymResponseFunctionToolCall,
        NeMoGymFunctionCallOutput,
        NeMoGymResponseOutputMessage,
    ]


@pytest.mark.parametrize(("raw", "plain", "training"), TRAINABLE_ITEMS, ids=TRAINABLE_IDS)
def test_item_with_token_fields_validates_as_training_variant(raw: dict, plain: type, training: type) -> None:
    with_tokens = {**raw, **TOKENS}
    assert RESPONSES_TO_TRAIN[plain] is training

    item = ITEM_ADAPTER.validate_python(with_tokens)
    assert type(item) is training
    assert dump(item) == with_tokens
    assert type(ITEM_ADAPTER.validate_python(raw)) is plain

    params = NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": [with_tokens, raw]})
    assert [type(x) for x in params.input] == [training, plain]
    assert dump(params) == {"input": [with_tokens, raw]}

    response = NeMoGymResponse.model_validate(response_row([with_tokens, raw]))
    assert [type(x) for x in response.output] == [training, plain]
    assert dump(response)["output"] == [with_tokens, raw]


@pytest.mark.parametrize(("raw", "plain", "training"), TRAINABLE_ITEMS, ids=TRAINABLE_IDS)
def test_constructed_training_item_keeps_tokens_through_a_response(
    raw: dict, plain: type, training: type
) -> None:
    routed = [[[0, 1]], [[2, 3]]]
    item = training.model_validate({**raw, **TOKENS, "routed_experts": routed})
    response = NeMoGymResponse.model_validate(response_row([]))
    response.output = [item]
    dumped = dump(response)["output"][0]
    assert dumped == {**raw, **TOKENS, "routed_experts": routed}
    assert type(NeMoGymResponse.model_validate_json(response.model_dump_json()).output[0]) is training


def test_partial_token_fields_are_an_error_not_silently_dropped() -> None:
    with pytest.raises(ValidationError, match="generation_token_ids"):
        ITEM_ADAPTER.validate_python({"role": "user", "content": "hi", "prompt_token_ids": [1]})


def test_training_variants_are_their_plain_kind_plus_the_mixin() -> None:
    assert len(RESPONSES_TO_TRAIN) == 5
    for plain, training in RESPONSES_TO_TRAIN.items():
        assert issubclass(training, plain) and issubclass(training, TokenIDLogProbMixin)
    assert set(TokenIDLogProbTypedDictMixin.__required_keys__) == set(TOKENS)


def test_unknown_item_type_is_a_clear_error() -> None:
    with pytest.raises(ValidationError) as error:
        NeMoGymResponseCreateParamsNonStreaming.model_validate(
            {"input": [{"type": "computer_call", "id": "x"}]}
        )
    assert [e["loc"] for e in error.value.errors() if e["type"] == "unknown_response_item"] == [
        ("input", "items", 0)
    ]
    assert "'type' must be one of" in str(error.value)


def test_unknown_create_param_is_rejected_by_name() -> None:
    with pytest.raises(ValidationError) as error:
        NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": "hi", "top_k": 20})
    assert [e["loc"] for e in error.value.errors()] == [("top_k",)]
    assert "top_k" in str(error.value)


def test_create_params_defaults_are_not_emitted_but_nulls_are_kept() -> None:
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": "hi"})
    assert (params.parallel_tool_calls, params.tool_choice, params.tools) == (True, "auto", [])
    assert dump(params) == {"input": "hi"}
    nulls = {"input": "hi", "parallel_tool_calls": None, "tool_choice": None, "user": "", "stream": False}
    assert dump(NeMoGymResponseCreateParamsNonStreaming.model_validate(nulls)) == nulls


@pytest.mark.parametrize("tool_choice", ["none", "auto", "required", {"type": "function", "name": "f"}])
def test_tool_choice_values(tool_choice: Any) -> None:
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate(
        {"input": "hi", "tool_choice": tool_choice}
    )
    assert params.tool_choice == tool_choice


def test_streaming_is_rejected() -> None:
    with pytest.raises(ValidationError, match="stream"):
        NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": "hi", "stream": True})


def test_function_tools_are_typed_and_other_tools_pass_through() -> None:
    tools = [
        WEATHER_TOOL,
        {"type": "web_search", "search_context_size": "low"},
        {"type": "mcp", "server_label": "x"},
    ]
    params = NeMoGymResponseCreateParamsNonStreaming.model_validate({"input": "hi", "tools": tools})
    assert dump(params)["tools"] == tools
    with pytest.raises(ValidationError, match="paramters"):
        NeMoGymResponseCreateParamsNonStreaming.model_validate(
            {"input": "hi", "tools": [{"type": "function", "name": "f", "paramters": {}}]}
        )
    with pytest.raises(ValidationError, match="name"):
        NeMoGymResponseCreateParamsNonStreaming.model_validate(
            {"input": "hi", "tools": [{"type": "function"}]}
        )


def test_assistant_input_message_shape_depends_on_content() -> None:
    easy = ITEM_ADAPTER.validate_python({"role": "assistant", "content": "earlier answer"})
    output = ITEM_ADAPTER.validate_python(
        {
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": "x", "annotations": []}],
        }
    )
    assert type(easy) is NeMoGymEasyInputMessage
    assert type(output) is NeMoGymResponseOutputMessage


def test_output_text_reads_assistant_string_content_and_only_the_assistant() -> None:
    output = [
        {"type": "message", "role": "assistant", "content": "Plain "},
        {"type": "message", "role": "user", "content": "not the model's"},
        {"role": "assistant", "content": [{"type": "input_text", "text": "not output text"}]},
        reasoning("thinking"),
        function_call("f", {"x": 1}),
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_2",
            "content": [
                {"type": "refusal", "refusal": "no"},
                {"type": "output_text", "text": "parts", "annotations": []},
            ],
        },
    ]
    response = NeMoGymResponse.model_validate(response_row(output))
    assert response.output_text == "Plain parts"
    assert [assistant_texts(item) for item in response.output] == [["Plain "], [], [], [], [], ["parts"]]


def test_identifying_constants_are_dumped_even_when_defaulted() -> None:
    call = NeMoGymResponseFunctionToolCall(call_id="c", name="f", arguments="{}")
    assert dump(call) == {"call_id": "c", "name": "f", "arguments": "{}", "type": "function_call"}
    message = NeMoGymResponseOutputMessage(
        id="m", content=[NeMoGymResponseOutputText(text="x", annotations=[])]
    )
    assert dump(message) == {
        "id": "m",
        "role": "assistant",
        "type": "message",
        "content": [{"type": "output_text", "text": "x", "annotations": []}],
    }
    reasoning = NeMoGymResponseReasoningItem(id="rs", summary=[NeMoGymSummary(text="t")])
    assert dump(reasoning) == {
        "id": "rs",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "t"}],
    }
    for item in (call, message, reasoning):
        assert type(ITEM_ADAPTER.validate_python(dump(item))) is type(item)
    output = NeMoGymFunctionCallOutput(call_id="c", output="ok")
    response = NeMoGymResponse(
        id="r",
        created_at=1.0,
        model="m",
        output=[output],
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
    )
    assert dump(response)["object"] == "response"


def test_unknown_fields_of_newer_servers_survive_a_response_round_trip() -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": "thinking"}],
    }
    raw = {**response_row([reasoning]), "store": True, "billing": {"payer": "developer"}}
    raw["usage"] = {
        **raw["usage"],
        "input_tokens_details": {"cached_tokens": 0, "input_tokens_per_turn": [20]},
    }
    assert dump(NeMoGymResponse.model_validate(raw)) == raw


# ------------------------------------------------------------------------------------------------------
# Reasoning items never carry `status` on the wire (real servers, the scripted upstream plays the model)
# ------------------------------------------------------------------------------------------------------


@dataclass
class ReasoningStack:
    model_url: str
    agent_url: str
    model: str
    upstream: ScriptedUpstream


@pytest.fixture(scope="module")
def reasoning_stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReasoningStack]:
    """openai_model in front of the scripted upstream, and a simple_agent over it and a counter environment."""
    model = fresh_model("reasoning-status")
    workdir = tmp_path_factory.mktemp("reasoning_status")
    with counter_agent_stack(scripted_upstream.base_url, model, workdir) as stack:
        yield ReasoningStack(stack.model_url, stack.agent_url, model, scripted_upstream)


def reasoning_with_status(text: str) -> dict[str, Any]:
    return {**reasoning(text), "status": "completed"}


def reasoning_items(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "reasoning"]


def test_reasoning_status_reaches_neither_the_caller_nor_the_upstream(
    reasoning_stack: ReasoningStack,
) -> None:
    stack = reasoning_stack
    stack.upstream.script(stack.model, [{"output": [reasoning_with_status("now"), assistant_message("ok")]}])
    body = {"input": [{"role": "user", "content": "hi"}, reasoning_with_status("earlier")]}
    answer = requests.post(f"{stack.model_url}/v1/responses", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    returned = reasoning_items(answer.json()["output"])
    sent = reasoning_items(stack.upstream.requests(stack.model)[-1]["body"]["input"])
    assert [item["summary"][0]["text"] for item in returned + sent] == ["now", "earlier"]
    assert all("status" not in item for item in returned + sent)


def test_a_rollout_keeps_no_reasoning_status(reasoning_stack: ReasoningStack) -> None:
    stack = reasoning_stack
    stack.upstream.script(
        stack.model,
        [
            {"output": [reasoning_with_status("look"), function_call("get_counter_value", {})]},
            {"output": [reasoning_with_status("answer"), assistant_message("3")]},
        ],
    )
    row = json.loads((install_root() / EXAMPLE_COUNTER_ROWS).read_text().splitlines()[0])
    answer = requests.post(f"{stack.agent_url}/run", json=row, timeout=30)
    assert answer.status_code == 200, answer.text
    output = reasoning_items(answer.json()["response"]["output"])
    resent = reasoning_items(stack.upstream.requests(stack.model)[-1]["body"]["input"])
    assert [item["summary"][0]["text"] for item in output + resent] == ["look", "answer", "look"]
    assert all("status" not in item for item in output + resent)


def usage(tokens: int, cached: int | None, reasoning: int | None) -> NeMoGymResponseUsage:
    return NeMoGymResponseUsage.model_validate(
        {
            "input_tokens": tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": 2 * tokens,
        }
    )


def test_usage_sums_keep_an_unknown_detail_unknown() -> None:
    total = accumulate_response_usage(usage(10, 4, 1), usage(5, None, 2))
    assert (total.input_tokens, total.output_tokens, total.total_tokens) == (15, 15, 30)
    assert (total.input_tokens_details.cached_tokens, total.output_tokens_details.reasoning_tokens) == (
        None,
        3,
    )
    first = usage(1, 1, 1)
    assert (
        accumulate_response_usage(None, first) == first
        and accumulate_response_usage(None, first) is not first
    )
    assert accumulate_response_usage(None, None) is None
