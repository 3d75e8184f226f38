"""A deployment's shards on a Ray cluster: each replica placed as a `ShardReplica` actor, watched, stopped.

Each shard gets a placement group of one bundle per replica (its `num_cpus`) under its placement strategy,
so `STRICT_SPREAD` puts every replica on a node of its own. A replica whose actor or node dies is marked
lost and its servers drop out of the deployment's list of live instances; collection stops sending to it
(`nemo_gym.collection.shard_balancer`). The deployment ends only when a shard has no live replica left.

Imported by the launcher only for a config with `shards`, so a single-host deployment never loads Ray.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from nemo_gym.config.server_instances import ServerInstanceConfig
from nemo_gym.config.shards import REPLICA_LOST, REPLICA_UP, ShardSpec
from nemo_gym.launch.shard_replica import ShardReplica

STOP_DEADLINE_S = 15.0


class ShardPlacementError(Exception):
    """A shard could not be placed or started; the message says which and why."""


@dataclass
class PlacedReplica:
    """One replica of a shard: its actor, and once started, its node and its servers' addresses."""

    shard: str
    index: int
    actor: Any
    status: str = "starting"
    node_id: str = ""
    node_ip: str = ""
    pid: int | None = None
    ports: dict[str, int] = field(default_factory=dict)
    start_time: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.shard}#{self.index}"

    def url(self, server: str) -> str:
        return f"http://{self.node_ip}:{self.ports[server]}"


@dataclass(frozen=True)
class ShardedServer:
    """A server instance every replica of its shard hosts: its config and its folder."""

    instance: ServerInstanceConfig
    dir_path: Path

    def spec(self) -> dict[str, str]:
        entrypoint = self.instance.get_inner_run_server_config().entrypoint
        return {"name": self.instance.name, "dir": str(self.dir_path), "entrypoint": entrypoint}


class ShardPlacement:
    """The replicas of every shard of one deployment."""

    def __init__(self, specs: list[ShardSpec], servers: dict[str, ShardedServer], cwd: Path) -> None:
        self.specs = specs
        self.servers = servers
        self.cwd = cwd
        self.replicas: list[PlacedReplica] = []
        self.shard_emptied = asyncio.Event()
        self.emptied_message = ""
        self._groups: list[Any] = []
        self._watchers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def place(
        self,
        config_yaml: str,
        session_secret: str,
        readiness_deadline_s: float,
        on_change: Callable[[], None],
    ) -> None:
        """Place and start every replica; raise ShardPlacementError naming what could not be placed or did
        not come up. `on_change()` is called whenever a replica is lost."""
        replica_actor = ray.remote(ShardReplica)
        for spec in self.specs:
            group = placement_group(
                [{"CPU": spec.num_cpus}] * spec.replicas, strategy=spec.placement_strategy
            )
            self._groups.append(group)
            try:
                await asyncio.wait_for(group.ready(), readiness_deadline_s)
            except TimeoutError:
                raise ShardPlacementError(self._unplaceable(spec, readiness_deadline_s)) from None
            for index in range(spec.replicas):
                actor = replica_actor.options(
                    num_cpus=spec.num_cpus,
                    max_restarts=0,
                    scheduling_strategy=PlacementGroupSchedulingStrategy(
                        placement_group=group, placement_group_bundle_index=index
                    ),
                ).remote(
                    spec.name,
                    index,
                    [self.servers[name].spec() for name in spec.servers],
                    config_yaml,
                    str(self.cwd),
                    session_secret,
                )
                self.replicas.append(PlacedReplica(spec.name, index, actor))
        started = await asyncio.gather(
            *(replica.actor.start.remote(readiness_deadline_s) for replica in self.replicas),
            return_exceptions=True,
        )
        failures = [
            f"{replica.label}: {_reason(outcome)}"
            for replica, outcome in zip(self.replicas, started, strict=True)
            if isinstance(outcome, BaseException)
        ]
        if failures:
            raise ShardPlacementError("shard replica(s) did not start:\n" + "\n".join(failures))
        for replica, info in zip(self.replicas, started, strict=True):
            replica.status = REPLICA_UP
            replica.node_id, replica.node_ip = info["node_id"], info["node_ip"]
            replica.pid, replica.ports = info["pid"], info["ports"]
            replica.start_time = time.time()
            self._watchers.append(asyncio.create_task(self._watch(replica, on_change)))

    def _unplaceable(self, spec: ShardSpec, waited_s: float) -> str:
        alive = [node for node in ray.nodes() if node.get("Alive")]
        cpus = [f"{node['NodeManagerAddress']}: {node['Resources'].get('CPU', 0):g}" for node in alive]
        return (
            f"shard '{spec.name}': the Ray cluster could not place {spec.replicas} replica(s) of "
            f"{spec.num_cpus:g} CPU each with {spec.placement_strategy} within {waited_s:g}s (alive nodes and "
            f"their CPUs: {', '.join(cpus) or 'none'}); lower replicas or num_cpus, choose SPREAD or PACK, or "
            "add nodes"
        )

    async def _watch(self, replica: PlacedReplica, on_change: Callable[[], None]) -> None:
        try:
            code = await replica.actor.wait_for_exit.remote()
            reason = f"its servers exited with code {code}"
        except RayError as error:
            reason = f"its actor or node is gone ({type(error).__name__})"
        if self._stopping:
            return
        replica.status = REPLICA_LOST
        print(
            f"Warning: shard replica {replica.label} on node {replica.node_ip} ({replica.node_id[:12]}) is lost: "
            f"{reason}; its rollouts go to the other replicas.",
            file=sys.stderr,
            flush=True,
        )
        on_change()
        if not self.live_replicas(replica.shard):
            self.emptied_message = f"every replica of shard '{replica.shard}' is lost (last: {reason})"
            self.shard_emptied.set()

    def live_replicas(self, shard: str) -> list[PlacedReplica]:
        return [
            replica for replica in self.replicas if replica.shard == shard and replica.status == REPLICA_UP
        ]

    def describe(self) -> list[dict[str, Any]]:
        """The head server's `/server_instances` entries of every started replica's servers."""
        entries = []
        for replica in self.replicas:
            for name, port in replica.ports.items():
                server = self.servers[name]
                entries.append(
                    {
                        "process_name": name,
                        "config_path": name,
                        "server_type": server.instance.SERVER_TYPE,
                        "name": server.instance.impl_name,
                        "dir_path": str(server.dir_path),
                        "entrypoint": server.spec()["entrypoint"],
                        "host": replica.node_ip,
                        "port": port,
                        "url": replica.url(name),
                        "pid": replica.pid,
                        "start_time": replica.start_time,
                        "status": replica.status,
                        "uptime_seconds": None,
                        "shard": replica.shard,
                        "replica": replica.index,
                        "node_id": replica.node_id,
                        "node_ip": replica.node_ip,
                    }
                )
        return entries

    def first_live_addresses(self) -> dict[str, tuple[str, int]]:
        """Each sharded server's host and port in its shard's first live replica (what a client that does
        not balance over replicas is given)."""
        addresses: dict[str, tuple[str, int]] = {}
        for replica in self.replicas:
            if replica.status == REPLICA_UP:
                for name, port in replica.ports.items():
                    addresses.setdefault(name, (replica.node_ip, port))
        return addresses

    async def stop(self) -> None:
        """Stop every replica's servers, then the actors and their placement groups; never raises."""
        self._stopping = True
        for watcher in self._watchers:
            watcher.cancel()
        live = [replica for replica in self.replicas if replica.status != REPLICA_LOST]
        try:
            await asyncio.wait_for(
                asyncio.gather(*(replica.actor.stop.remote() for replica in live), return_exceptions=True),
                STOP_DEADLINE_S,
            )
        except TimeoutError:
            pass  # ray.kill below ends the actors, and with them their servers
        for replica in self.replicas:
            try:
                ray.kill(replica.actor)
            except RayError:
                pass
        for group in self._groups:
            try:
                remove_placement_group(group)
            except RayError:
                pass


def _reason(error: BaseException) -> str:
    cause = getattr(error, "cause", None)
    return str(cause if cause is not None else error)
