"""A node of the cluster dies in the middle of a collection: its rollouts run again on the other node, and
nothing is lost or duplicated (tests/ray/conftest.py starts the two nodes; this module kills one)."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO_ROOT, gym_command
from tests.ray.conftest import TwoNodeCluster
from tests.ray.test_shards import SHARDED_SERVERS, head_port, sharded_config, sharded_deployment
from tests.upstream_script import ScriptedUpstream, fresh_model

pytestmark = pytest.mark.timeout(300)

TASKS = 6
REPEATS = 2
ROLLOUTS = TASKS * REPEATS
WAIT_S = 120.0


def wait_until(condition, what: str) -> None:
    """Poll a readiness condition (never a fixed clock); fail naming it if it never holds."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)


def replica_states(head_url: str, replicas: set[int]) -> set[str]:
    with urllib.request.urlopen(f"{head_url}/server_instances", timeout=10) as answer:
        return {entry["status"] for entry in orjson.loads(answer.read()) if entry.get("replica") in replicas}


def test_killing_a_node_mid_collection_reruns_its_rollouts_on_the_other_with_nothing_lost_or_duplicated(
    two_node_cluster: TwoNodeCluster, scripted_upstream: ScriptedUpstream, tmp_path: Path
):
    model, gate = fresh_model("failover"), fresh_model("hold")
    # Every model call waits at the gate: all rollouts are in flight, on both nodes, when node b dies.
    scripted_upstream.script(model, [{"gate": gate, "repeat": 10 * ROLLOUTS}])
    config = sharded_config(
        tmp_path, two_node_cluster, scripted_upstream, model, replicas=2, num_cpus=1,
        placement_strategy="STRICT_SPREAD",
    )  # fmt: skip
    with sharded_deployment(config) as (deployment, instances):
        on_node_b = {
            entry["replica"] for entry in instances if entry.get("node_id") == two_node_cluster.node_b.node_id
        }
        assert len(on_node_b) == 1
        source, output = tmp_path / "rows.jsonl", tmp_path / "results.jsonl"
        rows = [{"responses_create_params": {"input": f"Weather in city {index}?"}} for index in range(TASKS)]
        source.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
        collection = subprocess.Popen(
            gym_command(
                "collect", f"++head_server.port={head_port(deployment)}", "-a", SHARDED_SERVERS[1],
                "-i", str(source), "-o", str(output), "--concurrency", str(ROLLOUTS), f"+num_repeats={REPEATS}",
            ),
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            wait_until(lambda: scripted_upstream.gate_waiting(gate) == ROLLOUTS, "every rollout at the model")
            two_node_cluster.kill_node_b()
            # The rollouts node b held come back through node a's replica, and wait at the gate there.
            wait_until(
                lambda: len(scripted_upstream.requests(model)) == ROLLOUTS + ROLLOUTS // 2,
                "node b's rollouts re-dispatched",
            )
            scripted_upstream.open_gate(gate)
            report, _ = collection.communicate(timeout=WAIT_S)
        finally:
            if collection.poll() is None:
                collection.kill()
                collection.wait()
        assert collection.returncode == 0, report
        assert f"{ROLLOUTS // 2} attempt(s) were lost with a shard replica" in report

        results = [orjson.loads(line) for line in output.read_bytes().splitlines()]
        keys = Counter((row["_ng_task_index"], row["_ng_rollout_index"]) for row in results)
        assert keys == Counter({(task, rollout): 1 for task in range(TASKS) for rollout in range(REPEATS)})
        survivor = f"weather#{({0, 1} - on_node_b).pop()}"
        assert {row["_ng_shard_replica"] for row in results} == {survivor}
        lost = [
            orjson.loads(line) for line in (tmp_path / "results_failures.jsonl").read_bytes().splitlines()
        ]
        assert len(lost) == ROLLOUTS // 2
        assert {row["_ng_failure_class"] for row in lost} == {"shard_lost"}
        assert {(row["_ng_task_index"], row["_ng_rollout_index"]) for row in lost} <= set(keys)

        # The launcher learns from Ray that the actor is gone (once the cluster declares node b dead).
        wait_until(
            lambda: replica_states(deployment.head_url, on_node_b) == {"lost"}, "the replica marked lost"
        )
        status = subprocess.run(
            gym_command("env", "status", f"++head_server.port={head_port(deployment)}", "--json"),
            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
        )  # fmt: skip
        listed = orjson.loads(status.stdout)
        lost_replica = {entry["status"] for entry in listed if entry.get("replica") in on_node_b}
        assert status.returncode == 1 and lost_replica == {"lost"}
        assert deployment.process.poll() is None  # one live replica is enough to go on
