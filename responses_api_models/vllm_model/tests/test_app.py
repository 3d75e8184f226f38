"""vllm_model against the scripted upstream: real server processes over HTTP, no mocks.

Each test starts its own model server with a fresh served model name, so the upstream's scripts and
request logs of one test are never seen by another.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import orjson
import pytest
from omegaconf import OmegaConf

from nemo_gym.server_utils import CHECK_CONFIG_ONLY_ENV_VAR_NAME
from nemo_gym.testing import session_id_in_cookie
from responses_api_models.vllm_model.app import VLLMModelConfig, replica_for
from tests.helpers import REPO_ROOT, StartedServer, instance_config, run_instance, run_server
from tests.upstream_script import ScriptedUpstream, chat_tool_call, fresh_model

API_KEY = "sk-vllm-model-test-0123456789abcdef"
REQUEST_TIMEOUT_S = 30.0
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
APP = CONFIGS.parent / "app.py"
FORECAST_TOOL = {
    "type": "function",
    "name": "lookup_forecast",
    "parameters": {"type": "object", "properties": {"place": {"type": "string"}}, "required": ["place"]},
    "strict": False,
}
CONTEXT_ERROR = {
    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
    "type": "BadRequestError",
    "code": 400,
}


def vllm_config(base_url: str | list[str], model: str, **settings: Any) -> dict[str, Any]:
    """A one-instance config; the reasoning parser is on unless a test says otherwise."""
    inner = {"base_url": base_url, "api_key": API_KEY, "model": model, "uses_reasoning_parser": True}
    return {"policy_model": instance_config("responses_api_models", "vllm_model", **{**inner, **settings})}


def rollout_session() -> aiohttp.ClientSession:
    """A client that keeps the server's session cookie (from 127.0.0.1, hence `unsafe`), like an agent."""
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    return aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.CookieJar(unsafe=True))


@dataclass
class Served:
    """A running vllm_model process, with the official client (its retries off, so every status the
    server sends is seen as sent) and a raw poster for bodies the client would refuse to build."""

    process: StartedServer
    openai: openai.AsyncOpenAI

    async def post(
        self, path: str, body: dict[str, Any], session: aiohttp.ClientSession | None = None
    ) -> tuple[int, Any]:
        if session is None:
            async with rollout_session() as fresh:
                return await self.post(path, body, fresh)
        async with session.post(self.process.url + path, json=body) as answer:
            return answer.status, orjson.loads(await answer.read())


@asynccontextmanager
async def served(
    tmp_path: Path, base_url: str | list[str], model: str, **settings: Any
) -> AsyncIterator[Served]:
    with run_instance(vllm_config(base_url, model, **settings), "policy_model", tmp_path) as process:
        client = openai.AsyncOpenAI(
            base_url=f"{process.url}/v1", api_key="unused", max_retries=0, timeout=REQUEST_TIMEOUT_S
        )
        async with client:
            yield Served(process, client)


def start_refusal(tmp_path: Path, implementation: str = "vllm_model", **settings: Any) -> list[str]:
    """The stderr lines of a vllm_model process (or of a folder built on it) that checks `settings` (over
    a minimal valid config) and must refuse to start."""
    defaults = {
        "base_url": "http://127.0.0.1:9/v1",
        "api_key": "k",
        "model": "m",
        "uses_reasoning_parser": False,
    }
    config = {
        "policy_model": instance_config("responses_api_models", implementation, **{**defaults, **settings})
    }
    app = APP.parents[1] / implementation / "app.py"
    config_file = tmp_path / "config.yaml"
    config_file.write_bytes(orjson.dumps(config))
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_FILE": str(config_file),
        "NEMO_GYM_CONFIG_PATH": "policy_model",
        CHECK_CONFIG_ONLY_ENV_VAR_NAME: "1",
        "PYTHONPATH": str(app.parents[2]),  # the install root, as the launcher sets it
    }
    done = subprocess.run(
        [sys.executable, str(app)], capture_output=True, text=True, timeout=120, env=env, cwd=app.parent
    )
    assert done.returncode != 0
    return done.stderr.strip().splitlines()


@contextmanager
def second_upstream(tmp_path: Path) -> Iterator[ScriptedUpstream]:
    """Another scripted upstream process: a second vLLM replica with its own request log."""
    with run_server([str(REPO_ROOT / "tests" / "scripted_upstream.py")], tmp_path) as server:
        yield ScriptedUpstream(server.host, server.port)


def prompts_seen(upstream: ScriptedUpstream, model: str) -> list[str]:
    """The text of the last message of every chat body the upstream received for `model`."""
    return [call["body"]["messages"][-1]["content"][0]["text"] for call in upstream.requests(model)]


async def test_multi_item_input_becomes_one_exact_chat_body_and_the_answer_parses_with_openai(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    rome_call = chat_tool_call("lookup_forecast", {"place": "Rome"}, call_id="call_rome")
    reply = {"content": "Checking Rome.", "reasoning_content": "Now Rome.", "tool_calls": [rome_call]}
    scripted_upstream.script(
        model, [{"message": reply, "usage": {"prompt_tokens": 7, "completion_tokens": 2}}]
    )
    history = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use the tool."}]},
        {"type": "function_call", "call_id": "call_paris", "name": "lookup_forecast", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_paris", "output": "sunny"},
        {"role": "user", "content": "And Rome?"},
    ]
    settings = {
        "extra_body": {"top_k": 20, "seed": 1},
        "chat_template_kwargs": {"enable_thinking": True},
        "default_headers": {"X-Gym-Test": "yes"},
    }
    async with served(tmp_path, scripted_upstream.base_url, model, **settings) as vllm:
        response = await vllm.openai.responses.create(
            model="callers-choice",
            input=history,
            tools=[FORECAST_TOOL],
            max_output_tokens=100,
            temperature=0.6,
            metadata={"extra_body": '{"seed": 7}'},
        )

    [call] = scripted_upstream.requests(model)
    assert call["path"] == "/v1/chat/completions"
    paris_call = {
        "id": "call_paris",
        "type": "function",
        "function": {"name": "lookup_forecast", "arguments": "{}"},
    }
    assert call["body"] == {
        "top_k": 20,
        "seed": 7,
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [paris_call],
                "reasoning_content": "Use the tool.",
                "reasoning": "Use the tool.",
            },
            {"role": "tool", "tool_call_id": "call_paris", "content": "sunny"},
            {"role": "user", "content": "And Rome?"},
        ],
        "temperature": 0.6,
        "metadata": {"extra_body": '{"seed": 7}'},
        "max_tokens": 100,
        "tools": [
            {
                "type": "function",
                "function": {"name": "lookup_forecast", "parameters": FORECAST_TOOL["parameters"]},
            }
        ],
        "model": model,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    assert call["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert call["headers"]["X-Gym-Test"] == "yes"

    assert response.id.startswith("resp_") and response.model == model
    assert response.status == "completed" and response.incomplete_details is None
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    reasoning, message, function_call = response.output
    assert reasoning.id.startswith("rs_") and [part.text for part in reasoning.summary] == ["Now Rome."]
    assert message.id.startswith("msg_") and response.output_text == "Checking Rome."
    assert {function_call.id, function_call.call_id} == {"call_rome"}
    assert (function_call.name, orjson.loads(function_call.arguments)) == (
        "lookup_forecast",
        {"place": "Rome"},
    )
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (7, 2, 9)
    assert response.temperature == 0.6 and response.max_output_tokens == 100


def session_id_of(session: aiohttp.ClientSession) -> str:
    [cookie] = list(session.cookie_jar)
    return session_id_in_cookie(cookie.value)


async def test_each_session_stays_on_the_replica_its_id_pins_it_to(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    names = [f"s{index}" for index in range(6)]
    with second_upstream(tmp_path) as other_upstream:
        upstreams = [scripted_upstream, other_upstream]
        async with served(tmp_path, [upstream.base_url for upstream in upstreams], model) as vllm:
            sessions = [rollout_session() for _ in names]
            try:
                for turn in (1, 2):
                    for name, session in zip(names, sessions, strict=True):
                        status, _ = await vllm.post("/v1/responses", {"input": f"{name}-{turn}"}, session)
                        assert status == 200
                pins = [replica_for(session_id_of(session), 2) for session in sessions]
            finally:
                await asyncio.gather(*(session.close() for session in sessions))
        seen = [prompts_seen(upstream, model) for upstream in upstreams]
    for name, pin in zip(names, pins, strict=True):
        assert [prompt for prompt in seen[pin] if prompt.startswith(f"{name}-")] == [f"{name}-1", f"{name}-2"]
        assert not any(prompt.startswith(f"{name}-") for prompt in seen[1 - pin])


async def test_context_length_400_is_an_empty_incomplete_turn_and_other_400s_stay_errors(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    too_long = {"status": 400, "body": {"error": CONTEXT_ERROR}}
    other_cause = {"message": "unknown chat template", "type": "BadRequestError"}
    scripted_upstream.script(model, [too_long, too_long, {"status": 400, "body": {"error": other_cause}}])
    async with served(tmp_path, scripted_upstream.base_url, model) as vllm:
        response = await vllm.openai.responses.create(model="any", input="a very long prompt")
        completion = await vllm.openai.chat.completions.create(
            model="any", messages=[{"role": "user", "content": "a very long prompt"}]
        )
        status, body = await vllm.post("/v1/responses", {"input": "hi"})

    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in response.output] == ["message"] and response.output_text == ""
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == ""
    assert (status, body["error"]["cause"]) == (400, other_cause)


async def test_upstream_500_keeps_its_status_after_bounded_retries(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"status": 500, "repeat": 2}])
    async with served(tmp_path, scripted_upstream.base_url, model, max_retries=2) as vllm:
        status, body = await vllm.post("/v1/responses", {"input": "hi"})

    assert status == 500
    error = body["error"]
    assert (error["type"], error["status"]) == ("inner_server_error", 500)
    assert error["server"] == "VLLMModel___policy_model"
    assert error["cause"]["message"] == "scripted 500"
    assert len(scripted_upstream.requests(model)) == 2


async def test_chat_route_forces_the_model_and_puts_server_defaults_under_the_request(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "Bonjour"}}])
    settings = {
        "extra_body": {"seed": 1, "temperature": 0.1},
        "chat_template_kwargs": {"enable_thinking": False},
        "replace_developer_role_with_system": True,
    }
    chat = [{"role": "developer", "content": "French only."}, {"role": "user", "content": "Hi"}]
    async with served(tmp_path, scripted_upstream.base_url, model, **settings) as vllm:
        completion = await vllm.openai.chat.completions.create(
            model="callers-choice", messages=chat, temperature=0.5, metadata={"extra_body": '{"seed": 7}'}
        )

    [call] = scripted_upstream.requests(model)
    assert call["body"] == {
        "seed": 7,
        "temperature": 0.5,
        "messages": [{"role": "system", "content": "French only."}, {"role": "user", "content": "Hi"}],
        "metadata": {"extra_body": '{"seed": 7}'},
        "model": model,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    assert completion.choices[0].message.content == "Bonjour"


async def test_without_sequential_reasoning_an_empty_assistant_turn_is_not_continued(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    question = {"role": "user", "content": "Solve it"}
    thought = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]}
    nudge = {"role": "user", "content": "Go on"}
    async with served(
        tmp_path, scripted_upstream.base_url, model, sequential_reasoning_allowed=False
    ) as vllm:
        stopped = await vllm.openai.responses.create(model="any", input=[question, thought])
        assert scripted_upstream.requests(model) == []
        answered = await vllm.openai.responses.create(model="any", input=[question, thought, nudge])

    assert stopped.status == "incomplete" and stopped.incomplete_details.reason == "content_filter"
    assert [item.type for item in stopped.output] == ["message"] and stopped.output_text == ""
    assert answered.output_text == "ok"
    assert len(scripted_upstream.requests(model)) == 1


async def test_requests_the_conversion_cannot_express_are_400_before_any_upstream_call(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    file_part = {"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}
    async with served(tmp_path, scripted_upstream.base_url, model) as vllm:
        json_status, json_body = await vllm.post(
            "/v1/responses", {"input": "hi", "metadata": {"extra_body": "{"}}
        )
        part_status, part_body = await vllm.post("/v1/responses", {"input": [file_part]})

    assert (json_status, part_status) == (400, 400)
    assert json_body["error"]["message"].startswith("metadata.extra_body is not valid JSON")
    assert "input[0].content[0]: content part type 'input_file'" in part_body["error"]["message"]
    assert scripted_upstream.requests(model) == []


async def test_a_reasoning_field_without_the_parser_setting_is_a_bad_gateway(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "Hi", "reasoning_content": "thought"}}])
    async with served(tmp_path, scripted_upstream.base_url, model, uses_reasoning_parser=False) as vllm:
        status, body = await vllm.post("/v1/responses", {"input": "hi"})

    assert (status, body["error"]["type"]) == (502, "bad_upstream_response")
    assert "uses_reasoning_parser" in body["error"]["message"]


async def test_max_concurrent_requests_lets_one_call_upstream_at_a_time(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    hold_s = 0.4
    scripted_upstream.script(model, [{"delay_s": hold_s, "message": {"content": "held"}, "repeat": 3}])
    async with served(tmp_path, scripted_upstream.base_url, model, max_concurrent_requests=1) as vllm:
        answers = await asyncio.gather(
            *(vllm.openai.responses.create(model="any", input=f"call {index}") for index in range(3))
        )

    # All three were sent at once. Uncapped, they would reach the upstream within milliseconds; capped,
    # each one arrives only after the upstream has held the previous one for `hold_s`.
    received = sorted(entry["received_at"] for entry in scripted_upstream.requests(model))
    gaps = [later - earlier for earlier, later in zip(received, received[1:], strict=False)]
    assert len(gaps) == 2 and min(gaps) >= hold_s * 0.9
    assert [answer.output_text for answer in answers] == ["held"] * 3


def test_training_mode_without_an_eos_token_id_starts(tmp_path: Path) -> None:
    # Nothing listens at the upstream: the end-of-turn id is looked for later, by the first continued turn.
    config = vllm_config("http://127.0.0.1:1/v1", fresh_model(), return_token_id_information=True)
    with run_instance(config, "policy_model", tmp_path) as started:
        assert started.process.poll() is None


@pytest.mark.parametrize(
    ("file_name", "training", "supplies_prefix"),
    [
        ("vllm_model.yaml", False, False),
        ("vllm_model_for_training.yaml", True, False),
        ("vllm_model_supply_prefix.yaml", True, True),
    ],
)
def test_shipped_configs_are_valid_server_configs(
    file_name: str, training: bool, supplies_prefix: bool
) -> None:
    policy = {
        "policy_base_url": ["http://127.0.0.1:1/v1"],
        "policy_api_key": "k",
        "policy_model_name": "m",
    }
    merged = OmegaConf.merge(OmegaConf.load(CONFIGS / file_name), policy)
    inner = OmegaConf.to_container(merged, resolve=True)["policy_model"]["responses_api_models"]["vllm_model"]
    config = VLLMModelConfig.model_validate({**inner, "name": "policy_model", "host": "127.0.0.1", "port": 0})

    assert config.base_url == ["http://127.0.0.1:1/v1"] and config.model == "m"
    assert config.extra_body == {} and config.chat_template_kwargs == {}
    assert config.uses_reasoning_parser and config.return_token_id_information is training
    assert config.eos_token_id is None
    assert config.supply_prefix_token_ids is supplies_prefix
    assert not config.request_prompt_and_generation_token_ids
    assert config.endpoint_file is None and config.endpoint_connection_retries == 8
    assert (config.endpoint_stale_grace_s, config.endpoint_check_interval_s) == (300.0, 10.0)


def test_a_session_is_pinned_by_its_ids_sha256_alike_in_every_process() -> None:
    """NeMo Gym 0.7's pinning: the first 8 bytes of sha256(session id), big-endian, modulo the count."""
    sessions = [f"session-{index}" for index in range(300)]
    pins = [replica_for(session, 3) for session in sessions]
    for session, pin in zip(sessions, pins, strict=True):
        digest = hashlib.sha256(session.encode()).digest()
        assert pin == int.from_bytes(digest[:8], "big") % 3
    assert set(pins) == {0, 1, 2}
    assert all(replica_for(session, 1) == 0 for session in sessions)


async def test_context_overflow_is_passed_on_as_vllms_400_when_the_config_says_so(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"status": 400, "body": {"error": CONTEXT_ERROR}}])
    async with served(
        tmp_path, scripted_upstream.base_url, model, propagate_context_overflow_errors=True
    ) as vllm:
        status, body = await vllm.post("/v1/responses", {"input": "a very long prompt"})

    assert (status, body["error"]["cause"]) == (400, CONTEXT_ERROR)


async def test_a_model_call_under_a_rollout_prefix_is_served_as_the_plain_route(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    """NeMo Gym 0.7's environment servers call `/ng-rollout/<key>[/training-token-capture]/v1/responses`."""
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "first"}}, {"message": {"content": "second"}}])
    async with served(tmp_path, scripted_upstream.base_url, model) as vllm:
        plain = await vllm.post("/ng-rollout/rollout-1/v1/responses", {"input": "hi"})
        capture = await vllm.post(
            "/ng-rollout/rollout-1/training-token-capture/v1/responses", {"input": "hi"}
        )

    assert [(status, body["output"][-1]["content"][0]["text"]) for status, body in (plain, capture)] == [
        (200, "first"),
        (200, "second"),
    ]
