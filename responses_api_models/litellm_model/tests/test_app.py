"""litellm_model against a local stand-in for a LiteLLM proxy (tests/provider_gateways.py, face `litellm`:
its routes, bearer or x-litellm-key auth, its error body, /health/readiness/details) in front of the
scripted upstream: real server processes over HTTP, the official openai client as the caller."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import orjson
import pytest

from responses_api_models.litellm_model.app import LiteLLMModel
from tests.model_server_checks import (
    assert_key_stays_out_of_reprs,
    assert_weather_rollout,
    failed_start,
    model_config,
    post,
    run_gateway,
    run_model,
    run_weather_rollout,
    weather_steps,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

API_KEY = "sk-litellm-0123456789abcdef"


def litellm(proxy_url: str, model: str, key: str = API_KEY, **settings: object) -> dict:
    return model_config(
        "litellm_model", openai_base_url=f"{proxy_url}/v1", openai_api_key=key, openai_model=model, **settings
    )


async def test_both_routes_through_the_proxy_with_the_official_client(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model("litellm")
    scripted_upstream.script(
        model,
        [
            {"output": [assistant_message("from responses")]},
            {"message": {"content": "from chat"}},
        ],
    )
    with run_gateway("litellm", scripted_upstream, API_KEY, tmp_path) as proxy:
        with run_model(litellm(proxy.url, model, extra_body={"seed": 5}), tmp_path) as server:
            async with openai.AsyncOpenAI(
                base_url=f"{server.url}/v1", api_key="unused", max_retries=0
            ) as client:
                response = await client.responses.create(model="ignored", input="hi")
                completion = await client.chat.completions.create(
                    model="ignored", messages=[{"role": "user", "content": "hi"}]
                )
            log = server.log()

    assert response.output_text == "from responses"
    assert completion.choices[0].message.content == "from chat"
    assert "LiteLLM proxy version 1.83.0 is safe to use" in log
    responses_call, chat_call = scripted_upstream.requests(model)
    assert (responses_call["path"], chat_call["path"]) == ("/v1/responses", "/v1/chat/completions")
    assert responses_call["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert responses_call["body"] == {"input": "hi", "model": model, "seed": 5}


async def test_the_proxys_quirks_are_normalised(tmp_path: Path, scripted_upstream: ScriptedUpstream) -> None:
    model = fresh_model("litellm")
    quirky_reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": None,
        "content": [{"type": "output_text", "text": "thinking"}],
    }
    native = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": model,
        "output": [quirky_reasoning, assistant_message("native")],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "reasoning": {"effort": "none"},
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    downgraded = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "downgraded", "reasoning_content": "hmm"},
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
    }
    scripted_upstream.script(model, [{"response": native}, {"response": downgraded}])
    with run_gateway("litellm", scripted_upstream, API_KEY, tmp_path) as proxy:
        with run_model(litellm(proxy.url, model), tmp_path) as server:
            native_status, fixed = await post(f"{server.url}/v1/responses", {"input": "hi"})
            chat_status, converted = await post(f"{server.url}/v1/responses", {"input": "hi"})

    assert native_status == chat_status == 200
    assert fixed["reasoning"]["effort"] is None
    assert (
        fixed["output"][0]["summary"] == [] and fixed["output"][0]["content"][0]["type"] == "reasoning_text"
    )
    assert fixed["usage"]["input_tokens"] == 7 and fixed["usage"]["total_tokens"] == 10
    assert fixed["usage"]["input_tokens_details"] == {"cached_tokens": 0}
    assert converted["object"] == "response"
    assert [item["type"] for item in converted["output"]] == ["reasoning", "message"]
    assert converted["output"][0]["summary"][0]["text"] == "hmm"
    assert converted["output"][1]["content"][0]["text"] == "downgraded"
    assert converted["usage"]["output_tokens"] == 2


async def test_proxy_errors_keep_status_retry_after_and_hide_the_key(
    tmp_path: Path, scripted_upstream
) -> None:
    model = fresh_model("litellm")
    scripted_upstream.script(
        model, [{"status": 429, "retry_after": 0.6}, {"output": [assistant_message("after the wait")]}]
    )
    with run_gateway("litellm", scripted_upstream, API_KEY, tmp_path) as proxy:
        with run_model(litellm(proxy.url, model), tmp_path) as server:
            started = time.monotonic()
            status, answer = await post(f"{server.url}/v1/responses", {"input": "hi"})
            waited = time.monotonic() - started
        wrong_key = "sk-wrong-0123456789abcdef"
        # The version check is what a wrong key meets first; skip it to see a model call refused.
        with run_model(
            litellm(proxy.url, model, key=wrong_key, verify_proxy_version=False), tmp_path
        ) as server:
            refused_status, refused = await post(f"{server.url}/v1/chat/completions", {"messages": []})
            log = server.log()

    assert status == 200 and answer["output"][0]["content"][0]["text"] == "after the wait"
    assert waited >= 0.6, "Retry-After was honoured"
    assert refused_status == 401
    cause = refused["error"]["cause"]
    assert (cause["type"], cause["code"]) == ("auth_error", "401")
    assert "Received API Key = ****" in cause["message"]
    assert wrong_key not in orjson.dumps(refused).decode() and wrong_key not in log


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        (
            "1.82.7",
            "a release that carried credential-harvesting malware; upgrade the proxy to 1.83.0 or later",
        ),
        ("1.80.0", "older than the minimum safe 1.83.0; upgrade the proxy"),
    ],
)
def test_an_unsafe_proxy_version_stops_the_start(tmp_path: Path, scripted_upstream, version, reason) -> None:
    env = {"GATEWAY_LITELLM_VERSION": version}
    with run_gateway("litellm", scripted_upstream, API_KEY, tmp_path, env) as proxy:
        output = failed_start(litellm(proxy.url, fresh_model("litellm")), tmp_path)
    assert output.strip().splitlines() == [
        f"Error: server instance 'policy_model': the LiteLLM proxy runs {version}, {reason}"
    ]
    assert API_KEY not in output


async def test_a_shipped_environment_rollout_runs_through_it(tmp_path: Path, scripted_upstream) -> None:
    model = fresh_model("litellm")
    scripted_upstream.script(model, weather_steps("responses", "Cold in SF."))
    with run_gateway("litellm", scripted_upstream, API_KEY, tmp_path) as proxy:
        config = litellm(proxy.url, model)
        result = await run_weather_rollout(config, tmp_path)
    assert_weather_rollout(result, "SF", "Cold in SF.")


def test_the_key_stays_out_of_reprs() -> None:
    settings = {
        "openai_base_url": "http://127.0.0.1:1/v1",
        "openai_api_key": API_KEY,
        "openai_model": "m",
        "verify_proxy_version": False,
    }
    assert_key_stays_out_of_reprs(LiteLLMModel, settings, API_KEY)
