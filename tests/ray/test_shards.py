"""Shards of a deployment placed as Ray actors on a real two-node cluster (tests/ray/conftest.py)."""

from __future__ import annotations

import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
import requests

from nemo_gym.rollout_collection import RolloutCollectionHelper
from nemo_gym.server_utils import BaseServerConfig
from tests.helpers import REPO_ROOT, RunningDeployment, gym_command, running_deployment, write_config
from tests.ray.conftest import TwoNodeCluster
from tests.upstream_script import ScriptedUpstream, fresh_model

pytestmark = pytest.mark.timeout(300)

SHARDED_SERVERS = ["example_single_tool_call", "example_single_tool_call_simple_agent", "policy_model"]


def sharded_config(
    workdir: Path, cluster: TwoNodeCluster, upstream: ScriptedUpstream, model: str, **shard
) -> Path:
    """The weather deployment of `make bench`, all three servers in one shard."""
    write_config(
        workdir,
        {
            "config_paths": [
                f"{REPO_ROOT}/resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
                f"{REPO_ROOT}/configs/policy_model.yaml",
            ],
            "policy_base_url": upstream.base_url,
            "policy_api_key": "sk-shards",
            "policy_model_name": model,
            "ray_head_node_address": cluster.address,
            "shards": {"weather": {"servers": SHARDED_SERVERS, **shard}},
        },
    )
    return workdir / "deployment.yaml"


@contextmanager
def sharded_deployment(config_path: Path) -> Iterator[tuple[RunningDeployment, list[dict]]]:
    with running_deployment([f"+config_paths=[{config_path}]"], REPO_ROOT) as deployment:
        with urllib.request.urlopen(f"{deployment.head_url}/server_instances", timeout=10) as answer:
            yield deployment, orjson.loads(answer.read())


@pytest.fixture(scope="module")
def sharded(two_node_cluster: TwoNodeCluster, scripted_upstream: ScriptedUpstream, tmp_path_factory):
    """One weather deployment with two STRICT_SPREAD replicas, shared by this module's tests."""
    model = fresh_model("shards")
    config = sharded_config(
        tmp_path_factory.mktemp("sharded"), two_node_cluster, scripted_upstream, model, replicas=2, num_cpus=1,
        placement_strategy="STRICT_SPREAD",
    )  # fmt: skip
    with sharded_deployment(config) as (deployment, instances):
        yield deployment, instances, model


def test_strict_spread_replicas_land_on_distinct_nodes_and_each_serves_whole_rollouts(
    sharded, scripted_upstream
):
    deployment, instances, model = sharded
    replicas = [entry for entry in instances if "shard" in entry]
    assert Counter(entry["process_name"] for entry in replicas) == Counter(SHARDED_SERVERS * 2)
    nodes = {entry["replica"]: entry["node_id"] for entry in replicas}
    assert len(set(nodes.values())) == 2  # one replica per node
    assert {entry["host"] for entry in replicas} == {"127.0.0.1"}
    agents = [entry for entry in replicas if entry["process_name"] == SHARDED_SERVERS[1]]
    before = len(scripted_upstream.requests(model))
    for agent in agents:
        row = {"responses_create_params": {"input": "What is the weather in Paris?"}}
        answer = requests.post(agent["url"] + "/run", json=row, timeout=60)
        assert answer.status_code == 200, answer.text
        assert "reward" in answer.json()
    assert len(scripted_upstream.requests(model)) - before == len(agents)

    status = subprocess.run(
        gym_command("env", "status", f"++head_server.port={head_port(deployment)}", "--json"),
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
    )  # fmt: skip
    assert status.returncode == 0, status.stdout + status.stderr
    listed = orjson.loads(status.stdout)
    assert {(entry.get("shard"), entry.get("node_id")) for entry in listed if entry.get("shard")} == {
        ("weather", node) for node in nodes.values()
    }
    assert all(entry["status"] == "success" for entry in listed)


def test_a_collection_spreads_task_groups_over_the_replicas_and_keeps_each_group_together(sharded, tmp_path):
    deployment, _, _ = sharded
    results = collect(deployment, tmp_path, tasks=8, repeats=2)
    assert sorted((row["_ng_task_index"], row["_ng_rollout_index"]) for row in results) == [
        (task, rollout) for task in range(8) for rollout in range(2)
    ]
    by_task: dict[int, set[str]] = {}
    for row in results:
        by_task.setdefault(row["_ng_task_index"], set()).add(row["_ng_shard_replica"])
    assert all(len(replicas) == 1 for replicas in by_task.values())  # a task's repeats stay together
    assert Counter(replica for (replica,) in by_task.values()) == {"weather#0": 4, "weather#1": 4}


def head_port(deployment: RunningDeployment) -> str:
    return deployment.head_url.rsplit(":", 1)[1]


def collect(deployment: RunningDeployment, workdir: Path, tasks: int, repeats: int) -> list[dict]:
    """`gym collect` of `tasks` weather questions, `repeats` rollouts each, all in flight at once."""
    source = workdir / "rows.jsonl"
    rows = [{"responses_create_params": {"input": f"Weather in city {index}?"}} for index in range(tasks)]
    source.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    output = workdir / "results.jsonl"
    result = subprocess.run(
        gym_command(
            "collect", f"++head_server.port={head_port(deployment)}", "-a", SHARDED_SERVERS[1],
            "-i", str(source), "-o", str(output), "--concurrency", str(tasks * repeats),
            f"+num_repeats={repeats}",
        ),
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return [orjson.loads(line) for line in output.read_bytes().splitlines()]


async def test_a_trainer_runs_rows_through_the_sharded_deployment_from_python(sharded):
    deployment, _, _ = sharded
    agent_ref = {"type": "responses_api_agents", "name": SHARDED_SERVERS[1]}
    rows = [
        {"responses_create_params": {"input": f"Weather in town {index}?"}, "agent_ref": agent_ref}
        for index in range(6)
    ]
    head = BaseServerConfig(host="127.0.0.1", port=int(head_port(deployment)))
    outcomes = [
        await outcome for outcome in RolloutCollectionHelper().run_examples(rows, head_server_config=head)
    ]
    assert sorted(row["responses_create_params"]["input"] for row, _ in outcomes) == sorted(
        row["responses_create_params"]["input"] for row in rows
    )
    assert all(isinstance(result["reward"], float) for _, result in outcomes)
