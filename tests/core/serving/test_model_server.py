"""The model-server base class (nemo_gym.serving.model_server) around a server's own `responses()`: a real
server process (tests/fixtures/echo_model_server.py) over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import pytest

from nemo_gym.testing import StartedServer
from tests.fixtures.echo_model_server import REFUSAL
from tests.helpers import instance_config, run_fixture_instance
from tests.model_server_kinds import raw_post, sse_events

ECHO_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "echo_model_server.py"
SERVER_LABEL = "EchoModelServer___echo_model"


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    config = {"echo_model": instance_config("responses_api_models", "echo_model")}
    with run_fixture_instance(ECHO_SERVER, config, "echo_model", tmp_path_factory.mktemp("echo")) as server:
        yield server


def answer_text(response: dict) -> str:
    return response["output"][0]["content"][0]["text"]


async def test_the_body_is_validated_with_the_params_the_server_declares(echo):
    status, _, raw = await raw_post(echo, "/v1/responses", {"input": "hi", "echo_prefix": ">> "})
    assert status == 200 and answer_text(orjson.loads(raw)) == ">> hi"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_bad_body_is_a_422_located_under_body(echo, stream):
    status, _, raw = await raw_post(
        echo, "/v1/responses", {"input": "hi", "temperature": "hot", "stream": stream}
    )
    assert status == 422
    assert [problem["loc"] for problem in orjson.loads(raw)["detail"]] == [["body", "temperature"]]


async def test_a_streamed_answer_is_the_plain_answer_as_events(echo):
    body = {"input": [{"role": "user", "content": "hi"}], "echo_prefix": "> "}
    _, _, plain = await raw_post(echo, "/v1/responses", body)
    status, headers, raw = await raw_post(echo, "/v1/responses", {**body, "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    completed = sse_events(raw)[-1][1]["response"]
    assert answer_text(completed) == answer_text(orjson.loads(plain)) == "> hi"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_ready_error_response_goes_to_the_client_as_it_is(echo, stream):
    status, _, raw = await raw_post(echo, "/v1/responses", {"input": "refuse", "stream": stream})
    assert (status, orjson.loads(raw)) == (409, REFUSAL)


async def test_a_failing_method_is_a_500_naming_the_error(echo):
    status, _, raw = await raw_post(echo, "/v1/responses", {"input": "crash"})
    assert status == 500
    assert "RuntimeError: the weights are gone" in orjson.loads(raw)["error"]["message"]


async def test_a_route_the_server_does_not_implement_says_what_to_implement(echo):
    body = {"messages": [{"role": "user", "content": "hi"}]}
    status, _, raw = await raw_post(echo, "/v1/chat/completions", body)
    assert status == 500
    assert "EchoModelServer must implement chat_completions()" in orjson.loads(raw)["error"]["message"]


async def test_anthropic_messages_are_answered_by_responses(echo):
    body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
    status, _, raw = await raw_post(echo, "/v1/messages", body)
    assert status == 200
    message = orjson.loads(raw)
    assert (message["type"], message["content"]) == ("message", [{"type": "text", "text": "hi"}])
    refused = {**body, "messages": [{"role": "user", "content": "refuse"}]}
    status, _, raw = await raw_post(echo, "/v1/messages", refused)
    error = orjson.loads(raw)
    assert (status, error["type"], error["error"]["status"], error["error"]["server"]) == (
        409,
        "error",
        409,
        SERVER_LABEL,
    )
    assert "refused by policy" in error["error"]["message"]


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
async def test_a_bad_anthropic_body_is_a_400_in_anthropics_shape(echo, path):
    status, _, raw = await raw_post(echo, path, {"model": "m"})
    error = orjson.loads(raw)
    assert (status, error["type"], error["error"]["type"]) == (400, "error", "invalid_request_error")
    assert error["error"]["message"].startswith("invalid request: ")


async def test_the_openapi_document_shows_the_declared_params(echo):
    async with aiohttp.ClientSession() as session, session.get(echo.url + "/openapi.json") as answer:
        status, document = answer.status, await answer.json()
    reference = document["paths"]["/v1/responses"]["post"]["requestBody"]["content"]["application/json"]
    schema = document["components"]["schemas"][reference["schema"]["$ref"].rsplit("/", 1)[1]]
    assert status == 200 and "echo_prefix" in schema["properties"]
