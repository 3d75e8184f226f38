"""`POST /v1/messages` (Anthropic Messages) on every model server: real server processes over HTTP, driven
by the official `anthropic` client, plus the converter's edge cases on their own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.anthropic_converter import AnthropicConverter
from nemo_gym.testing import StartedServer
from tests.model_server_kinds import UPSTREAM_KINDS, model_server, raw_post, sse_events, text_step, tool_step
from tests.upstream_script import (
    ScriptedUpstream,
    assistant_message,
    fresh_model,
    function_call,
)
from tests.vllm_script import VllmUpstream

REQUEST_TIMEOUT_S = 30.0
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CONVERTER = AnthropicConverter()


@asynccontextmanager
async def client_of(server: StartedServer) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The official client, its retries off so every status the server sends is seen as sent."""
    async with anthropic.AsyncAnthropic(
        base_url=server.url, api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield client


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


# ---- through real servers ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_create_answers_an_anthropic_message(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [text_step(kind, "Sunny.")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            message = await client.messages.create(
                model="claude-test", max_tokens=64, system="Be brief.", messages=[user("Weather?")]
            )
    assert [(block.type, block.text) for block in message.content] == [("text", "Sunny.")]
    assert message.stop_reason == "end_turn" and message.model == "claude-test"
    assert message.usage.output_tokens > 0


async def test_request_fields_reach_the_upstream_as_responses_params(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [text_step("openai_model", "ok")])
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            await client.messages.create(
                model="claude-test",
                max_tokens=300,
                system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
                messages=[user("Weather?")],
                extra_body={"temperature": 0.5},  # this client version no longer takes it as an argument
                thinking={"type": "enabled", "budget_tokens": 1024},
                tools=[WEATHER_TOOL],
                tool_choice={"type": "any", "disable_parallel_tool_use": True},
                metadata={"user_id": "u-1"},
            )
    sent = scripted_upstream.requests(model)[0]["body"]
    assert sent["instructions"] == "Be brief." and sent["max_output_tokens"] == 300
    assert sent["temperature"] == 0.5 and sent["user"] == "u-1"
    assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
    assert sent["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": WEATHER_TOOL["input_schema"],
            "description": "Weather of a city",
        }
    ]
    assert sent["tool_choice"] == "required" and sent["parallel_tool_calls"] is False
    assert sent["input"] == [{"type": "message", "role": "user", "content": "Weather?"}]


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_stream_helper_gives_the_final_message_with_thinking(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [text_step(kind, "It is sunny.", thought="Check the sky.")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            async with client.messages.stream(
                model="claude-test",
                max_tokens=256,
                thinking={"type": "enabled", "budget_tokens": 128},
                messages=[user("Weather?")],
            ) as stream:
                texts = [text async for text in stream.text_stream]
                final = await stream.get_final_message()
    assert "".join(texts) == "It is sunny."
    assert [block.type for block in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == "Check the sky." and final.content[1].text == "It is sunny."


async def test_create_with_stream_sends_the_messages_event_sequence(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [tool_step("openai_model", "Oslo", "toolu_1")])
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            stream = await client.messages.create(
                model="claude-test",
                max_tokens=64,
                messages=[user("Oslo?")],
                tools=[WEATHER_TOOL],
                stream=True,
            )
            events = [event async for event in stream]
    assert [event.type for event in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1].content_block.type == "tool_use" and events[1].content_block.id == "toolu_1"
    assert orjson.loads(events[2].delta.partial_json) == {"city": "Oslo"}
    assert events[4].delta.stop_reason == "tool_use"


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_a_tool_use_round_trip(kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [tool_step(kind, "Oslo", "toolu_7"), text_step(kind, "Rainy in Oslo.")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            history: list[Any] = [user("Weather in Oslo?")]
            first = await client.messages.create(
                model="c", max_tokens=64, messages=history, tools=[WEATHER_TOOL]
            )
            assert first.stop_reason == "tool_use"
            call = first.content[-1]
            assert (call.type, call.id, call.name, call.input) == (
                "tool_use",
                "toolu_7",
                "get_weather",
                {"city": "Oslo"},
            )
            history += [
                {"role": "assistant", "content": [block.model_dump() for block in first.content]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "rain, 9C"}],
                },
            ]
            second = await client.messages.create(
                model="c", max_tokens=64, messages=history, tools=[WEATHER_TOOL]
            )
    assert second.content[0].text == "Rainy in Oslo." and second.stop_reason == "end_turn"
    sent = orjson.dumps(scripted_upstream.requests(model)[1]["body"]).decode()
    assert "toolu_7" in sent and "rain, 9C" in sent


async def test_count_tokens_gives_an_estimate(tmp_path: Path, scripted_upstream: ScriptedUpstream) -> None:
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, fresh_model()) as server:
        async with client_of(server) as client:
            short = await client.messages.count_tokens(model="c", messages=[user("hi")])
            long = await client.messages.count_tokens(model="c", messages=[user("hi " * 400)])
    assert 0 < short.input_tokens < long.input_tokens


async def test_a_malformed_request_is_a_400_in_anthropic_shape_naming_the_field(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, fresh_model()) as server:
        async with client_of(server) as client:
            with pytest.raises(anthropic.BadRequestError) as raised:
                await client.messages.create(
                    model="c",
                    max_tokens=64,
                    messages=[{"role": "user", "content": [{"type": "video", "url": "x"}]}],
                )
        status, _, raw = await raw_post(server, "/v1/messages", {"model": "c", "messages": []})
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error" and "messages.0.content" in error["message"]
    assert status == 400 and "max_tokens" in orjson.loads(raw)["error"]["message"]


async def test_an_upstream_error_keeps_its_status_in_anthropic_shape(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"status": 429, "body": {"error": {"message": "slow down"}}}])
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, max_retries=1) as server:
        async with client_of(server) as client:
            with pytest.raises(anthropic.RateLimitError) as raised:
                await client.messages.create(model="c", max_tokens=64, messages=[user("x")])
    assert raised.value.body["type"] == "error" and raised.value.body["error"]["type"] == "rate_limit_error"
    assert "slow down" in raised.value.body["error"]["message"]


async def test_an_error_after_the_stream_started_is_an_error_event(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model, gate = fresh_model(), fresh_model("gate")
    scripted_upstream.script(model, [{"status": 500, "gate": gate}])
    settings = {"stream_keepalive_interval_s": 0.05, "max_retries": 1}
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, **settings) as server:
        async with client_of(server) as client:
            stream = await client.messages.create(model="c", max_tokens=64, messages=[user("x")], stream=True)
            scripted_upstream.open_gate(gate)
            with pytest.raises(anthropic.APIStatusError) as raised:
                [event async for event in stream]
    error = raised.value.body["error"]
    assert (error["type"], error["status"]) == ("api_error", 500) and "scripted 500" in error["message"]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_ready_error_answer_of_the_server_comes_in_anthropic_shape(
    tmp_path: Path, stream: bool
) -> None:
    """replay_model answers a request it has no recording of with its own 404 response."""
    with model_server("replay_model", tmp_path) as server:
        body = {"model": "c", "max_tokens": 16, "messages": [user("never recorded")], "stream": stream}
        status, headers, raw = await raw_post(server, "/v1/messages", body)
    assert status == 404 and headers["Content-Type"].startswith("application/json")
    error = orjson.loads(raw)["error"]
    assert (
        error["type"] == "not_found_error" and error["status"] == 404 and "never recorded" in error["message"]
    )


async def test_capture_records_the_token_ids_of_a_streamed_message(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model()
    vllm_upstream.script(model, [{"text": "Paris."}, {"text": "Lyon."}])
    capture_dir = tmp_path / "captured"
    settings = {"return_token_id_information": True, "uses_reasoning_parser": False}
    top_level = {"token_id_capture": {"enabled": True, "dir": str(capture_dir)}}
    with model_server("vllm_model", tmp_path, vllm_upstream.base_url, model, top_level, **settings) as server:
        prefix = "/ng-rollout/r-1/training-token-capture"
        body = {"model": "c", "max_tokens": 64, "messages": [user("Where?")], "stream": True}
        status, _, raw = await raw_post(server, prefix + "/v1/messages", body)
        assert status == 200 and sse_events(raw)[-1][0] == "message_stop"
        status, _, raw = await raw_post(server, prefix + "/v1/responses", {"input": "Where?", "stream": True})
        assert status == 200 and sse_events(raw)[-1][0] == "response.completed"
    lines = [orjson.loads(line) for line in (capture_dir / "r-1.jsonl").read_bytes().splitlines()]
    assert [(line["route"], line["call_index"], line["token_ids_available"]) for line in lines] == [
        ("/v1/messages", 0, True),
        ("/v1/responses", 1, True),
    ]
    generated = lines[0]["outputs"][0]["generation_token_ids"]
    assert vllm_upstream.detokenize(model, generated).startswith("Paris.")


# ---- the converter on its own ----------------------------------------------------------------------------


def test_blocks_become_responses_items_in_order() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    params = CONVERTER.anthropic_request_to_responses(
        {
            "model": "c",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Look"}, image]},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "Hmm", "signature": "sig"},
                        {"type": "redacted_thinking", "data": "opaque"},
                        {"type": "text", "text": "Calling."},
                        {"type": "tool_use", "id": "t1", "name": "zoom", "input": {"x": 1}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "is_error": True,
                            "content": [{"type": "text", "text": "no"}, image],
                        },
                        {"type": "text", "text": "Again"},
                    ],
                },
            ],
        }
    )
    items = params.model_dump(mode="json", exclude_unset=True)["input"]
    kinds = [(item["type"], item.get("role")) for item in items]
    assert kinds == [
        ("message", "user"),
        ("reasoning", None),
        ("reasoning", None),
        ("message", "assistant"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "user"),
        ("message", "user"),
    ]
    assert items[0]["content"][1] == {
        "type": "input_image",
        "image_url": "data:image/png;base64,AAAA",
        "detail": "auto",
    }
    assert (
        items[1]["summary"] == [{"type": "summary_text", "text": "Hmm"}]
        and items[1]["encrypted_content"] == "sig"
    )
    assert items[2]["summary"] == [] and items[2]["encrypted_content"] == "opaque"
    assert items[4] == {"type": "function_call", "call_id": "t1", "name": "zoom", "arguments": '{"x":1}'}
    assert items[5]["output"] == "Error: no" and items[6]["content"][0]["type"] == "input_image"


def test_server_tools_are_not_offered_and_tool_choice_maps() -> None:
    params = CONVERTER.anthropic_request_to_responses(
        {
            "model": "c",
            "max_tokens": 10,
            "messages": [user("x")],
            "tools": [WEATHER_TOOL, {"type": "web_search_20250305", "name": "web_search"}],
            "tool_choice": {"type": "tool", "name": "get_weather"},
        }
    )
    assert [tool["name"] for tool in params.tools] == ["get_weather"]
    assert params.tool_choice == {"type": "function", "name": "get_weather"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": "c", "max_tokens": 0, "messages": []}, "max_tokens"),
        (
            {"model": "c", "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]},
            "messages.0.role",
        ),
        (
            {"model": "c", "max_tokens": 5, "messages": [user("x")], "thinking": {"type": "maybe"}},
            "thinking.type",
        ),
    ],
)
def test_a_malformed_request_names_its_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        CONVERTER.anthropic_request_to_responses(body)
    assert any(".".join(map(str, problem["loc"])).startswith(field) for problem in raised.value.errors())


@pytest.mark.parametrize(
    ("details", "output", "stop_reason"),
    [
        ({"reason": "max_output_tokens"}, [assistant_message("cut")], "max_tokens"),
        ({"reason": "content_filter"}, [], "refusal"),
        (None, [function_call("f", {"a": 1})], "tool_use"),
        (None, [assistant_message("done")], "end_turn"),
    ],
)
def test_stop_reason(details: Any, output: list[dict[str, Any]], stop_reason: str) -> None:
    message = CONVERTER.responses_to_anthropic_response(
        {"id": "r", "output": output, "incomplete_details": details}, "c"
    )
    assert message["stop_reason"] == stop_reason


def test_arguments_that_are_not_an_object_still_make_a_tool_use() -> None:
    call = {**function_call("f", {}), "arguments": "not json"}
    message = CONVERTER.responses_to_anthropic_response({"id": "r", "output": [call]}, "c")
    assert message["content"][0]["input"] == {"arguments": "not json"}


def test_reasoning_without_summary_is_redacted_thinking_and_streams_whole() -> None:
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}
    message = CONVERTER.responses_to_anthropic_response({"id": "r", "output": [item]}, "c")
    assert message["content"] == [{"type": "redacted_thinking", "data": "opaque"}]
    events = sse_events(b"".join(CONVERTER.anthropic_response_to_sse(message)))
    started = [data for name, data in events if name == "content_block_start"]
    assert started[0]["content_block"] == {"type": "redacted_thinking", "data": "opaque"}
    assert not [name for name, _ in events if name == "content_block_delta"]
