"""A real two-node Ray cluster on this machine, for the scale-out tests (`make test-ray`).

Both nodes are raylets of their own with their own CPUs and a custom resource naming them (`node_a`,
`node_b`), started by `ray.cluster_utils.Cluster` as children of the test process, so a test can kill one
node by pid. Every address stays on 127.0.0.1 (Ray's single-machine mode), the cluster uses token
authentication with a token made here (never the user's ~/.ray), and usage statistics are off.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

NODE_CPUS = 2
RAY_TEST_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray's single-machine mode: every node and the GCS use the loopback address.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "token",
    # One token for the session: Ray reads it once per process, and each module starts a cluster of its own.
    "RAY_AUTH_TOKEN": secrets.token_hex(16),
}


@dataclass
class TwoNodeCluster:
    """The cluster's GCS address, its two nodes (`a` is the head) and the environment its clients need."""

    cluster: Any
    address: str
    node_a: Any
    node_b: Any
    env: dict[str, str]

    def kill_node_b(self) -> None:
        """What a machine's death looks like to the others: every process of node b killed at once."""
        self.cluster.remove_node(self.node_b, allow_graceful=False)


@pytest.fixture(scope="module")
def two_node_cluster() -> Iterator[TwoNodeCluster]:
    env = dict(RAY_TEST_ENV)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # before Ray is imported: it reads some of them once, at import
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": NODE_CPUS, "include_dashboard": False, "resources": {"node_a": 1}},
    )
    try:
        node_b = cluster.add_node(num_cpus=NODE_CPUS, resources={"node_b": 1})
        cluster.wait_for_nodes()
        yield TwoNodeCluster(cluster, cluster.address, cluster.head_node, node_b, env)
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
