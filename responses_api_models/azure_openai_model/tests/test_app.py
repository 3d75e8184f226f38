"""azure_openai_model against a local stand-in for Azure OpenAI (tests/provider_gateways.py, face `azure`:
deployment URLs, `api-version`, the `api-key` header, Azure's error body) in front of the scripted
upstream: real server processes over HTTP, the official openai client as the caller."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import orjson

from responses_api_models.azure_openai_model.app import AzureOpenAIModel
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
from tests.upstream_script import ScriptedUpstream, chat_tool_call, fresh_model

API_KEY = "azure-key-0123456789abcdef0123"
API_VERSION = "2024-10-21"


def azure(endpoint: str, deployment: str, key: str = API_KEY, **settings: object) -> dict:
    return model_config(
        "azure_openai_model",
        openai_base_url=endpoint,
        openai_api_key=key,
        openai_model=deployment,
        default_query={"api-version": API_VERSION},
        **settings,
    )


async def test_both_routes_reach_the_deployment_with_api_version_and_api_key(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    deployment = fresh_model("azure")
    scripted_upstream.script(
        deployment,
        [
            {"message": {"content": None, "tool_calls": [chat_tool_call("get_weather", {"city": "Rome"})]}},
            {"message": {"content": "hello from Azure"}},
        ],
    )
    with run_gateway("azure", scripted_upstream, API_KEY, tmp_path) as gateway:
        with run_model(azure(gateway.url, deployment), tmp_path) as server:
            async with openai.AsyncOpenAI(
                base_url=f"{server.url}/v1", api_key="unused", max_retries=0
            ) as client:
                response = await client.responses.create(model="ignored", input="Weather in Rome?")
                completion = await client.chat.completions.create(
                    model="ignored", messages=[{"role": "user", "content": "hi"}]
                )

    assert response.model == deployment
    assert response.output[0].type == "function_call"
    assert orjson.loads(response.output[0].arguments) == {"city": "Rome"}
    assert completion.choices[0].message.content == "hello from Azure"
    for call in scripted_upstream.requests(deployment):
        assert call["headers"]["api-key"] == API_KEY
        assert "Authorization" not in call["headers"]
        assert call["body"]["model"] == deployment


async def test_v1_endpoint_takes_the_deployment_in_the_body(tmp_path: Path, scripted_upstream) -> None:
    deployment = fresh_model("azure")
    scripted_upstream.script(deployment, [{"message": {"content": "v1 works"}}])
    with run_gateway("azure", scripted_upstream, API_KEY, tmp_path) as gateway:
        config = model_config(
            "azure_openai_model",
            openai_base_url=f"{gateway.url}/openai/v1",
            openai_api_key=API_KEY,
            openai_model=deployment,
        )
        with run_model(config, tmp_path) as server:
            status, answer = await post(f"{server.url}/v1/chat/completions", {"messages": []})
    assert status == 200 and answer["choices"][0]["message"]["content"] == "v1 works"


async def test_azure_errors_keep_status_retry_after_and_hide_the_key(
    tmp_path: Path, scripted_upstream
) -> None:
    deployment = fresh_model("azure")
    scripted_upstream.script(
        deployment, [{"status": 429, "retry_after": 0.6}, {"message": {"content": "after the wait"}}]
    )
    with run_gateway("azure", scripted_upstream, API_KEY, tmp_path) as gateway:
        with run_model(azure(gateway.url, deployment), tmp_path) as server:
            started = time.monotonic()
            status, answer = await post(f"{server.url}/v1/responses", {"input": "hi"})
            waited = time.monotonic() - started
            log = server.log()
        with run_model(azure(gateway.url, deployment, key="wrong-key-0123456789abcdef"), tmp_path) as server:
            refused_status, refused = await post(f"{server.url}/v1/responses", {"input": "hi"})
        bad_version = azure(gateway.url, deployment)
        bad_version["policy_model"]["responses_api_models"]["azure_openai_model"]["default_query"] = {
            "api-version": "1999-01-01"
        }
        with run_model(bad_version, tmp_path) as server:
            version_status, version_answer = await post(f"{server.url}/v1/chat/completions", {"messages": []})

    assert status == 200 and answer["output"][0]["content"][0]["text"] == "after the wait"
    assert waited >= 0.6, "Retry-After was honoured"
    assert "status 429" in log and API_KEY not in log
    assert refused_status == 401
    assert (
        refused["error"]["cause"]["code"] == "401" and "Access denied" in refused["error"]["cause"]["message"]
    )
    assert version_status == 400 and "1999-01-01" in version_answer["error"]["cause"]["message"]


def test_a_missing_api_version_is_a_one_line_config_error(tmp_path: Path) -> None:
    config = azure("https://example.openai.azure.com", "gpt-4o", num_concurrent_requests=8)
    config["policy_model"]["responses_api_models"]["azure_openai_model"]["default_query"] = {}
    output = failed_start(config, tmp_path)
    assert output.strip().splitlines() == [
        "Error: invalid config for server instance 'policy_model': default_query: api-version is required for "
        "an Azure deployment URL: set it, e.g. +default_query.api-version=2024-10-21 (or use an openai_base_url "
        "ending in /openai/v1)"
    ]
    assert API_KEY not in output


async def test_a_shipped_environment_rollout_runs_through_it(tmp_path: Path, scripted_upstream) -> None:
    deployment = fresh_model("azure")
    scripted_upstream.script(deployment, weather_steps("chat", "Cold in SF."))
    with run_gateway("azure", scripted_upstream, API_KEY, tmp_path) as gateway:
        config = azure(gateway.url, deployment)
        result = await run_weather_rollout(config, tmp_path)
    assert_weather_rollout(result, "SF", "Cold in SF.")


def test_the_key_stays_out_of_reprs() -> None:
    settings = {
        "openai_base_url": "http://127.0.0.1:1",
        "openai_api_key": API_KEY,
        "openai_model": "gpt-4o",
        "default_query": {"api-version": API_VERSION},
    }
    assert_key_stays_out_of_reprs(AzureOpenAIModel, settings, API_KEY)
