"""Where shards go when the cluster cannot hold them, and when there is no cluster yet."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO_ROOT, gym_command, running_deployment
from tests.ray.conftest import RAY_TEST_ENV, TwoNodeCluster
from tests.ray.test_shards import SHARDED_SERVERS, sharded_config
from tests.upstream_script import ScriptedUpstream, fresh_model

pytestmark = pytest.mark.timeout(300)


def test_a_shard_the_cluster_cannot_hold_fails_the_start_naming_it_and_leaves_nothing_behind(
    two_node_cluster: TwoNodeCluster, scripted_upstream: ScriptedUpstream, tmp_path: Path
):
    config = sharded_config(
        tmp_path, two_node_cluster, scripted_upstream, fresh_model("unplaceable"), replicas=3, num_cpus=1,
        placement_strategy="STRICT_SPREAD",
    )  # fmt: skip
    result = subprocess.run(
        gym_command("run", f"+config_paths=[{config}]", "++head_server.port=0", "+readiness_deadline_s=20"),
        capture_output=True, text=True, timeout=240, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "shard 'weather': the Ray cluster could not place 3 replica(s) of 1 CPU each with STRICT_SPREAD"
        in result.stderr
    ), result.stderr
    assert "Traceback" not in result.stderr
    # The placement group was removed: the whole cluster's CPUs are free again for the next deployment.
    import ray

    ray.init(address=two_node_cluster.address)
    try:
        assert ray.available_resources().get("CPU") == ray.cluster_resources().get("CPU")
    finally:
        ray.shutdown()


def test_without_a_cluster_address_the_launcher_starts_a_private_one_and_stops_it(
    scripted_upstream: ScriptedUpstream, tmp_path: Path
):
    config = {
        "config_paths": [
            f"{REPO_ROOT}/resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
            f"{REPO_ROOT}/configs/policy_model.yaml",
        ],
        "policy_base_url": scripted_upstream.base_url,
        "policy_api_key": "sk-private",
        "policy_model_name": fresh_model("private"),
        "shards": {"weather": {"servers": SHARDED_SERVERS, "replicas": 1, "num_cpus": 1}},
    }
    (tmp_path / "deployment.yaml").write_text(yaml.safe_dump(config))
    with running_deployment(
        [f"+config_paths=[{tmp_path / 'deployment.yaml'}]"], REPO_ROOT, env=RAY_TEST_ENV
    ) as run:
        table = "\n".join(run.output.lines)
        assert "[weather#0]" in table
    # The root conftest fails the session if the private cluster's processes outlive the launcher.
