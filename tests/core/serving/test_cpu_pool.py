"""nemo_gym.serving.cpu_pool: work runs in other processes, errors come back, a runaway call is stopped, and no
worker outlives the pool or its parent."""

import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import pytest

from nemo_gym.serving import cpu_pool
from tests.cpu_workloads import fail, spin_forever, spin_inside_a_catch_all, square
from tests.helpers import REPO_ROOT, cpu_seconds, process_alive, wait_until_gone


@pytest.fixture(autouse=True)
def fresh_pool():
    yield
    cpu_pool.shutdown_pool()


async def test_work_runs_in_a_worker_process_and_returns_its_result():
    results = [await cpu_pool.run_cpu_bound(square, value, timeout_s=30) for value in range(3)]
    assert [result for result, _ in results] == [0, 1, 4]
    assert all(pid != os.getpid() for _, pid in results)


async def test_an_error_in_the_work_reaches_the_caller():
    with pytest.raises(ValueError, match="bad answer"):
        await cpu_pool.run_cpu_bound(fail, "bad answer", timeout_s=30)


async def test_a_runaway_call_is_stopped_at_its_deadline_and_the_pool_still_works():
    with pytest.raises(cpu_pool.CPUCallTimeoutError):
        await cpu_pool.run_cpu_bound(spin_forever, timeout_s=0.3)
    assert (await cpu_pool.run_cpu_bound(square, 7, timeout_s=30))[0] == 49


async def test_a_library_catching_every_exception_cannot_swallow_the_deadline():
    with pytest.raises(cpu_pool.CPUCallTimeoutError):
        await cpu_pool.run_cpu_bound(spin_inside_a_catch_all, timeout_s=0.3)


async def test_with_on_timeout_a_runaway_call_answers_the_fallback_and_logs_one_warning(caplog):
    with caplog.at_level("WARNING", logger="nemo_gym.cpu_pool"):
        answer = await cpu_pool.run_cpu_bound(spin_forever, timeout_s=0.3, on_timeout=None)
    assert answer is None
    (warning,) = caplog.records
    assert "tests.cpu_workloads.spin_forever exceeded its 0.3 s deadline" in warning.getMessage()


async def test_on_timeout_is_returned_as_is_and_leaves_other_errors_and_results_alone():
    fallback = [0.0]
    assert await cpu_pool.run_cpu_bound(spin_forever, timeout_s=0.3, on_timeout=fallback) is fallback
    assert (await cpu_pool.run_cpu_bound(square, 3, timeout_s=30, on_timeout=fallback))[0] == 9
    with pytest.raises(ValueError, match="still an error"):
        await cpu_pool.run_cpu_bound(fail, "still an error", timeout_s=30, on_timeout=fallback)


def test_worker_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(cpu_pool.WORKERS_ENV, "3")
    assert cpu_pool.worker_count() == 3
    monkeypatch.setenv(cpu_pool.WORKERS_ENV, "zero")
    with pytest.raises(ValueError, match="NEMO_GYM_CPU_WORKERS='zero'"):
        cpu_pool.worker_count()


async def test_shutting_the_pool_down_kills_a_busy_worker_at_once(monkeypatch):
    monkeypatch.setenv(cpu_pool.WORKERS_ENV, "1")
    _, worker = await cpu_pool.run_cpu_bound(square, 2, timeout_s=30)
    idle_cpu = cpu_seconds(worker)
    busy = asyncio.ensure_future(cpu_pool.run_cpu_bound(spin_forever, timeout_s=60))
    deadline = time.monotonic() + 30
    while cpu_seconds(worker) - idle_cpu < 0.5:
        assert time.monotonic() < deadline, "the worker never got busy"
        await asyncio.sleep(0.05)
    cpu_pool.shutdown_pool()  # it kills the busy worker instead of waiting for it to finish its minute
    assert not process_alive(worker)
    with pytest.raises(BrokenProcessPool):
        await busy


WATCHED_CHILD = (
    "import sys, time\n"
    "from nemo_gym.serving.cpu_pool import _watch_parent\n"
    "print('watching', flush=True)\n"
    "_watch_parent(int(sys.argv[1]))\n"
    "time.sleep(60)\n"
)
PARENT_THAT_DIES = (
    "import os, subprocess, sys\n"
    "child = subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid())])\n"
    "print(child.pid, flush=True)\n"
    "os._exit(0)\n"
)


def test_where_linux_cannot_kill_a_worker_with_its_server_a_watchdog_thread_does():
    """The fallback off Linux, run here directly. The parent exits at once (maybe even before the child
    watches it); the output pipe, which the child shares, ends only when the child exits (the child
    sleeps for longer than `run` waits)."""
    parent = subprocess.run(
        [sys.executable, "-c", PARENT_THAT_DIES, WATCHED_CHILD],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    child, watching = parent.stdout.split()
    assert watching == "watching", parent.stderr
    assert wait_until_gone([int(child)]) == []
