"""The Responses <-> Chat Completions rules of vllm_model, one test per rule, as exact input -> output."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionMessage,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from responses_api_models.vllm_model.conversion import (
    ReasoningHandling,
    RequestConversionError,
    ServerDefaults,
    UpstreamReplyError,
    apply_server_defaults,
    chat_completion_to_response,
    chat_message_to_output_items,
    empty_chat_completion,
    ends_with_empty_assistant_turn,
    generation_mismatch,
    responses_to_chat_body,
)
from responses_api_models.vllm_model.parsers import OutputParsers

NO_PARSER = ReasoningHandling(uses_reasoning_parser=False)
PARSER = ReasoningHandling(uses_reasoning_parser=True)
PARSER_NOT_INTERLEAVED = ReasoningHandling(uses_reasoning_parser=True, uses_interleaved_reasoning=False)
HEX_ID = re.compile(r"^(rs|msg|resp)_[0-9a-f]{32}$")
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}


def request(**fields: Any) -> NeMoGymResponseCreateParamsNonStreaming:
    return NeMoGymResponseCreateParamsNonStreaming.model_validate(fields)


def chat_body(handling: ReasoningHandling = NO_PARSER, **fields: Any) -> dict[str, Any]:
    return responses_to_chat_body(request(**fields), handling)


def messages(items: Any, handling: ReasoningHandling = NO_PARSER) -> list[dict[str, Any]]:
    return chat_body(handling, input=items)["messages"]


def completion(
    message: dict[str, Any], finish_reason: str = "stop", usage: Any = None
) -> NeMoGymChatCompletion:
    return NeMoGymChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "upstream-name",
            "choices": [
                {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", **message}}
            ],
            "usage": usage,
        }
    )


def output_items(message: dict[str, Any], parser: bool = True) -> list[dict[str, Any]]:
    return chat_message_to_output_items(NeMoGymChatCompletionMessage.model_validate(message), parser)


def without_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Generated ids replaced by their prefix (after checking they are `<prefix>_<32 hex>`)."""
    stripped = []
    for item in items:
        if item["type"] in ("message", "reasoning"):
            assert HEX_ID.match(item["id"]), item["id"]
            item = {**item, "id": item["id"].split("_")[0] + "_"}
        stripped.append(item)
    return stripped


def text_message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ---- request direction -------------------------------------------------------------------------------------


def test_string_input_is_one_user_message_with_a_text_part() -> None:
    assert chat_body(input="Hi there") == {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi there"}]}]
    }


def test_user_system_developer_roles_are_kept_with_their_content() -> None:
    assert messages(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "developer", "content": "Use tools."},
            {"role": "user", "content": "Hi"},
        ]
    ) == [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "Hi"},
    ]


def test_instructions_become_a_leading_system_message() -> None:
    assert chat_body(input="Hello", instructions="Answer in French.")["messages"] == [
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "text", "text": "Hello"}]},
    ]


def test_developer_role_is_renamed_system_when_configured() -> None:
    body = {"messages": [{"role": "developer", "content": "Use tools."}, {"role": "user", "content": "Hi"}]}
    renamed = apply_server_defaults(body, ServerDefaults(model="m", replace_developer_role_with_system=True))
    kept = apply_server_defaults(body, ServerDefaults(model="m"))
    assert renamed["messages"] == [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Hi"},
    ]
    assert kept["messages"] == body["messages"]


def test_input_text_and_input_image_parts_become_chat_parts_with_detail_auto_by_default() -> None:
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_image", "image_url": "https://example.invalid/cat.png", "detail": "low"},
    ]
    assert messages([{"role": "user", "content": content}]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "auto"}},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.invalid/cat.png", "detail": "low"},
                },
            ],
        }
    ]


def test_other_content_part_types_are_rejected_naming_item_and_type() -> None:
    items = [
        {"role": "user", "content": "first"},
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "see"}, {"type": "input_file", "file_id": "f"}],
        },
    ]
    with pytest.raises(
        RequestConversionError, match=r"input\[1\]\.content\[1\]: content part type 'input_file'"
    ):
        messages(items)


def test_consecutive_assistant_items_merge_into_one_message_until_a_tool_output() -> None:
    items = [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two cities."}]},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Checking both.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_p",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call", "call_id": "call_r", "name": "get_weather", "arguments": '{"city":"Rome"}'},
        {"type": "function_call_output", "call_id": "call_p", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_r", "output": "rainy"},
    ]
    assert messages(items) == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": "<think>Two cities.</think>Checking both.",
            "tool_calls": [
                tool_call("call_p", "get_weather", '{"city":"Paris"}'),
                tool_call("call_r", "get_weather", '{"city":"Rome"}'),
            ],
        },
        {"role": "tool", "tool_call_id": "call_p", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_r", "content": "rainy"},
    ]


def test_reasoning_blocks_come_first_in_arrival_order_and_a_user_message_flushes() -> None:
    items = [
        {"role": "assistant", "content": "Part one. "},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "a"}]},
        {"role": "assistant", "content": [{"type": "input_text", "text": "Part two."}]},
        {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "b"}]},
        {"role": "user", "content": "Go on"},
        {"role": "assistant", "content": "Done."},
    ]
    assert messages(items) == [
        {
            "role": "assistant",
            "content": "<think>a</think><think>b</think>Part one. Part two.",
            "tool_calls": [],
        },
        {"role": "user", "content": "Go on"},
        {"role": "assistant", "content": "Done.", "tool_calls": []},
    ]


def test_function_call_output_is_a_tool_message() -> None:
    items = [{"type": "function_call_output", "call_id": "call_9", "output": '{"ok":true}'}]
    assert messages(items) == [{"role": "tool", "tool_call_id": "call_9", "content": '{"ok":true}'}]


def test_reasoning_parser_cuts_think_blocks_and_sends_them_as_both_reasoning_fields() -> None:
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "first"}]},
        {"role": "assistant", "content": "<think>second</think>Answer."},
    ]
    assert messages(items, PARSER) == [
        {
            "role": "assistant",
            "content": "Answer.",
            "tool_calls": [],
            "reasoning_content": "first\nsecond",
            "reasoning": "first\nsecond",
        }
    ]


def test_reasoning_parser_without_interleaving_drops_earlier_reasoning() -> None:
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hidden"}]},
        {"role": "assistant", "content": "Answer."},
    ]
    assert messages(items, PARSER_NOT_INTERLEAVED) == [
        {"role": "assistant", "content": "Answer.", "tool_calls": []}
    ]


def test_max_output_tokens_becomes_max_tokens_and_set_sampling_fields_are_forwarded() -> None:
    body = chat_body(
        input="Hi", max_output_tokens=64, temperature=0.3, top_p=0.9, user="u1", top_logprobs=None
    )
    assert body == {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_tokens": 64,
        "temperature": 0.3,
        "top_p": 0.9,
        "user": "u1",
    }


def test_tools_lose_type_and_strict_and_are_wrapped_as_chat_functions() -> None:
    body = chat_body(
        input="Hi", tools=[WEATHER_TOOL], tool_choice={"type": "function", "name": "get_weather"}
    )
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_non_function_tools_are_rejected_naming_the_tool() -> None:
    with pytest.raises(RequestConversionError, match=r"tools\[1\]: tool type 'web_search'"):
        chat_body(input="Hi", tools=[WEATHER_TOOL, {"type": "web_search"}])


def test_reasoning_effort_and_text_format_map_to_their_chat_fields() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    body = chat_body(
        input="Hi",
        reasoning={"effort": "low", "summary": "auto"},
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}},
    )
    assert body["reasoning_effort"] == "low"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }


def test_stateful_requests_are_rejected() -> None:
    with pytest.raises(RequestConversionError, match="previous_response_id"):
        chat_body(input="Hi", previous_response_id="resp_1")
    with pytest.raises(RequestConversionError, match="background"):
        chat_body(input="Hi", background=True)


def test_chat_template_kwargs_merge_config_and_metadata_and_go_top_level() -> None:
    body = {
        "messages": [],
        "metadata": {"chat_template_kwargs": '{"enable_thinking": false}', "task": "t1"},
    }
    defaults = ServerDefaults(model="served", chat_template_kwargs={"enable_thinking": True, "lang": "en"})
    assert apply_server_defaults(body, defaults) == {
        "messages": [],
        "metadata": {"chat_template_kwargs": '{"enable_thinking": false}', "task": "t1"},
        "model": "served",
        "chat_template_kwargs": {"enable_thinking": False, "lang": "en"},
    }


def test_extra_body_from_config_and_metadata_goes_under_the_request() -> None:
    body = {"messages": [], "temperature": 0.5, "metadata": {"extra_body": '{"seed": 7, "temperature": 1.0}'}}
    defaults = ServerDefaults(model="served", extra_body={"seed": 1, "top_k": 20, "model": "ignored"})
    assert apply_server_defaults(body, defaults) == {
        "seed": 7,
        "top_k": 20,
        "temperature": 0.5,
        "messages": [],
        "metadata": {"extra_body": '{"seed": 7, "temperature": 1.0}'},
        "model": "served",
    }


@pytest.mark.parametrize("key", ["extra_body", "chat_template_kwargs"])
def test_bad_json_in_metadata_overrides_is_rejected_naming_the_key(key: str) -> None:
    defaults = ServerDefaults(model="m")
    with pytest.raises(RequestConversionError, match=f"metadata.{key} is not valid JSON"):
        apply_server_defaults({"messages": [], "metadata": {key: "{seed: 7"}}, defaults)
    with pytest.raises(RequestConversionError, match=f"metadata.{key} must be a JSON object"):
        apply_server_defaults({"messages": [], "metadata": {key: "[1]"}}, defaults)


def test_null_top_logprobs_is_dropped_and_model_is_forced() -> None:
    body = {"messages": [], "model": "callers-choice", "top_logprobs": None}
    assert apply_server_defaults(body, ServerDefaults(model="served")) == {"messages": [], "model": "served"}


def test_an_empty_assistant_turn_at_the_end_is_detected() -> None:
    assert ends_with_empty_assistant_turn([{"role": "assistant", "content": "", "tool_calls": []}])
    assert not ends_with_empty_assistant_turn([{"role": "assistant", "content": "Hi", "tool_calls": []}])
    assert not ends_with_empty_assistant_turn(
        [{"role": "assistant", "content": "", "tool_calls": [tool_call("c", "f", "{}")]}]
    )
    assert not ends_with_empty_assistant_turn([{"role": "user", "content": ""}])


# ---- response direction ------------------------------------------------------------------------------------


def test_reasoning_then_message_then_function_calls_with_their_ids() -> None:
    items = output_items(
        {
            "content": "<think>Need the weather.</think>Let me check.",
            "tool_calls": [tool_call("call_a", "get_weather", '{"city":"Paris"}')],
        }
    )
    assert without_ids(items) == [
        {
            "id": "rs_",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Need the weather."}],
        },
        text_message("Let me check."),
        {
            "id": "call_a",
            "call_id": "call_a",
            "type": "function_call",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "status": "completed",
        },
    ]


def test_upstream_reasoning_field_is_rewrapped_and_every_block_is_one_summary_entry() -> None:
    items = output_items({"content": "<think>two</think>\n\nDone.", "reasoning_content": "one"})
    assert without_ids(items) == [
        {
            "id": "rs_",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}],
        },
        text_message("\n\nDone."),
    ]
    newer_vllm = output_items({"content": "Done.", "reasoning": "thought"})
    assert newer_vllm[0]["summary"] == [{"type": "summary_text", "text": "thought"}]


def test_without_a_parser_think_tags_stay_inline_and_a_reasoning_field_is_an_error() -> None:
    items = output_items({"content": "<think>hmm</think>Hi"}, parser=False)
    assert without_ids(items) == [text_message("<think>hmm</think>Hi")]
    with pytest.raises(UpstreamReplyError, match="uses_reasoning_parser"):
        output_items({"content": "Hi", "reasoning_content": "hmm"}, parser=False)


def test_an_empty_turn_is_one_empty_message() -> None:
    assert without_ids(output_items({"content": None})) == [text_message("")]


def test_no_message_item_when_only_reasoning_or_tool_calls_were_produced() -> None:
    reasoning_only = output_items({"content": "<think>just thinking</think>\n"})
    calls_only = output_items({"content": None, "tool_calls": [tool_call("call_b", "f", "{}")]})
    assert [item["type"] for item in reasoning_only] == ["reasoning"]
    assert [item["type"] for item in calls_only] == ["function_call"]


def test_usage_maps_prompt_and_completion_tokens_with_zeroed_details() -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 100}
    response = respond(request(input="Hi"), completion({"content": "ok"}, usage=usage))
    assert response["usage"] == {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 9,
    }


@pytest.mark.parametrize(
    ("finish_reason", "status", "incomplete_details"),
    [
        ("length", "incomplete", {"reason": "max_output_tokens"}),
        ("content_filter", "incomplete", {"reason": "content_filter"}),
        ("stop", "completed", None),
        ("tool_calls", "completed", None),
    ],
)
def test_finish_reason_sets_status_and_incomplete_details(
    finish_reason: str, status: str, incomplete_details: dict[str, str] | None
) -> None:
    response = respond(request(input="Hi"), completion({"content": "ok"}, finish_reason))
    assert (response["status"], response["incomplete_details"]) == (status, incomplete_details)


def test_response_echoes_request_settings_with_served_model_and_new_id() -> None:
    asked = request(
        input="Hi",
        model="callers-choice",
        instructions="Be brief.",
        temperature=0.2,
        top_p=0.8,
        max_output_tokens=32,
        metadata={"task": "t1"},
        tools=[WEATHER_TOOL],
    )
    response = respond(asked, completion({"content": "ok"}))
    assert HEX_ID.match(response["id"]) and response["id"].startswith("resp_")
    assert response["object"] == "response"
    assert (response["model"], response["created_at"]) == ("served-name", 1700000000.5)
    assert response["tool_choice"] == "auto"
    assert response["parallel_tool_calls"] is True
    assert response["tools"] == [WEATHER_TOOL]
    echoed = {
        key: response[key]
        for key in ("instructions", "temperature", "top_p", "max_output_tokens", "metadata")
    }
    assert echoed == {
        "instructions": "Be brief.",
        "temperature": 0.2,
        "top_p": 0.8,
        "max_output_tokens": 32,
        "metadata": {"task": "t1"},
    }
    NeMoGymResponse.model_validate(response)


def test_output_items_fed_back_as_input_give_the_same_assistant_message() -> None:
    upstream_message = {
        "content": "I will look it up.",
        "reasoning_content": "The user wants Paris.",
        "tool_calls": [tool_call("call_p", "get_weather", '{"city":"Paris"}')],
    }
    items = output_items(upstream_message)
    replayed = messages([{"role": "user", "content": "Paris?"}, *items], PARSER)
    assert replayed[1] == {
        "role": "assistant",
        "content": "I will look it up.",
        "tool_calls": upstream_message["tool_calls"],
        "reasoning_content": "The user wants Paris.",
        "reasoning": "The user wants Paris.",
    }


def test_an_empty_completion_converts_to_an_empty_incomplete_message() -> None:
    empty = NeMoGymChatCompletion.model_validate(empty_chat_completion("served-name", "length", 1))
    response = respond(request(input="Hi"), empty)
    assert without_ids(response["output"]) == [text_message("")]
    assert response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert response["usage"] is None


def respond(asked: NeMoGymResponseCreateParamsNonStreaming, answer: NeMoGymChatCompletion) -> dict[str, Any]:
    return chat_completion_to_response(
        asked, answer, served_model="served-name", uses_reasoning_parser=True, created_at=1700000000.5
    )


GENERATED_CALL = '<think>\nCheck Paris.\n</think>\n\n<tool_call>\n{"name": "w", "arguments": {"city": "Paris"}}\n</tool_call>'


def history_call(arguments: str, **fields: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "w", "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [call], **fields}


@pytest.mark.parametrize(
    ("message", "mismatch"),
    [
        (history_call('{"city":"Paris"}', reasoning_content="Check Paris."), None),  # reformatted JSON
        (history_call('{"city": "Paris"}'), None),  # reasoning dropped from an older turn
        (history_call('{"city": "Madrid"}', reasoning_content="Check Paris."), "tool calls"),
        (history_call('{"city": "Paris"}', reasoning_content="Check Rome."), "reasoning"),
        (history_call('{"city": "Paris"}', content="Sure."), "text"),
    ],
)
def test_generation_mismatch_names_what_of_the_message_was_edited(
    message: dict[str, Any], mismatch: str | None
) -> None:
    parsers = OutputParsers.named("hermes", "qwen3")
    tools = [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]
    assert generation_mismatch(message, GENERATED_CALL, parsers, {"tools": tools}) == mismatch
