"""Spreading rollouts over the replicas of a sharded deployment, and re-dispatching what a lost one held.

The head server lists every replica's servers (`/server_instances` entries with a `shard`). A row's `/run`
goes to a live replica of its target server: the replica already running rollouts of the same task group
(all repeats of a task stay together), else the one with the fewest rollouts in flight. When a call fails
in a way a dead node explains (a dropped connection, no answer) and the replica then does not answer a
probe, the replica is marked lost: the call fails with `ShardLostError` (typed, retryable), the caller is
told (`on_lost`, so the lost attempt is recorded), and the row runs again on a live replica. Nothing the
lost replica was doing had been written anywhere, so nothing is duplicated.

A replica that dies without closing its connections (a machine that loses power) is noticed through the
head server, which marks it lost once Ray reports its node dead: while rollouts are in flight the head
is polled every `HEALTH_POLL_S`, and calls to a replica it reports lost are cut short and re-dispatched.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson

from nemo_gym.config.server_instances import BaseServerConfig
from nemo_gym.config.shards import REPLICA_LOST
from nemo_gym.http.client import (
    BadResponseError,
    ConnectionFailedError,
    DeadlineExceededError,
    RequestFailedError,
    RetryPolicy,
    checked_json,
    request,
)
from nemo_gym.serving.servers import ServerClient

SHARD_LOST_FAILURE_CLASS = "shard_lost"
# Stamped on a collected result: the shard replica (`<shard>#<index>`) that ran it.
SHARD_REPLICA_KEY = "_ng_shard_replica"
HEALTH_POLL_S = 2.0
HEAD_FETCH_TIMEOUT_S = 10.0
PROBE_POLICY = RetryPolicy(max_attempts=1, deadline_s=3.0, connect_timeout_s=2.0)
HEAD_POLICY = RetryPolicy(max_attempts=1, deadline_s=5.0, connect_timeout_s=2.0)
# What a node's death looks like to a caller; anything else (an HTTP error status) is the rollout's own.
LOSS_SYMPTOMS = (
    ConnectionFailedError,
    BadResponseError,
    DeadlineExceededError,
    aiohttp.ClientConnectionError,
    aiohttp.ClientPayloadError,
    ConnectionError,
    TimeoutError,
)
ResultT = TypeVar("ResultT")


class ShardLostError(ConnectionFailedError):
    """The shard replica running a rollout is gone (its node died, or its servers did): retryable."""

    kind = SHARD_LOST_FAILURE_CLASS


@dataclass(eq=False)
class Replica:
    """One replica of a shard: where each of its servers listens, and what it is running."""

    shard: str
    index: int
    node_id: str
    urls: dict[str, str] = field(default_factory=dict)
    in_flight: int = 0
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def label(self) -> str:
        return f"{self.shard}#{self.index}"


class ShardBalancer:
    """Routes calls to the replicas of sharded servers; one per collection or trainer batch."""

    def __init__(self, head_url: str, instances: list[dict[str, Any]]) -> None:
        self.head_url = head_url
        self.replicas: dict[tuple[str, int], Replica] = {}
        for entry in instances:
            if "shard" not in entry:
                continue
            key = (entry["shard"], entry["replica"])
            replica = self.replicas.setdefault(
                key, Replica(entry["shard"], entry["replica"], entry["node_id"])
            )
            replica.urls[entry["process_name"]] = entry["url"]
            if entry.get("status") == REPLICA_LOST:
                replica.lost.set()
        self._groups: dict[tuple[str, Hashable], tuple[Replica, int]] = {}
        self._in_flight = 0
        self._watcher: asyncio.Task[None] | None = None

    @classmethod
    def for_deployment(cls, head: BaseServerConfig) -> ShardBalancer | None:
        """The balancer of the deployment whose head server is `head`, or None when it has no shards (or
        no head server answers: then there is no replica to balance over either)."""
        head_url = f"http://{head.host}:{head.port}"
        try:
            with urllib.request.urlopen(
                f"{head_url}/server_instances", timeout=HEAD_FETCH_TIMEOUT_S
            ) as answer:
                instances = orjson.loads(answer.read())
        except (OSError, ValueError):
            return None
        if not isinstance(instances, list):
            return None
        balancer = cls(head_url, instances)
        return balancer if balancer.replicas else None

    def serves(self, server: str) -> bool:
        return any(server in replica.urls for replica in self.replicas.values())

    def live_replicas(self, server: str) -> list[Replica]:
        return [r for r in self.replicas.values() if server in r.urls and not r.lost.is_set()]

    def route_to_live(self, server_client: ServerClient) -> None:
        """Point `server_client`'s calls to sharded servers (`/aggregate_metrics`, say) at live replicas."""
        for server in {name for replica in self.replicas.values() for name in replica.urls}:
            live = self.live_replicas(server)
            if live:
                server_client.use_address(server, live[0].urls[server])

    async def dispatch(
        self,
        server: str,
        group: Hashable,
        send: Callable[[str], Awaitable[ResultT]],
        on_lost: Callable[[ShardLostError], None] | None = None,
    ) -> tuple[ResultT, Replica]:
        """`send(base_url)` on the replica for `group`, and that replica; when it is lost meanwhile,
        `on_lost(error)` and again on another live replica. Raises ShardLostError once none is left."""
        while True:
            replica = self._claim(server, group)
            try:
                return await self._send_unless_lost(replica, replica.urls[server], send), replica
            except LOSS_SYMPTOMS as error:
                if not await self._confirm_lost(replica, server):
                    raise
                lost = ShardLostError(
                    "POST", replica.urls[server], None, None, None,
                    f"shard replica {replica.label} (node {replica.node_id[:12]}) is lost ({type(error).__name__})",
                )  # fmt: skip
                if on_lost is not None:
                    on_lost(lost)
            finally:
                self._release(server, group, replica)

    def _claim(self, server: str, group: Hashable) -> Replica:
        key = (server, group)
        held = self._groups.get(key)
        if held is not None and not held[0].lost.is_set():
            replica, count = held
        else:
            live = self.live_replicas(server)
            if not live:
                raise ShardLostError(
                    "POST", server, None, None, None, f"every shard replica of '{server}' is lost"
                )
            replica, count = min(live, key=lambda candidate: candidate.in_flight), 0
        self._groups[key] = (replica, count + 1)
        replica.in_flight += 1
        self._in_flight += 1
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch_head())
        return replica

    def _release(self, server: str, group: Hashable, replica: Replica) -> None:
        replica.in_flight -= 1
        self._in_flight -= 1
        key = (server, group)
        held = self._groups.get(key)
        if held is not None and held[0] is replica:
            if held[1] <= 1:
                del self._groups[key]
            else:
                self._groups[key] = (replica, held[1] - 1)

    @staticmethod
    async def _send_unless_lost(
        replica: Replica, url: str, send: Callable[[str], Awaitable[ResultT]]
    ) -> ResultT:
        """The call, cut short with a ConnectionError if its replica is marked lost meanwhile."""
        if replica.lost.is_set():
            raise ConnectionFailedError("POST", url, None, None, None, "the replica is lost")
        call = asyncio.ensure_future(send(url))
        lost = asyncio.ensure_future(replica.lost.wait())
        try:
            await asyncio.wait([call, lost], return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await call
                raise ConnectionFailedError("POST", url, None, None, None, "the replica is lost")
        return call.result()

    async def _confirm_lost(self, replica: Replica, server: str) -> bool:
        """Whether the replica is gone: already marked, or its server no longer answers `GET /`."""
        if not replica.lost.is_set():
            try:
                response = await request("GET", replica.urls[server] + "/", retry_policy=PROBE_POLICY)
                response.release()
                return False
            except RequestFailedError:
                replica.lost.set()
        return True

    async def _watch_head(self) -> None:
        """While rollouts are in flight, mark the replicas the head server reports lost."""
        while self._in_flight > 0:
            await asyncio.sleep(HEALTH_POLL_S)
            try:
                response = await request("GET", self.head_url + "/server_instances", retry_policy=HEAD_POLICY)
                instances = await checked_json(response)
            except (RequestFailedError, aiohttp.ClientError, ValueError):
                continue  # the head is busy or gone; the calls themselves still notice a dead replica
            for entry in instances if isinstance(instances, list) else []:
                replica = self.replicas.get((entry.get("shard"), entry.get("replica")))
                if replica is not None and entry.get("status") == REPLICA_LOST:
                    replica.lost.set()
