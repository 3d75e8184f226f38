"""One way for tests to start each kind of shipped model server in front of a test upstream, so a
protocol test (streaming, `/v1/messages`) runs unchanged against all of them.

`openai_model`, `vllm_model` and the servers built on vllm_model (`inference_provider`, ...) call a test
upstream (tests/scripted_upstream.py or tests/vllm_upstream.py) with the served model name as their
upstream model; `replay_model` replays the rollouts recorded in its tests/data. Also the scripted steps
that answer alike through either upstream dialect, and a raw POST with an SSE reader for what the official
clients would not show as sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from nemo_gym.testing import StartedServer
from tests.helpers import REPO_ROOT, instance_config, run_instance
from tests.upstream_script import assistant_message, chat_tool_call, function_call, reasoning

API_KEY = "sk-protocol-test-0123456789abcdef"
UPSTREAM_KINDS = ("openai_model", "vllm_model", "inference_provider")
REQUEST_TIMEOUT_S = 30.0
REPLAY_FILE = (
    REPO_ROOT / "responses_api_models/replay_model/tests/data/example_single_tool_call_rollouts.jsonl"
)


def upstream_settings(kind: str, base_url: str, model: str) -> dict[str, Any]:
    """openai_model's keys, or vllm_model's (which its subclasses read too)."""
    if kind == "openai_model":
        return {"openai_base_url": base_url, "openai_api_key": API_KEY, "openai_model": model}
    return {"base_url": base_url, "api_key": API_KEY, "model": model, "uses_reasoning_parser": True}


@contextmanager
def model_server(
    kind: str,
    tmp_path: Path,
    base_url: str = "",
    model: str = "",
    top_level: dict[str, Any] | None = None,
    **settings: Any,
) -> Iterator[StartedServer]:
    """A running model server of `kind`; `base_url` and `model` name its upstream (not for replay_model),
    `top_level` adds deployment-wide keys (such as `token_id_capture`) to its config."""
    if kind == "replay_model":
        inner: dict[str, Any] = {"rollouts_jsonl_fpath": [str(REPLAY_FILE)]}
    else:
        inner = upstream_settings(kind, base_url, model)
    config = {
        **(top_level or {}),
        "policy_model": instance_config("responses_api_models", kind, **{**inner, **settings}),
    }
    with run_instance(config, "policy_model", tmp_path) as server:
        yield server


def recorded_rollout() -> dict[str, Any]:
    """The first rollout replay_model serves: its request and the response it answers with."""
    return json.loads(REPLAY_FILE.read_text().splitlines()[0])


def text_step(kind: str, text: str, thought: str | None = None) -> dict[str, Any]:
    """A scripted answer of `text` (after the reasoning `thought`) in the upstream dialect `kind` calls."""
    if kind == "openai_model":
        return {"output": [*([reasoning(thought)] if thought else []), assistant_message(text)]}
    return {"message": {"content": text, **({"reasoning_content": thought} if thought else {})}}


def tool_step(kind: str, city: str, call_id: str | None = None) -> dict[str, Any]:
    """A scripted `get_weather` call for `city`, in the upstream dialect `kind` calls."""
    if kind == "openai_model":
        return {"output": [function_call("get_weather", {"city": city}, call_id)]}
    return {
        "message": {"content": None, "tool_calls": [chat_tool_call("get_weather", {"city": city}, call_id)]}
    }


def chat_text_step(text: str) -> dict[str, Any]:
    return {"message": {"content": text}}


def sse_events(raw: bytes) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) of each event of a raw SSE body; comments are left out."""
    events = []
    for block in raw.decode().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                payload = line.removeprefix("data: ")
                data = payload if payload == "[DONE]" else orjson.loads(payload)
        if data is not None:
            events.append((name, data))
    return events


async def raw_post(
    server: StartedServer, path: str, body: dict[str, Any]
) -> tuple[int, Mapping[str, str], bytes]:
    """Status, headers and body bytes of a POST, for what the official clients would not show as sent."""
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(server.url + path, json=body) as answer:
            return answer.status, answer.headers.copy(), await answer.read()
