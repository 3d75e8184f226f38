"""`cpu_pool_backend: ray` on a real two-node cluster: `run_cpu_bound` spreads its calls over both nodes
and keeps the process backend's contract (results, errors as themselves, deadlines, fallbacks), and a call
past its deadline is cancelled, its worker process killed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.serving import cpu_pool
from tests.cpu_workloads import fail, spin_forever
from tests.helpers import process_alive, wait_until_gone
from tests.ray.conftest import TwoNodeCluster
from tests.ray.workloads import ignore_the_deadline_and_spin, square_and_node

RUNAWAY_DEADLINE_S = 1.0
# Past the caller's wait for a runaway call (its deadline, the grace, the queueing allowance), and the
# time a fresh Ray worker of a loaded machine takes to start.
PID_PUBLISHED_S = cpu_pool.caller_wait_s(RUNAWAY_DEADLINE_S)
WORKER_GONE_S = 30.0
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(two_node_cluster: TwoNodeCluster) -> Iterator[TwoNodeCluster]:
    """This process's calls go to the cluster; it leaves the cluster before the cluster stops."""
    cpu_pool.use_backend("ray", OmegaConf.create({"ray_head_node_address": two_node_cluster.address}))
    try:
        yield two_node_cluster
    finally:
        cpu_pool.shutdown_pool()
        cpu_pool.use_backend("process")


SPREAD_BATCHES = 5


async def test_a_batch_of_calls_spreads_over_both_nodes_with_correct_results(cluster: TwoNodeCluster) -> None:
    """SPREAD is Ray's best effort: a batch that lands while one node's workers are still starting can stay on
    the other, so a few batches are sent (each checked) until both nodes have answered."""
    values = list(range(8))
    nodes: set[str] = set()
    for _ in range(SPREAD_BATCHES):
        results = await asyncio.gather(
            *(cpu_pool.run_cpu_bound(square_and_node, v, timeout_s=60) for v in values)
        )
        assert [square for square, _ in results] == [value * value for value in values]
        nodes |= {node for _, node in results}
        if len(nodes) == 2:
            break
    assert nodes == {cluster.node_a.node_id, cluster.node_b.node_id}


async def test_an_error_in_the_work_reaches_the_caller_as_itself(cluster: TwoNodeCluster) -> None:
    with pytest.raises(ValueError, match="bad answer") as raised:
        await cpu_pool.run_cpu_bound(fail, "bad answer", timeout_s=60)
    assert type(raised.value) is ValueError  # not Ray's wrapper


async def test_the_in_worker_deadline_stops_pure_python_work(cluster: TwoNodeCluster) -> None:
    with pytest.raises(cpu_pool.CPUCallTimeoutError):
        await cpu_pool.run_cpu_bound(spin_forever, timeout_s=0.5)
    assert (await cpu_pool.run_cpu_bound(square_and_node, 4, timeout_s=60))[0] == 16


async def runaway_call_and_its_worker(pid_file: Path, **call_options: object) -> tuple[asyncio.Future, int]:
    """A call that ignores its deadline, started; and the pid of the worker running it, once published."""
    call = asyncio.ensure_future(
        cpu_pool.run_cpu_bound(
            ignore_the_deadline_and_spin, str(pid_file), timeout_s=RUNAWAY_DEADLINE_S, **call_options
        )
    )
    deadline = time.monotonic() + PID_PUBLISHED_S
    while not pid_file.exists():
        assert not call.done(), f"the call ended before its worker published its pid: {call}"
        assert time.monotonic() < deadline, "no worker started the call"
        await asyncio.sleep(0.05)
    return call, int(pid_file.read_text())


async def test_a_call_past_its_deadline_is_cancelled_and_its_worker_killed(
    cluster: TwoNodeCluster, tmp_path: Path
) -> None:
    call, worker = await runaway_call_and_its_worker(tmp_path / "worker.pid")
    assert process_alive(worker)
    with pytest.raises(cpu_pool.CPUCallTimeoutError):
        await call
    assert wait_until_gone([worker], WORKER_GONE_S) == []
    assert (await cpu_pool.run_cpu_bound(square_and_node, 5, timeout_s=60))[0] == 25


async def test_with_on_timeout_a_cancelled_call_answers_its_fallback_noted(
    cluster: TwoNodeCluster, tmp_path: Path
) -> None:
    with cpu_pool.fallbacks_noted() as noted:
        call, worker = await runaway_call_and_its_worker(tmp_path / "worker.pid", on_timeout=0.0)
        assert await call == 0.0
    assert noted == [
        f"tests.ray.workloads.ignore_the_deadline_and_spin exceeded its {RUNAWAY_DEADLINE_S} s deadline"
    ]
    assert wait_until_gone([worker], WORKER_GONE_S) == []
