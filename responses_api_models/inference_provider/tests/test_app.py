"""inference_provider against the scripted upstream, which speaks the OpenAI-compatible Chat Completions
API a hosted provider serves: real server processes over HTTP, the official openai client as the caller."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import orjson

from responses_api_models.inference_provider.app import InferenceProvider
from tests.model_server_checks import (
    assert_key_stays_out_of_reprs,
    assert_weather_rollout,
    failed_start,
    model_config,
    post,
    run_model,
    run_weather_rollout,
    weather_steps,
)
from tests.upstream_script import ScriptedUpstream, chat_tool_call, fresh_model

API_KEY = "sk-provider-test-0123456789abcdef"


def provider(upstream: ScriptedUpstream, model: str, **settings: object) -> dict:
    return model_config(
        "inference_provider", base_url=upstream.base_url, api_key=API_KEY, model=model, **settings
    )


async def test_responses_become_a_chat_completion_and_back(tmp_path: Path, scripted_upstream) -> None:
    model = fresh_model("provider")
    scripted_upstream.script(
        model,
        [
            {
                "message": {
                    "content": "Checking.",
                    "tool_calls": [chat_tool_call("get_weather", {"city": "Oslo"})],
                }
            },
            {"message": {"content": "plain chat"}},
        ],
    )
    config = provider(scripted_upstream, model, extra_body={"seed": 3}, num_concurrent_requests=2)
    with run_model(config, tmp_path) as server:
        async with openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
            response = await client.responses.create(
                model="ignored", input="Weather in Oslo?", instructions="Be brief.", max_output_tokens=64
            )
            completion = await client.chat.completions.create(
                model="ignored", messages=[{"role": "user", "content": "hi"}]
            )

    assert response.model == model
    assert [item.type for item in response.output] == ["message", "function_call"]
    assert response.output_text == "Checking."
    assert orjson.loads(response.output[1].arguments) == {"city": "Oslo"}
    assert completion.choices[0].message.content == "plain chat"
    responses_call, chat_call = scripted_upstream.requests(model)
    assert responses_call["path"] == chat_call["path"] == "/v1/chat/completions"
    assert responses_call["body"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
    ]
    assert (responses_call["body"]["model"], responses_call["body"]["max_tokens"]) == (model, 64)
    assert responses_call["body"]["seed"] == chat_call["body"]["seed"] == 3
    assert responses_call["headers"]["Authorization"] == f"Bearer {API_KEY}"


async def test_rate_limit_waits_and_errors_keep_their_status_without_the_key(
    tmp_path: Path, scripted_upstream
) -> None:
    model = fresh_model("provider")
    echo = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}
    scripted_upstream.script(
        model,
        [
            {"status": 429, "retry_after": 0.6},
            {"message": {"content": "after the wait"}},
            {"status": 400, "body": {"error": {"message": "max_tokens is too large", "code": "bad"}}},
            {"status": 403, "body": echo},
        ],
    )
    with run_model(provider(scripted_upstream, model), tmp_path) as server:
        started = time.monotonic()
        status, answer = await post(f"{server.url}/v1/responses", {"input": "hi"})
        waited = time.monotonic() - started
        too_long_status, too_long = await post(f"{server.url}/v1/responses", {"input": "hi"})
        echo_status, echoed = await post(f"{server.url}/v1/chat/completions", {"messages": []})
        log = server.log()

    assert status == 200 and answer["output"][0]["content"][0]["text"] == "after the wait"
    assert waited >= 0.6, "Retry-After was honoured"
    # A provider's 400 reaches the caller (vllm_model would answer an empty turn instead).
    assert (too_long_status, too_long["error"]["cause"]["message"]) == (400, "max_tokens is too large")
    assert echo_status == 403
    assert API_KEY not in orjson.dumps(echoed).decode() and "****" in echoed["error"]["cause"]["message"]
    assert API_KEY not in log


def test_training_mode_is_refused_at_start_in_one_line(tmp_path: Path, scripted_upstream) -> None:
    config = provider(scripted_upstream, "m", return_token_id_information=True)
    output = failed_start(config, tmp_path)
    assert output.strip().splitlines() == [
        "Error: invalid config for server instance 'policy_model': return_token_id_information: "
        "a hosted provider returns no token ids; use vllm_model for training"
    ]
    assert API_KEY not in output


async def test_a_shipped_environment_rollout_runs_through_it(tmp_path: Path, scripted_upstream) -> None:
    model = fresh_model("provider")
    scripted_upstream.script(model, weather_steps("chat", "It is cold in SF."))
    config = provider(scripted_upstream, model)
    result = await run_weather_rollout(config, tmp_path)
    assert_weather_rollout(result, "SF", "It is cold in SF.")
    second_call = scripted_upstream.requests(model)[1]["body"]["messages"]
    assert second_call[-1]["role"] == "tool" and "cold" in second_call[-1]["content"]


def test_the_key_stays_out_of_reprs() -> None:
    settings = {"base_url": "http://127.0.0.1:1/v1", "api_key": API_KEY, "model": "m"}
    assert_key_stays_out_of_reprs(InferenceProvider, settings, API_KEY)


async def test_a_providers_reasoning_becomes_a_reasoning_item_with_the_parser_on(
    tmp_path: Path, scripted_upstream
) -> None:
    model = fresh_model("provider")
    thinking = {"content": "42", "reasoning_content": "six times seven"}
    scripted_upstream.script(model, [{"message": thinking}, {"message": thinking}])
    with run_model(provider(scripted_upstream, model, uses_reasoning_parser=True), tmp_path) as server:
        status, answer = await post(f"{server.url}/v1/responses", {"input": "6*7?"})
    with run_model(provider(scripted_upstream, model), tmp_path) as server:
        off_status, refused = await post(f"{server.url}/v1/responses", {"input": "6*7?"})

    assert status == 200
    assert [item["type"] for item in answer["output"]] == ["reasoning", "message"]
    assert answer["output"][0]["summary"][0]["text"] == "six times seven"
    # With the parser off (the default here), reasoning the provider split off is a configuration mismatch.
    assert off_status == 502 and "uses_reasoning_parser" in refused["error"]["message"]
