"""`gym demo`: start the demo deployment (multiple-choice questions, mcqa), send its example tasks
through `/run`, print each reward with the expected and the extracted answer, and the mean.

Without a model configured it plays recorded model turns (replay_model), so it needs no API key; two of
the recorded answers are wrong, so the rewards differ. With `policy_base_url`, `policy_api_key` and
`policy_model_name` set (env.yaml or `+key=value`), the same deployment talks to that live model through
openai_model.

The rollouts are kept in `results/demo/rollouts.jsonl` (with their aggregate metrics beside it, as `gym eval
run` writes them), replaced on every run, for `gym view` and `gym show`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.collection.aggregation import aggregate_results
from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.config import server_kinds
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, write_atomically
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.sources import install_root
from nemo_gym.http.client import (
    HTTPStatusError,
    RequestFailedError,
    checked_json,
    request,
)
from nemo_gym.launch.launcher import Deployment, DeploymentError, run_until_stopped
from nemo_gym.serving.servers import ServerClient

OFFLINE_CONFIG = "configs/demo.yaml"
LIVE_CONFIG = "configs/demo_live.yaml"
AGENT_NAME = "mcqa_simple_agent"
LIVE_MODEL_KEYS = ("policy_base_url", "policy_api_key", "policy_model_name")
RESULTS = Path("results/demo/rollouts.jsonl")


def chosen_config(overrides: Sequence[str]) -> str:
    """The live demo when every policy_* key is set (e.g. in env.yaml), else the offline one."""
    settings = parse_global_config_dict(list(overrides))
    return LIVE_CONFIG if all(settings.get(key) for key in LIVE_MODEL_KEYS) else OFFLINE_CONFIG


def example_rows(deployment: Deployment) -> list[dict[str, Any]]:
    """The agent's `example` dataset, as listed in its config."""
    agent = deployment.global_config_dict[AGENT_NAME][server_kinds.AGENT.key]["simple_agent"]
    dataset = next(entry for entry in agent["datasets"] if entry["type"] == "example")
    path = Path(dataset["jsonl_fpath"])
    if not path.is_absolute():
        path = next(
            (root / path for root in (deployment.cwd, install_root()) if (root / path).is_file()), path
        )
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


async def run_one(url: str, row: dict[str, Any]) -> dict[str, Any]:
    response = await request("POST", url + "/run", json=row)
    return await checked_json(response)


async def run_examples(deployment: Deployment) -> int:
    """Send every example row through the agent at once, then print one line per row, in row order."""
    url = deployment.server_url(AGENT_NAME)
    rows = example_rows(deployment)
    try:
        results = await asyncio.gather(*(run_one(url, row) for row in rows))
    except (HTTPStatusError, RequestFailedError) as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1
    rewards = [float(result["reward"]) for result in results]
    for index, result in enumerate(results):
        answered = result.get("extracted_answer") or "nothing"
        print(
            f"rollout {index}: reward {rewards[index]:.2f}  (expected {result.get('expected_answer')}, "
            f"the model answered {answered})",
            flush=True,
        )
    await save_rollouts(deployment, results)
    print(f"mean reward over {len(rewards)} rollouts: {sum(rewards) / len(rewards):.3f}", flush=True)
    return 0


async def save_rollouts(deployment: Deployment, results: list[dict[str, Any]]) -> None:
    """Write the rollouts as rollout collection would (stamped with task, rollout and agent; aggregate
    metrics beside them), so that `gym view` and `gym show` have something to show."""
    paths = CollectionPaths.for_output(deployment.cwd / RESULTS)
    paths.output.parent.mkdir(parents=True, exist_ok=True)
    stamped = [
        {**result, TASK_INDEX_KEY: index, ROLLOUT_INDEX_KEY: 0, AGENT_REF_KEY: {"name": AGENT_NAME}}
        for index, result in enumerate(results)
    ]
    write_atomically(paths.output, (orjson.dumps(result) + b"\n" for result in stamped))
    paths.failures.unlink(missing_ok=True)
    paths.aggregate_metrics.unlink(missing_ok=True)
    client = ServerClient(
        head_server_config=deployment.head_server_config, global_config_dict=deployment.global_config_dict
    )
    try:
        await aggregate_results(stamped, [], client, paths.aggregate_metrics)
    except (HTTPStatusError, RequestFailedError) as error:
        print(f"(no aggregate metrics: {error})", flush=True)
    print(
        f"Rollouts saved to {RESULTS}: look at them with `gym view {RESULTS}` or `gym show {RESULTS}`.",
        flush=True,
    )


async def run_demo(overrides: Sequence[str]) -> int:
    """Ctrl-C stops the deployment as in `gym run`: one line, exit code 130, nothing left behind."""
    config = chosen_config(overrides)
    print(f"Starting the demo deployment ({config}).", flush=True)
    deployment = Deployment([f"+config_paths=[{config}]", "++head_server.port=0", *overrides])
    try:
        return await run_until_stopped(deployment, lambda: run_examples(deployment))
    except DeploymentError as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1
