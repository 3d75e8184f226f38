"""An environment folder written for NeMo Gym (tests/fixtures/nemo_gym_style: a user's project holding
resources_servers/ng_style_counter) runs on this core unchanged: its own tests pass, and a deployment
started the trainer's way serves its rollouts and metrics."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from nemo_gym.cli.env import RunHelper
from nemo_gym.global_config import GlobalConfigDictParserConfig, reset_global_config_dict_cache
from nemo_gym.http.client import checked_json, request
from nemo_gym.prompt import apply_prompt_to_row, load_prompt_config
from nemo_gym.rollout_collection import RolloutCollectionHelper
from nemo_gym.server_utils import BaseServerConfig, ServerClient
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

PROJECT = Path(__file__).parent / "fixtures" / "nemo_gym_style"
FOLDER = PROJECT / "resources_servers" / "ng_style_counter"
AGENT = "ng_style_counter_simple_agent"
TIMEOUT_S = 300


def test_the_folders_own_tests_pass_on_this_core() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "resources_servers/ng_style_counter/tests"],
        cwd=PROJECT, capture_output=True, text=True, timeout=TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "6 passed" in result.stdout


@pytest.fixture(scope="module")
def deployment(vllm_upstream: VllmUpstream) -> Iterator[tuple[RunHelper, BaseServerConfig, str]]:
    model = fresh_model("ng-style-counter")
    config = {
        "config_paths": [
            "resources_servers/ng_style_counter/configs/ng_style_counter.yaml",  # found in the project
            "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",  # found in Gym
        ],
        "policy_model_name": model,
        "policy_api_key": "dummy_key",
        "policy_base_url": vllm_upstream.base_url,
        "head_server": {"host": "127.0.0.1", "port": 0},
    }
    cwd = os.getcwd()
    os.chdir(PROJECT)
    reset_global_config_dict_cache()
    rh = RunHelper()
    try:
        rh.start(GlobalConfigDictParserConfig(initial_global_config_dict=config, skip_load_from_cli=True))
        head = ServerClient.load_head_server_config()
        yield rh, head, model
    finally:
        rh.shutdown()
        os.chdir(cwd)
        reset_global_config_dict_cache()


def counter_rows() -> list[dict]:
    prompt_config = load_prompt_config(str(FOLDER / "prompts" / "counter.yaml"))
    raw = [orjson.loads(line) for line in (FOLDER / "data" / "example.jsonl").read_bytes().splitlines()]
    return [{**apply_prompt_to_row(row, prompt_config), "agent_ref": {"name": AGENT}} for row in raw]


async def test_the_folder_serves_rollouts_and_its_metrics_in_a_deployment(deployment, vllm_upstream) -> None:
    rh, head, model = deployment
    first, second = counter_rows()[:2]
    vllm_upstream.script(
        model,
        [
            {"tool_calls": [scripted_call("increment_counter", {"count": 3})]},
            # Qwen3 thinks before it answers; vLLM's qwen3 parser reads an answer without </think> as reasoning.
            {"reasoning": "Done.", "text": "{5}"},
            {"tool_calls": [scripted_call("increment_counter", {"count": 9})]},
            {"reasoning": "Done.", "text": "{9}"},
        ],
    )
    helper = RolloutCollectionHelper()
    rows = helper.preprocess_examples([first, second])
    results = []
    for task in helper.run_examples(examples=rows, head_server_config=head, max_resident_tasks=1):
        row, result = await task
        results.append({**result, "_ng_task_index": row["_ng_task_index"], "_ng_rollout_index": 0})
    rewards = {result["_ng_task_index"]: (result["reward"], result["final_count"]) for result in results}
    assert rewards == {0: (1.0, 5), 1: (0.0, 9)}  # 2 + 3 is right; 0 + 9 is not the expected 10

    client = ServerClient.load_from_global_config(head)
    body = {"verify_responses": [{k: v for k, v in r.items() if k != "response"} for r in results]}
    metrics = await checked_json(await client.post(AGENT, "/aggregate_metrics", json=body))
    assert metrics["key_metrics"]["num_verify_responses"] == 2
    assert metrics["agent_metrics"]["pass@1/accuracy"] == pytest.approx(50.0)

    resources_url = client.server_base_url("ng_style_counter")
    answer = await checked_json(await request("POST", resources_url + "/server_url", json={}))
    assert answer == {"url": resources_url}  # get_server_url inside the server process
    rh.poll()
