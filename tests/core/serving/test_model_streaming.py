"""`stream: true` on `/v1/responses` and `/v1/chat/completions` of every model server: real server
processes over HTTP, driven by the official `openai` client (and raw HTTP where the bytes matter)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from nemo_gym.chat_streaming import synthesize_chat_completion_sse
from nemo_gym.http.deadlines import DEADLINE_HEADER
from nemo_gym.testing import StartedServer
from tests.model_server_kinds import (
    UPSTREAM_KINDS,
    chat_text_step,
    model_server,
    raw_post,
    recorded_rollout,
    sse_events,
    text_step,
    tool_step,
)
from tests.upstream_script import (
    ScriptedUpstream,
    chat_tool_call,
    fresh_model,
    function_call,
)
from tests.vllm_script import VllmUpstream

REQUEST_TIMEOUT_S = 30.0
POLL_DEADLINE_S = 30.0
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}
CHAT_WEATHER_TOOL = {"type": "function", "function": {k: v for k, v in WEATHER_TOOL.items() if k != "type"}}


@asynccontextmanager
async def client_of(server: StartedServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official client, its retries off so every status the server sends is seen as sent."""
    async with openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield client


# ---- /v1/chat/completions ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_chat_stream_assembles_text_and_usage_with_the_official_client(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [chat_text_step("Sunny in Paris."), chat_text_step("Again.")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            stream = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Weather?"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            chunks = [chunk async for chunk in stream]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "Sunny in Paris."
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    upstream_body = scripted_upstream.requests(model)[0]["body"]
    assert "stream" not in upstream_body and "stream_options" not in upstream_body


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_chat_stream_carries_tool_calls(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(
        model,
        [{"message": {"content": None, "tool_calls": [chat_tool_call("get_weather", {"city": "Oslo"})]}}],
    )
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            stream = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Oslo?"}],
                tools=[CHAT_WEATHER_TOOL],
                stream=True,
            )
            chunks = [chunk async for chunk in stream]
    calls = [call for chunk in chunks for call in chunk.choices[0].delta.tool_calls or []]
    assert [(call.function.name, orjson.loads(call.function.arguments)) for call in calls] == [
        ("get_weather", {"city": "Oslo"})
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_chat_stream_headers_and_done_marker(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [chat_text_step("hi")])
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model) as server:
        body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}
        status, headers, raw = await raw_post(server, "/v1/chat/completions", body)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    assert headers["Cache-Control"] == "no-cache" and headers["X-Accel-Buffering"] == "no"
    events = sse_events(raw)
    assert events[0][1]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1] == (None, "[DONE]")
    assert all(data["object"] == "chat.completion.chunk" for _, data in events[:-1])


async def test_chat_stream_with_a_stream_that_is_not_a_boolean_is_refused(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, fresh_model()) as server:
        status, _, raw = await raw_post(
            server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stream": "yes"}
        )
    assert status == 422
    assert orjson.loads(raw)["detail"][0]["loc"] == ["body", "stream"]


async def test_chat_stream_keeps_training_token_fields(tmp_path: Path, vllm_upstream: VllmUpstream) -> None:
    model = fresh_model()
    vllm_upstream.script(model, [{"text": "Paris is sunny."}])
    settings = {"return_token_id_information": True, "uses_reasoning_parser": False}
    with model_server("vllm_model", tmp_path, vllm_upstream.base_url, model, **settings) as server:
        body = {"model": model, "messages": [{"role": "user", "content": "Weather?"}], "stream": True}
        status, _, raw = await raw_post(server, "/v1/chat/completions", body)
    assert status == 200
    finish = [data for _, data in sse_events(raw)[:-1] if data["choices"][0]["finish_reason"]][0]
    delta = finish["choices"][0]["delta"]
    assert delta["prompt_token_ids"] and delta["generation_token_ids"]
    assert len(delta["generation_log_probs"]) == len(delta["generation_token_ids"])
    assert vllm_upstream.detokenize(model, delta["generation_token_ids"]).startswith("Paris is sunny.")


# ---- /v1/responses ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_responses_stream_helper_assembles_text(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [text_step(kind, "Sunny in Paris.")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            async with client.responses.stream(model=model, input="Weather in Paris?") as stream:
                deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
                final = await stream.get_final_response()
    assert "".join(deltas) == "Sunny in Paris."
    assert final.output_text == "Sunny in Paris." and final.status == "completed"


@pytest.mark.parametrize("kind", UPSTREAM_KINDS)
async def test_responses_create_stream_carries_a_function_call(
    kind: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [tool_step(kind, "Oslo")])
    with model_server(kind, tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            stream = await client.responses.create(
                model=model, input="Oslo?", tools=[WEATHER_TOOL], stream=True
            )
            events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    arguments = "".join(
        event.delta for event in events if event.type == "response.function_call_arguments.delta"
    )
    assert orjson.loads(arguments) == {"city": "Oslo"}
    done = [event.item for event in events if event.type == "response.output_item.done"]
    assert [(item.type, item.name) for item in done if item.type == "function_call"] == [
        ("function_call", "get_weather")
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))


@pytest.mark.parametrize("kind", ["vllm_model", "vllm_model_with_compaction"])
async def test_responses_stream_items_keep_training_token_fields(
    kind: str, tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model()
    vllm_upstream.script(model, [{"text": "Paris is sunny."}])
    settings = {"return_token_id_information": True, "uses_reasoning_parser": False}
    with model_server(kind, tmp_path, vllm_upstream.base_url, model, **settings) as server:
        status, _, raw = await raw_post(server, "/v1/responses", {"input": "Weather?", "stream": True})
    assert status == 200
    events = sse_events(raw)
    completed = events[-1][1]["response"]["output"][-1]
    done = [data["item"] for name, data in events if name == "response.output_item.done"][-1]
    assert done == completed and completed["generation_token_ids"] and completed["prompt_token_ids"]
    assert vllm_upstream.detokenize(model, completed["generation_token_ids"]).startswith("Paris is sunny.")


async def test_replay_model_streams_the_recorded_turn(tmp_path: Path) -> None:
    rollout = recorded_rollout()
    with model_server("replay_model", tmp_path) as server:
        body = {**rollout["responses_create_params"], "stream": True}
        status, _, raw = await raw_post(server, "/v1/responses", body)
    assert status == 200
    events = sse_events(raw)
    completed = events[-1][1]["response"]
    assert events[-1][0] == "response.completed"
    recorded_first_turn = [item for item in rollout["response"]["output"]][: len(completed["output"])]
    assert completed["output"] == recorded_first_turn
    assert [data["item"] for name, data in events if name == "response.output_item.done"] == completed[
        "output"
    ]


async def test_responses_stream_flattens_namespace_tools_and_restores_their_calls(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"output": [function_call("weather__lookup", {"city": "Rome"})]}])
    namespace = {"type": "namespace", "name": "weather", "tools": [{**WEATHER_TOOL, "name": "lookup"}]}
    body = {"model": model, "input": "Rome?", "tools": [namespace], "stream": True, "prompt_cache_key": "k"}
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model) as server:
        status, _, raw = await raw_post(server, "/v1/responses", body)
    assert status == 200
    upstream_body = scripted_upstream.requests(model)[0]["body"]
    assert [tool["name"] for tool in upstream_body["tools"]] == ["weather__lookup"]
    assert "prompt_cache_key" not in upstream_body and "stream" not in upstream_body
    call = sse_events(raw)[-1][1]["response"]["output"][0]
    assert (call["namespace"], call["name"]) == ("weather", "lookup")


async def test_responses_stream_with_a_bad_body_is_a_422_naming_the_field(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, fresh_model()) as server:
        status, _, raw = await raw_post(server, "/v1/responses", {"input": 5, "stream": True})
    assert status == 422
    assert orjson.loads(raw)["detail"][0]["loc"][:2] == ["body", "input"]


# ---- errors, keep-alive, disconnects ----------------------------------------------------------------------


async def test_an_upstream_error_before_the_stream_starts_keeps_its_status(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"status": 400, "body": {"error": {"message": "context too long"}}}])
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model) as server:
        async with client_of(server) as client:
            with pytest.raises(openai.BadRequestError) as raised:
                await client.responses.create(model=model, input="x", stream=True)
    assert raised.value.status_code == 400
    assert "context too long" in orjson.dumps(raised.value.body).decode()


async def test_a_slow_answer_is_kept_alive_then_sent(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model, gate = fresh_model(), fresh_model("gate")
    scripted_upstream.script(model, [{**chat_text_step("late"), "gate": gate}])
    settings = {"stream_keepalive_interval_s": 0.05}
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, **settings) as server:
        body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
            async with session.post(server.url + "/v1/chat/completions", json=body) as answer:
                assert answer.status == 200
                assert await answer.content.readuntil(b"\n\n") == b": keep-alive\n\n"
                scripted_upstream.open_gate(gate)
                rest = await answer.read()
    events = sse_events(rest)
    assert "".join(data["choices"][0]["delta"].get("content") or "" for _, data in events[:-1]) == "late"
    assert events[-1] == (None, "[DONE]")


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/responses"])
async def test_an_error_after_the_stream_started_is_an_error_event(
    route: str, tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model, gate = fresh_model(), fresh_model("gate")
    scripted_upstream.script(
        model, [{"status": 400, "body": {"error": {"message": "bad turn"}}, "gate": gate}]
    )
    settings = {"stream_keepalive_interval_s": 0.05}
    body: dict[str, Any] = {"model": model, "stream": True}
    body |= (
        {"messages": [{"role": "user", "content": "x"}]}
        if route == "/v1/chat/completions"
        else {"input": "x"}
    )
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, **settings) as server:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
            async with session.post(server.url + route, json=body) as answer:
                await answer.content.readuntil(b"\n\n")  # the stream has started: headers are out
                scripted_upstream.open_gate(gate)
                events = sse_events(await answer.read())
    if route == "/v1/chat/completions":
        assert events == [
            (
                "error",
                {
                    "error": {
                        "message": events[0][1]["error"]["message"],
                        "type": "invalid_request_error",
                        "code": 400,
                    }
                },
            )
        ]
        assert events[0][1]["error"]["message"].startswith("HTTP 400: ")
        assert "bad turn" in events[0][1]["error"]["message"]
    else:
        assert [name for name, _ in events] == ["response.created", "response.failed"]
        failed = events[1][1]["response"]
        assert failed["status"] == "failed" and failed["error"]["message"].startswith("HTTP 400: ")
        assert "bad turn" in failed["error"]["message"]


async def test_the_callers_deadline_ends_a_streamed_call(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"hang": True}])
    settings = {"stream_keepalive_interval_s": 0.05}
    body = {"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True}
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, **settings) as server:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)) as session:
            headers = {DEADLINE_HEADER: "1"}
            async with session.post(
                server.url + "/v1/chat/completions", json=body, headers=headers
            ) as answer:
                events = sse_events(await answer.read())
    assert [name for name, _ in events] == ["error"]
    assert events[0][1]["error"]["code"] == 504 and events[0][1]["error"]["type"] == "server_error"


async def test_a_client_that_leaves_mid_stream_ends_the_upstream_call(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model, gate = fresh_model(), fresh_model("gate")
    scripted_upstream.script(model, [{**chat_text_step("never read"), "gate": gate}])
    settings = {"stream_keepalive_interval_s": 0.05}
    with model_server("openai_model", tmp_path, scripted_upstream.base_url, model, **settings) as server:
        body = orjson.dumps({"model": model, "messages": [{"role": "user", "content": "x"}], "stream": True})
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        with socket.create_connection((server.host, server.port), timeout=REQUEST_TIMEOUT_S) as connection:
            connection.sendall(head.encode() + body)
            received = b""
            while b": keep-alive" not in received:
                received += connection.recv(4096)
            assert scripted_upstream.gate_waiting(gate) == 1
        deadline = time.monotonic() + POLL_DEADLINE_S
        while scripted_upstream.gate_waiting(gate) != 0:
            assert time.monotonic() < deadline, "the upstream call outlived its client"
            await asyncio.sleep(0.02)


# ---- the dialect helpers on their own -------------------------------------------------------------------


def test_chat_chunks_keep_the_reasoning_key_and_put_token_fields_in_the_finish_chunk() -> None:
    message = {
        "role": "assistant",
        "content": "4",
        "reasoning": "2+2",
        "prompt_token_ids": [1],
        "generation_token_ids": [2],
        "generation_log_probs": [-0.1],
    }
    completion = {
        "id": "c",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    events = sse_events(b"".join(synthesize_chat_completion_sse(completion, include_usage=True)))
    deltas = [data["choices"][0]["delta"] for _, data in events[:-2]]
    assert deltas[1] == {"reasoning": "2+2"} and deltas[2] == {"content": "4"}
    assert deltas[-1] == {
        "prompt_token_ids": [1],
        "generation_token_ids": [2],
        "generation_log_probs": [-0.1],
    }
    assert events[-2][1]["choices"] == [] and events[-2][1]["usage"] is None and events[-1][1] == "[DONE]"
