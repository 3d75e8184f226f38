"""openai_model against the scripted upstream: real server processes over HTTP, no mocks.

Each test starts its own model server with a fresh served model name, so the upstream's scripts and
request logs of one test are never seen by another.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
from omegaconf import OmegaConf

from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from responses_api_models.openai_model.app import OpenAIModel, OpenAIModelConfig
from tests.helpers import StartedServer, instance_config, run_instance
from tests.shared_fixtures import closed_port
from tests.upstream_script import (
    ScriptedUpstream,
    assistant_message,
    chat_tool_call,
    fresh_model,
    function_call,
    reasoning,
)

API_KEY = "sk-openai-model-test-0123456789abcdef"
REQUEST_TIMEOUT_S = 30.0


@contextmanager
def model_server(tmp_path: Path, base_url: str, model: str, **settings: Any) -> Iterator[StartedServer]:
    config = {
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=base_url,
            openai_api_key=API_KEY,
            openai_model=model,
            **settings,
        )
    }
    with run_instance(config, "policy_model", tmp_path) as server:
        yield server


@asynccontextmanager
async def openai_client(server: StartedServer) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official client, without its own retries so every status the server sends is seen as sent."""
    async with openai.AsyncOpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT_S
    ) as client:
        yield client


async def post(server: StartedServer, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(server.url + path, json=body) as answer:
            return answer.status, orjson.loads(await answer.read())


async def test_upstream_gets_caller_fields_over_extra_body_with_served_model_and_key(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    settings = {
        "extra_body": {"seed": 7, "temperature": 0.1},
        "openai_default_headers": {"X-Gym-Test": "yes"},
    }
    with model_server(tmp_path, scripted_upstream.base_url, model, **settings) as server:
        async with openai_client(server) as client:
            await client.responses.create(model="callers-choice", input="hello", temperature=0.5)
            await client.chat.completions.create(
                model="callers-choice", messages=[{"role": "user", "content": "hi"}]
            )

    responses_call, chat_call = scripted_upstream.requests(model)
    assert responses_call["path"] == "/v1/responses"
    assert responses_call["body"] == {"input": "hello", "model": model, "seed": 7, "temperature": 0.5}
    assert chat_call["path"] == "/v1/chat/completions"
    assert chat_call["body"] == {
        "messages": [{"role": "user", "content": "hi"}],
        "model": model,
        "seed": 7,
        "temperature": 0.1,
    }
    for call in (responses_call, chat_call):
        assert call["headers"]["Authorization"] == f"Bearer {API_KEY}"
        assert call["headers"]["X-Gym-Test"] == "yes"


async def test_both_routes_parse_with_the_official_openai_client(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(
        model,
        [
            {
                "output": [
                    reasoning("The user wants the weather."),
                    assistant_message("Let me check."),
                    function_call("get_weather", {"city": "Paris"}, call_id="call_paris"),
                ]
            },
            {
                "message": {
                    "content": "Checking Rome.",
                    "tool_calls": [chat_tool_call("get_weather", {"city": "Rome"}, call_id="call_rome")],
                }
            },
        ],
    )
    with model_server(tmp_path, scripted_upstream.base_url, model) as server:
        async with openai_client(server) as client:
            response = await client.responses.create(model="any", input="Weather in Paris?")
            completion = await client.chat.completions.create(
                model="any", messages=[{"role": "user", "content": "Weather in Rome?"}]
            )

    assert response.model == model
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    assert response.output[0].summary[0].text == "The user wants the weather."
    assert response.output_text == "Let me check."
    call = response.output[2]
    assert (call.name, call.call_id, orjson.loads(call.arguments)) == (
        "get_weather",
        "call_paris",
        {"city": "Paris"},
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking Rome."
    tool_call = choice.message.tool_calls[0]
    assert (tool_call.id, tool_call.function.name) == ("call_rome", "get_weather")
    assert orjson.loads(tool_call.function.arguments) == {"city": "Rome"}


async def test_rate_limit_is_retried_honouring_retry_after(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    # 0.6 s is more than the first backoff step (at most 0.5 s), so only Retry-After explains the wait.
    scripted_upstream.script(
        model, [{"status": 429, "retry_after": 0.6}, {"output": [assistant_message("after the wait")]}]
    )
    with model_server(tmp_path, scripted_upstream.base_url, model) as server:
        async with openai_client(server) as client:
            started = time.monotonic()
            response = await client.responses.create(model="any", input="hi")
            elapsed = time.monotonic() - started
        log = server.log()

    assert response.output_text == "after the wait"
    assert len(scripted_upstream.requests(model)) == 2
    assert elapsed >= 0.6
    assert "status 429" in log
    assert API_KEY not in log


async def test_upstream_error_reaches_the_caller_with_its_status_and_cause(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    context_error = {
        "message": "This model's maximum context length is 128 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    key_echo = {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_api_key"}
    scripted_upstream.script(
        model,
        [{"status": 400, "body": {"error": context_error}}, {"status": 401, "body": {"error": key_echo}}],
    )
    with model_server(tmp_path, scripted_upstream.base_url, model) as server:
        status, body = await post(server, "/v1/responses", {"input": "a very long prompt"})
        echo_status, echo_body = await post(server, "/v1/chat/completions", {"messages": []})
        log = server.log()

    assert status == 400
    error = body["error"]
    assert (error["type"], error["status"]) == ("inner_server_error", 400)
    assert error["server"] == "OpenAIModel___policy_model"
    assert error["cause"] == context_error
    assert len(scripted_upstream.requests(model)) == 2  # a 400 is not retried

    assert echo_status == 401
    assert echo_body["error"]["cause"]["message"] == "Incorrect API key provided: ****"
    assert API_KEY not in orjson.dumps(echo_body).decode()
    assert API_KEY not in log


async def test_invalid_upstream_answers_are_bad_gateway(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(
        model, [{"malformed": True}, {"response": {"id": "resp_1", "object": "response"}}]
    )
    with model_server(tmp_path, scripted_upstream.base_url, model) as server:
        malformed_status, malformed = await post(server, "/v1/responses", {"input": "hi"})
        invalid_status, invalid = await post(server, "/v1/responses", {"input": "hi"})

    assert malformed_status == 502
    assert malformed["error"]["type"] == "bad_upstream_response"
    assert "invalid JSON" in malformed["error"]["message"]
    assert invalid_status == 502
    assert "invalid Responses API response" in invalid["error"]["message"]
    assert "created_at" in invalid["error"]["message"]


async def test_hanging_or_unreachable_upstream_fails_after_the_deadline(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"hang": True}])
    with model_server(tmp_path, scripted_upstream.base_url, model, timeout_s=1.5) as server:
        started = time.monotonic()
        status, body = await post(server, "/v1/responses", {"input": "hi"})
        hang_elapsed = time.monotonic() - started
    assert (status, body["error"]["type"]) == (504, "timeout")
    assert hang_elapsed >= 1.4, "the call waited for its deadline"

    dead_url = f"http://127.0.0.1:{closed_port()}/v1"
    with model_server(tmp_path, dead_url, fresh_model(), timeout_s=1.5, max_retries=2) as server:
        status, body = await post(server, "/v1/chat/completions", {"messages": []})
    assert (status, body["error"]["type"]) == (502, "connection")
    assert dead_url in body["error"]["message"]


async def test_max_concurrent_requests_lets_one_call_upstream_at_a_time(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    held_s = 0.8
    scripted_upstream.script(
        model,
        [
            {"delay_s": held_s, "output": [assistant_message("first")]},
            {"output": [assistant_message("second")]},
            {"output": [assistant_message("third")]},
        ],
    )

    with model_server(tmp_path, scripted_upstream.base_url, model, max_concurrent_requests=1) as server:
        async with openai_client(server) as client:
            responses = await asyncio.gather(
                *(client.responses.create(model="any", input=f"call {index}") for index in range(3))
            )

    # The three calls were sent together; with the cap, the upstream saw the second one only after it had
    # held the first for `held_s`. Without it, all three would arrive within milliseconds.
    arrivals = sorted(entry["received_at"] for entry in scripted_upstream.requests(model))
    assert len(arrivals) == 3
    assert arrivals[1] - arrivals[0] >= held_s * 0.9
    assert sorted(response.output_text for response in responses) == ["first", "second", "third"]


async def test_unknown_responses_key_is_422_and_there_is_no_models_route(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    with model_server(tmp_path, scripted_upstream.base_url, model) as server:
        status, body = await post(server, "/v1/responses", {"input": "hi", "not_a_param": 1})
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{server.url}/v1/models") as answer:
                models_status = answer.status

    assert status == 422
    assert any(problem["loc"] == ["body", "not_a_param"] for problem in body["detail"])
    assert scripted_upstream.requests(model) == []
    assert models_status == 404


def test_api_key_stays_out_of_reprs() -> None:
    config = OpenAIModelConfig(
        name="policy_model",
        host="127.0.0.1",
        port=0,
        entrypoint="app.py",
        openai_base_url="http://127.0.0.1:1/v1",
        openai_api_key=API_KEY,
        openai_model="m",
        openai_default_headers={"api-key": API_KEY},
        extra_body=None,
    )
    server = OpenAIModel(
        config=config,
        server_client=ServerClient(
            head_server_config=BaseServerConfig(host="127.0.0.1", port=1),
            global_config_dict=OmegaConf.create({}),
        ),
    )
    server.setup_webserver()

    assert config.extra_body == {}
    assert config.timeout_s is None and config.max_attempts == 5
    for text in (repr(config), str(config), repr(server), repr(server.client)):
        assert API_KEY not in text
    assert config.model_dump(mode="json")["openai_api_key"] == "**********"
    assert server.client.api_key == API_KEY
