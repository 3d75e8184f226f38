"""What a deployment's shard replicas tell the rest of Gym, without a cluster: the head server's
`/server_instances` entries of each replica's servers, and which replica a client that does not balance is
given once one is lost. Placing and watching replicas on a real Ray cluster is tested by tests/ray/
(`make test-ray`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nemo_gym.config.server_instances import validate_server_instance_config
from nemo_gym.config.shards import REPLICA_LOST, REPLICA_UP, ShardSpec
from nemo_gym.launch.shard_placement import PlacedReplica, ShardedServer, ShardPlacement


def sharded_server(name: str, folder: Path, entrypoint: str = "app.py") -> ShardedServer:
    inner = {"entrypoint": entrypoint, "host": "127.0.0.1", "port": 0, "domain": "other"}
    instance = validate_server_instance_config(name, {"resources_servers": {"counter": inner}})
    return ShardedServer(instance, folder)


def started(shard: str, index: int, node: str, ports: dict[str, int]) -> PlacedReplica:
    """A replica as placing it leaves it: up, on its node, its servers' ports known (no actor here)."""
    return PlacedReplica(shard, index, None, REPLICA_UP, f"id-{node}", node, 100 + index, ports, 1.0 + index)


@pytest.fixture
def placement(tmp_path: Path) -> ShardPlacement:
    """Shard `s` (servers `a` and `b`) on two nodes, and shard `t` (server `c`) on the first."""
    servers = {name: sharded_server(name, tmp_path / name) for name in ("a", "b", "c")}
    specs = [ShardSpec(name="s", servers=("a", "b"), replicas=2), ShardSpec(name="t", servers=("c",))]
    placed = ShardPlacement(specs, servers, tmp_path)
    placed.replicas = [
        started("s", 0, "10.0.0.1", {"a": 8001, "b": 8002}),
        started("s", 1, "10.0.0.2", {"a": 9001, "b": 9002}),
        started("t", 0, "10.0.0.1", {"c": 8003}),
    ]
    return placed


def test_each_replica_lists_each_of_its_servers_at_its_node_address(placement, tmp_path):
    entries = {(entry["process_name"], entry["replica"]): entry for entry in placement.describe()}
    assert sorted(entries) == [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 0)]
    for replica in placement.replicas:
        for name, port in replica.ports.items():
            entry = entries[(name, replica.index)]
            assert entry["url"] == f"http://{replica.node_ip}:{port}" == replica.url(name)
            assert (entry["host"], entry["port"], entry["pid"]) == (replica.node_ip, port, replica.pid)
            assert (entry["shard"], entry["node_id"], entry["status"]) == (
                replica.shard,
                replica.node_id,
                "up",
            )
            assert (entry["server_type"], entry["name"], entry["entrypoint"]) == (
                "resources_servers",
                "counter",
                "app.py",
            )
            assert entry["dir_path"] == str(tmp_path / name)


def test_clients_that_do_not_balance_are_given_the_first_live_replica(placement):
    first, second, other = placement.replicas
    assert placement.first_live_addresses() == {
        "a": (first.node_ip, first.ports["a"]),
        "b": (first.node_ip, first.ports["b"]),
        "c": (other.node_ip, other.ports["c"]),
    }
    first.status = REPLICA_LOST
    assert placement.first_live_addresses() == {
        "a": (second.node_ip, second.ports["a"]),
        "b": (second.node_ip, second.ports["b"]),
        "c": (other.node_ip, other.ports["c"]),
    }


def test_a_lost_replica_stays_listed_as_lost_but_is_not_live(placement):
    first, second, other = placement.replicas
    first.status = REPLICA_LOST
    assert placement.live_replicas("s") == [second]
    assert placement.live_replicas("t") == [other]
    statuses = {(entry["process_name"], entry["replica"]): entry["status"] for entry in placement.describe()}
    assert statuses[("a", 0)] == statuses[("b", 0)] == REPLICA_LOST
    assert statuses[("a", 1)] == REPLICA_UP


def test_a_shard_with_every_replica_lost_gives_its_servers_no_address(placement):
    for replica in placement.replicas[:2]:
        replica.status = REPLICA_LOST
    assert placement.live_replicas("s") == []
    assert set(placement.first_live_addresses()) == {"c"}


def test_a_replica_still_starting_lists_no_server(placement):
    placement.replicas.append(PlacedReplica("s", 2, actor=None))
    assert [entry for entry in placement.describe() if entry["replica"] == 2] == []
    assert len(placement.live_replicas("s")) == 2


def test_a_replica_is_told_each_servers_folder_and_entrypoint(tmp_path):
    server = sharded_server("weather", tmp_path / "weather", entrypoint="main.py")
    assert server.spec() == {"name": "weather", "dir": str(tmp_path / "weather"), "entrypoint": "main.py"}
