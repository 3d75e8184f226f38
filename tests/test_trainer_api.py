"""The trainer flow exactly as NeMo RL writes it (`nemo_rl/environments/nemo_gym.py`), in this process:
`RunHelper().start(GlobalConfigDictParserConfig(...))` with the config NeMo RL builds in memory,
`RolloutCollectionHelper().run_examples(examples=..., head_server_config=...)` iterated from the
trainer's own event loop, `poll()` and `shutdown()`. The policy is served by the vLLM-compatible test
upstream (real BPE token ids); the environment is xlam_fc, whose reward depends on the calls made."""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from omegaconf import DictConfig

from nemo_gym.global_config import (
    find_open_port,
    maybe_get_global_config_dict,
    reset_global_config_dict_cache,
)
from nemo_gym.http.client import HTTPStatusError, get_global_aiohttp_client, request
from nemo_gym.rollout_collection import RolloutCollectionConfig, RolloutCollectionHelper, RolloutTimeoutError
from nemo_gym.server_utils import HEAD_SERVER_KEY_NAME, BaseServerConfig
from tests.helpers import REPO_ROOT, process_alive
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # NeMo Gym 0.7 deprecates this path; NeMo RL uses it
    from nemo_gym.cli import GlobalConfigDictParserConfig, RunHelper

AGENT = "xlam_fc_simple_agent"
TASK = orjson.loads((REPO_ROOT / "resources_servers/xlam_fc/data/example.jsonl").read_bytes().splitlines()[0])
BOTH_CALLS = [scripted_call("live_giveaways_by_type", {"type": "beta"}), scripted_call("live_giveaways_by_type", {"type": "game"})]  # fmt: skip
ONE_CALL = BOTH_CALLS[:1]


class Trainer:
    """What NeMo RL's NemoGym actor keeps after `_spinup`."""

    def __init__(self, rh: RunHelper, head_server_config: BaseServerConfig, model: str) -> None:
        self.rh, self.head_server_config, self.model = rh, head_server_config, model
        self.rch = RolloutCollectionHelper()

    async def run_rollouts(self, examples: list[dict[str, Any]], **options: Any) -> list[tuple[dict, dict]]:
        results = []
        for task in self.rch.run_examples(
            examples=examples, head_server_config=self.head_server_config, **options
        ):
            results.append(await task)
        return results


@pytest.fixture(scope="module")
def trainer(vllm_upstream: VllmUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trainer]:
    model = fresh_model("trainer-api")
    vllm_upstream.configure(model, reasoning_parser=True)
    head_port = find_open_port()
    # NeMo RL's initial_global_config_dict, with the environment's and the policy's config files.
    initial_global_config_dict = {
        "config_paths": [
            "resources_servers/xlam_fc/configs/xlam_fc.yaml",
            "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
        ],
        "policy_model_name": model,
        "policy_api_key": "dummy_key",
        "policy_base_url": [vllm_upstream.base_url],
        "default_host": "127.0.0.1",
        "port_range_low": 20001,
        "port_range_high": 29999,
        "global_aiohttp_connector_limit_per_host": 16_384,
        "global_aiohttp_connector_limit": 65_536,
        "ray_head_node_address": "127.0.0.1:6379",
        HEAD_SERVER_KEY_NAME: {"host": "127.0.0.1", "port": head_port},
    }
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("trainer"))  # no env.yaml here; config paths resolve to the install root
    reset_global_config_dict_cache()
    rh = RunHelper()
    try:
        rh.start(
            global_config_dict_parser_config=GlobalConfigDictParserConfig(
                dotenv_path=Path(REPO_ROOT / "nemo_gym_env.yaml").absolute(),  # absent, as it usually is
                initial_global_config_dict=DictConfig(initial_global_config_dict),
                skip_load_from_cli=True,
            )
        )
        yield Trainer(rh, BaseServerConfig(host="127.0.0.1", port=head_port), model)
    finally:
        rh.shutdown()
        os.chdir(cwd)
        reset_global_config_dict_cache()


def trained_items(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in result["response"]["output"] if "generation_token_ids" in item]


def assert_prefix_contiguous(result: dict[str, Any]) -> None:
    """NeMo RL's own check: each turn's prompt starts with every token seen so far."""
    seen: list[int] = []
    for item in trained_items(result):
        assert item["prompt_token_ids"][: len(seen)] == seen, "non-contiguous token ids"
        assert len(item["generation_token_ids"]) == len(item["generation_log_probs"])
        seen = item["prompt_token_ids"] + item["generation_token_ids"]


def test_two_turn_rollouts_come_back_with_rewards_and_contiguous_token_ids(
    trainer: Trainer, vllm_upstream: VllmUpstream
) -> None:
    trainer.rh.poll()
    assert maybe_get_global_config_dict().policy_model_name == trainer.model  # the process's config now
    vllm_upstream.script(
        trainer.model,
        [
            {"tool_calls": BOTH_CALLS},
            # Qwen3 thinks before it answers; vLLM's qwen3 parser reads an answer without </think> as reasoning.
            {"reasoning": "Both found.", "text": "Here they are."},
            {"tool_calls": ONE_CALL},
            {"reasoning": "One found.", "text": "Found some."},
        ],
    )
    examples = trainer.rch.preprocess_examples(
        [{**TASK, "agent_ref": {"name": AGENT}, "_rowidx": 7}], num_repeats=2
    )
    # One rollout at a time, so the scripted turns are taken in order.
    results = asyncio.run(trainer.run_rollouts(examples, max_resident_tasks=1))

    by_rollout = {row["_ng_rollout_index"]: (row, result) for row, result in results}
    assert [row["_rowidx"] for row, _ in results] == [7, 7]
    assert by_rollout[0][1]["reward"] == 1.0  # both expected calls
    assert by_rollout[1][1]["reward"] == 0.0  # one call missing
    for _, result in results:
        assert "_ng_task_index" not in result or result["_ng_task_index"] == 0
        assert len(trained_items(result)) == 2  # two model turns, each with its token ids
        assert_prefix_contiguous(result)


def test_the_head_server_is_ready_once_the_deployment_has_started(trainer: Trainer) -> None:
    head = trainer.head_server_config
    with urllib.request.urlopen(f"http://{head.host}:{head.port}/readyz", timeout=30) as answer:
        assert (answer.status, orjson.loads(answer.read())) == (200, {"status": "ok"})


def test_a_model_500_surfaces_as_an_exception_with_its_status(
    trainer: Trainer, vllm_upstream: VllmUpstream
) -> None:
    vllm_upstream.script(trainer.model, [{"status": 500, "repeat": 50}])
    example = {**TASK, "agent_ref": {"name": AGENT}}
    with pytest.raises(Exception) as raised:
        asyncio.run(trainer.run_rollouts([example]))
    error = raised.value
    assert error.status == 500 and isinstance(error.status, int)
    assert b"500" in error.response_content
    copy = pickle.loads(pickle.dumps(error))  # NeMo RL carries it across a Ray actor boundary
    assert (type(copy), copy.status) == (type(error), 500)

    vllm_upstream.script(trainer.model, [{"status": 500, "repeat": 50}])
    [(_, failure)] = asyncio.run(trainer.run_rollouts([example], route_failures_to_sidecar=True))
    assert failure["_ng_failure_class"] == "agent_run_error"
    assert failure["_ng_failure_http_status"] == 500
    vllm_upstream.clear(trainer.model)


def test_run_from_config_collects_into_files_and_returns_the_results(
    trainer: Trainer, vllm_upstream: VllmUpstream, tmp_path: Path
) -> None:
    (tmp_path / "tasks.jsonl").write_bytes(orjson.dumps({**TASK, "agent_ref": {"name": AGENT}}) + b"\n")
    vllm_upstream.script(trainer.model, [{"tool_calls": BOTH_CALLS}, {"reasoning": "Both.", "text": "Done."}])
    config = RolloutCollectionConfig(
        input_jsonl_fpath=str(tmp_path / "tasks.jsonl"),
        output_jsonl_fpath=str(tmp_path / "out" / "rollouts.jsonl"),
    )
    [result] = asyncio.run(trainer.rch.run_from_config(config))
    assert result["reward"] == 1.0 and len(trained_items(result)) == 2
    [line] = (tmp_path / "out" / "rollouts.jsonl").read_bytes().splitlines()
    assert orjson.loads(line)["reward"] == 1.0


def test_rows_a_spent_dispatch_budget_leaves_unstarted_come_back_as_drained_failures(
    trainer: Trainer,
) -> None:
    example = {**TASK, "agent_ref": {"name": AGENT}}
    outcomes = asyncio.run(
        trainer.run_rollouts([example, example], dispatch_budget_s=0, drain_margin_s=60, max_resident_tasks=1)
    )
    assert [failure["_ng_failure_class"] for _, failure in outcomes] == ["cancelled", "cancelled"]
    assert all("dispatch budget" in failure["error_message"] for _, failure in outcomes)


def test_a_row_naming_no_agent_fails_the_batch_before_anything_runs(trainer: Trainer) -> None:
    rows = [{**TASK, "agent_ref": {"name": AGENT}}, {**TASK, "agent_ref": {"name": "no_such_agent"}}]
    with pytest.raises(ValueError, match="row 1: agent_ref 'no_such_agent'"):
        trainer.rch.run_examples(examples=rows, head_server_config=trainer.head_server_config)


def test_a_task_source_is_resolved_to_its_agent_in_place(trainer: Trainer) -> None:
    rows = [{**TASK, "task_source": "xlam_fc"}, {**TASK, "task_source": AGENT}]
    trainer.rch.run_examples(examples=rows, head_server_config=trainer.head_server_config)
    assert [row["agent_ref"]["name"] for row in rows] == [AGENT, AGENT]


def test_shutdown_stops_every_server_and_leaves_the_callers_http_client_open(
    vllm_upstream: VllmUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started from a coroutine, as NeMo RL's actor does: the trainer's loop and HTTP session are untouched
    by the deployment's start and stop."""
    monkeypatch.chdir(tmp_path)
    reset_global_config_dict_cache()
    silent_upstream = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    model = fresh_model("trainer-api-shutdown")
    head_port = find_open_port()
    config = {
        "config_paths": [
            "resources_servers/xlam_fc/configs/xlam_fc.yaml",
            "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
        ],  # fmt: skip
        "policy_model_name": model,
        "policy_api_key": "dummy_key",
        "policy_base_url": f"http://127.0.0.1:{silent_upstream.getsockname()[1]}/v1",
        HEAD_SERVER_KEY_NAME: {"host": "127.0.0.1", "port": head_port},
    }

    async def trainer_process() -> None:
        session = get_global_aiohttp_client()
        rh = RunHelper()
        rh.start(
            GlobalConfigDictParserConfig(
                initial_global_config_dict=DictConfig(config), skip_load_from_cli=True
            )
        )
        try:
            instances = await (await request("GET", f"http://127.0.0.1:{head_port}/server_instances")).json()
            pids = {instance["pid"] for instance in instances}
            assert pids and all(process_alive(pid) for pid in pids)
            # The model never answers: the rollout ends at its deadline with a 504, never hangs.
            helper = RolloutCollectionHelper(rollout_deadline_s=3)
            head = BaseServerConfig(host="127.0.0.1", port=head_port)
            [task] = helper.run_examples([{**TASK, "agent_ref": {"name": AGENT}}], head_server_config=head)
            with pytest.raises((RolloutTimeoutError, HTTPStatusError)) as raised:
                await task
            assert raised.value.status == 504
        finally:
            rh.shutdown()
        assert not any(process_alive(pid) for pid in pids)
        with pytest.raises(RuntimeError, match="not running"):
            rh.poll()
        assert get_global_aiohttp_client() is session and not session.closed
        answer = await request("GET", vllm_upstream.base_url + "/models")
        assert answer.status == 200

    try:
        asyncio.run(trainer_process())
    finally:
        silent_upstream.close()
        reset_global_config_dict_cache()


def test_poll_names_a_server_that_died(vllm_upstream: VllmUpstream, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    reset_global_config_dict_cache()
    config = {
        "config_paths": [
            "resources_servers/xlam_fc/configs/xlam_fc.yaml",
            "responses_api_models/vllm_model/configs/vllm_model_for_training.yaml",
        ],  # fmt: skip
        "policy_model_name": fresh_model("trainer-api-poll"),
        "policy_api_key": "dummy_key",
        "policy_base_url": vllm_upstream.base_url,
        HEAD_SERVER_KEY_NAME: {"host": "127.0.0.1", "port": 0},
    }
    rh = RunHelper()
    rh.start(GlobalConfigDictParserConfig(initial_global_config_dict=config, skip_load_from_cli=True))
    try:
        rh.poll()
        victim = next(server for server in rh._deployment.servers if server.name == "xlam_fc")
        os.kill(victim.process.pid, 9)
        with pytest.raises(RuntimeError, match="'xlam_fc' exited with code -9"):
            wait_until_poll_raises(rh)
    finally:
        rh.shutdown()
        reset_global_config_dict_cache()


def wait_until_poll_raises(rh: RunHelper) -> None:
    """poll() until it raises: the deployment's thread learns of the exit from the process itself."""
    loop = asyncio.new_event_loop()
    try:
        for _ in range(2000):
            rh.poll()
            loop.run_until_complete(asyncio.sleep(0.01))
    finally:
        loop.close()
