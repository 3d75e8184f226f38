"""Spreading rollouts over the replicas of a sharded server (nemo_gym.collection.shard_balancer), with real
calls: replicas are paths of the flaky test server, a dead replica a port nothing listens on."""

from __future__ import annotations

import asyncio
import urllib.request

import orjson
import pytest

from nemo_gym.collection.shard_balancer import ShardBalancer, ShardLostError
from nemo_gym.config.shards import REPLICA_LOST
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.http.client import ConnectionFailedError, RetryPolicy, get_response_json, request
from tests.helpers import StartedServer
from tests.shared_fixtures import closed_port, unique_key

SERVER = "agent"
ONE_TRY = RetryPolicy(max_attempts=1, deadline_s=10.0, connect_timeout_s=2.0)


def replica(index: int, url: str, **extra) -> dict:
    return {
        "shard": "s",
        "replica": index,
        "node_id": f"node-{index}",
        "process_name": SERVER,
        "url": url,
        **extra,
    }


def dead_url() -> str:
    return f"http://127.0.0.1:{closed_port()}"


async def echo(base_url: str) -> dict:
    """One real call to a replica: the flaky server's /echo answers with what it was sent."""
    response = await request("POST", base_url, json={"to": base_url}, retry_policy=ONE_TRY)
    return await get_response_json(response)


async def test_a_tasks_rollouts_stay_on_one_replica_and_a_new_task_takes_the_least_busy(
    flaky_server: StartedServer,
):
    urls = [f"{flaky_server.url}/echo/r{index}" for index in range(2)]
    balancer = ShardBalancer(dead_url(), [replica(index, url) for index, url in enumerate(urls)])
    entered: asyncio.Queue[str] = asyncio.Queue()
    gate = asyncio.Event()

    async def held(base_url: str) -> dict:
        await entered.put(base_url)
        await gate.wait()
        return await echo(base_url)

    calls = []
    for group in ("task-0", "task-1", "task-0"):
        calls.append(asyncio.create_task(balancer.dispatch(SERVER, group, held)))
        await entered.get()  # claimed its replica and is in flight
    gate.set()
    answers = await asyncio.gather(*calls)
    assert [found.label for _, found in answers] == ["s#0", "s#1", "s#0"]
    assert [answer["body"]["to"] for answer, _ in answers] == [urls[0], urls[1], urls[0]]
    assert [found.in_flight for found in balancer.replicas.values()] == [0, 0]


async def test_a_lost_replica_is_reported_and_the_rollout_runs_again_on_a_live_one(
    flaky_server: StartedServer,
):
    live = f"{flaky_server.url}/echo/live"
    balancer = ShardBalancer(dead_url(), [replica(0, dead_url()), replica(1, live)])
    lost: list[ShardLostError] = []
    answer, ran_on = await balancer.dispatch(SERVER, "task-0", echo, lost.append)
    assert (answer["body"]["to"], ran_on.label) == (live, "s#1")
    assert len(lost) == 1 and "shard replica s#0 (node node-0) is lost (ConnectionFailedError)" in str(
        lost[0]
    )
    assert [found.label for found in balancer.live_replicas(SERVER)] == ["s#1"]


async def test_with_every_replica_lost_the_call_fails_as_shard_lost():
    balancer = ShardBalancer(dead_url(), [replica(0, dead_url())])
    lost: list[ShardLostError] = []
    with pytest.raises(ShardLostError, match="every shard replica of 'agent' is lost") as raised:
        await balancer.dispatch(SERVER, "task-0", echo, lost.append)
    assert raised.value.kind == "shard_lost" and len(lost) == 1
    assert balancer.live_replicas(SERVER) == []


async def test_a_dropped_call_on_a_replica_that_still_answers_is_the_calls_own_failure(
    flaky_server: StartedServer,
):
    dropping = f"{flaky_server.url}/drop/{unique_key()}"
    balancer = ShardBalancer(dead_url(), [replica(0, dropping), replica(1, f"{flaky_server.url}/echo/other")])
    lost: list[ShardLostError] = []
    with pytest.raises(ConnectionFailedError) as raised:
        await balancer.dispatch(SERVER, "task-0", echo, lost.append)
    assert not isinstance(raised.value, ShardLostError) and lost == []
    assert [found.label for found in balancer.live_replicas(SERVER)] == ["s#0", "s#1"]


async def test_a_replica_the_head_lists_as_lost_gets_no_rollout(flaky_server: StartedServer):
    live = f"{flaky_server.url}/echo/live"
    balancer = ShardBalancer(
        dead_url(), [replica(0, f"{flaky_server.url}/echo/gone", status=REPLICA_LOST), replica(1, live)]
    )
    assert balancer.serves(SERVER) and not balancer.serves("other")
    lost: list[ShardLostError] = []
    answer, ran_on = await balancer.dispatch(SERVER, "task-0", echo, lost.append)
    assert (answer["body"]["to"], ran_on.label, lost) == (live, "s#1", [])


def test_a_deployment_without_shards_or_without_a_head_has_no_balancer(head_server: StartedServer):
    with urllib.request.urlopen(f"{head_server.url}/server_instances", timeout=10) as answer:
        listed = orjson.loads(answer.read())
    assert listed and not any("shard" in entry for entry in listed), "the head answers, listing no shard"
    assert (
        ShardBalancer.for_deployment(BaseServerConfig(host=head_server.host, port=head_server.port)) is None
    )
    assert ShardBalancer.for_deployment(BaseServerConfig(host="127.0.0.1", port=closed_port())) is None
