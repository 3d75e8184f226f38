"""One way for tests to start each kind of shipped model server in front of a test upstream, so a
protocol test (streaming, `/v1/messages`) runs unchanged against all of them.

`openai_model` and `vllm_model` call the scripted upstream (tests/scripted_upstream.py) with the served
model name as their upstream model; `replay_model` replays the rollouts recorded in its tests/data.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nemo_gym.testing import StartedServer
from tests.helpers import REPO_ROOT, instance_config, run_instance

API_KEY = "sk-protocol-test-0123456789abcdef"
UPSTREAM_KINDS = ("openai_model", "vllm_model")
REPLAY_FILE = (
    REPO_ROOT / "responses_api_models/replay_model/tests/data/example_single_tool_call_rollouts.jsonl"
)


def upstream_settings(kind: str, base_url: str, model: str) -> dict[str, Any]:
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
    inner = {"rollouts_jsonl_fpath": [str(REPLAY_FILE)]} if kind == "replay_model" else {}
    if kind in UPSTREAM_KINDS:
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
