"""nemo_gym.cpu_pool: work runs in other processes, errors come back, and a runaway call is stopped."""

import os

import pytest

from nemo_gym import cpu_pool
from tests.cpu_workloads import fail, spin_forever, spin_inside_a_catch_all, square


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


def test_worker_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(cpu_pool.WORKERS_ENV, "3")
    assert cpu_pool.worker_count() == 3
    monkeypatch.setenv(cpu_pool.WORKERS_ENV, "zero")
    with pytest.raises(ValueError, match="NEMO_GYM_CPU_WORKERS='zero'"):
        cpu_pool.worker_count()
