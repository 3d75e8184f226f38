"""Shards of a deployment placed as Ray actors on a real two-node cluster (tests/ray/conftest.py)."""

from __future__ import annotations

import subprocess
import urllib.request
from collections import Counter
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import requests

from tests.helpers import REPO_ROOT, RunningDeployment, gym_command, running_deployment, write_config
from tests.ray.conftest import TwoNodeCluster
from tests.upstream_script import ScriptedUpstream, fresh_model

pytestmark = pytest.mark.timeout(300)

SHARDED_SERVERS = ["example_single_tool_call", "example_single_tool_call_simple_agent", "policy_model"]


def sharded_config(workdir: Path, cluster: TwoNodeCluster, upstream: ScriptedUpstream, model: str, **shard) -> Path:
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


def test_strict_spread_replicas_land_on_distinct_nodes_and_each_serves_whole_rollouts(
    two_node_cluster: TwoNodeCluster, scripted_upstream: ScriptedUpstream, tmp_path: Path
):
    model = fresh_model("shards")
    config = sharded_config(
        tmp_path, two_node_cluster, scripted_upstream, model, replicas=2, num_cpus=1,
        placement_strategy="STRICT_SPREAD",
    )  # fmt: skip
    with sharded_deployment(config) as (deployment, instances):
        replicas = [entry for entry in instances if "shard" in entry]
        assert Counter(entry["process_name"] for entry in replicas) == Counter(SHARDED_SERVERS * 2)
        nodes = {entry["replica"]: entry["node_id"] for entry in replicas}
        assert len(set(nodes.values())) == 2  # one replica per node
        assert {entry["host"] for entry in replicas} == {"127.0.0.1"}
        agents = [entry for entry in replicas if entry["process_name"] == SHARDED_SERVERS[1]]
        for agent in agents:
            row = {"responses_create_params": {"input": "What is the weather in Paris?"}}
            answer = requests.post(agent["url"] + "/run", json=row, timeout=60)
            assert answer.status_code == 200, answer.text
            assert "reward" in answer.json()
        assert len(scripted_upstream.requests(model)) >= len(agents)

        status = subprocess.run(
            gym_command("env", "status", f"++head_server.port={deployment.head_url.rsplit(':', 1)[1]}", "--json"),
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
        )  # fmt: skip
        assert status.returncode == 0, status.stdout + status.stderr
        listed = orjson.loads(status.stdout)
        assert {(entry.get("shard"), entry.get("node_id")) for entry in listed if entry.get("shard")} == {
            ("weather", node) for node in nodes.values()
        }
        assert all(entry["status"] == "success" for entry in listed)
