"""Run CPU-heavy work (answer parsing, symbolic math, state replay) off a server's event loop.

A verifier that computes on the event loop stalls every other request of its server, health checks
included. `run_cpu_bound(fn, *args, timeout_s=...)` runs `fn` in a bounded pool of worker processes
(`NEMO_GYM_CPU_WORKERS`, default: the number of cores), so the loop keeps answering while the pool is
busy; calls beyond the pool's size queue. Each call has a deadline: inside the worker an interval timer
interrupts pure-Python work that runs too long, and the caller stops waiting shortly after the deadline
in any case, so a verifier never hangs. A verifier that scores a runaway answer with a fixed fallback
passes it as `on_timeout=` instead of catching CPUCallTimeoutError. Such a fallback is not the answer's
score: within `fallbacks_noted()` (every `/verify` runs within it), each one is noted, and the resources
server marks the verify answer as not measured (`mask_sample`, NeMo Gym 0.7).

`fn` and its arguments cross a process boundary: `fn` must be a module-level function and the arguments
picklable. Workers are spawned (fresh interpreters), not forked: forking a process that runs an event
loop and client threads can copy a held lock into the child.

No worker outlives its server: servers stop the pool when they shut down (`shutdown_pool`, which does not
wait for busy workers), and a worker also dies when its server dies without shutting down (SIGKILL).

With `cpu_pool_backend: ray` (applied by each server at start, `use_backend`), the calls run as Ray tasks
spread over the deployment's cluster instead (`nemo_gym.serving.cpu_pool_ray`), under the same contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from nemo_gym.config.defaults import DEFAULT_CPU_POOL_BACKEND, CPUPoolBackend
from nemo_gym.serving.parent_death import die_with_parent
from nemo_gym.telemetry.metrics import cpu_pool_call

if TYPE_CHECKING:  # workers import this module: they load no config machinery
    from omegaconf import DictConfig

logger = logging.getLogger("nemo_gym.cpu_pool")
ResultT = TypeVar("ResultT")
WORKERS_ENV = "NEMO_GYM_CPU_WORKERS"
DEFAULT_TIMEOUT_S = 30.0
CALLER_GRACE_S = 2.0
"""How much longer than the deadline the caller waits for a worker that did not stop itself in time."""
ORPHAN_CHECK_INTERVAL_S = 0.5
WORKER_EXIT_WAIT_S = 5.0

BACKENDS: tuple[CPUPoolBackend, ...] = get_args(CPUPoolBackend)

_pool: ProcessPoolExecutor | None = None
_backend: CPUPoolBackend = DEFAULT_CPU_POOL_BACKEND
_cluster_config: DictConfig | None = None
"""The config whose `ray_head_node_address` the `ray` backend joins on its first call."""
_RAISE: Any = object()
"""`on_timeout` left out: a call past its deadline raises."""


def use_backend(backend: CPUPoolBackend, cluster_config: DictConfig | None = None) -> None:
    """Where this process's calls run from now on: its own worker processes (`process`) or Ray tasks on
    the cluster of `cluster_config` (`ray`), joined on the first call so that choosing costs nothing."""
    global _backend, _cluster_config
    if backend not in BACKENDS:
        raise ValueError(f"unknown CPU pool backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    _backend, _cluster_config = backend, cluster_config


# The fallbacks answered within the current `fallbacks_noted()` block (None outside one).
_noted_fallbacks: ContextVar[list[str] | None] = ContextVar("gym_cpu_fallbacks", default=None)


@contextlib.contextmanager
def fallbacks_noted() -> Iterator[list[str]]:
    """Within the block, each `on_timeout` fallback `run_cpu_bound` answers adds a line to the yielded list."""
    noted: list[str] = []
    token = _noted_fallbacks.set(noted)
    try:
        yield noted
    finally:
        _noted_fallbacks.reset(token)


class CPUCallTimeoutError(TimeoutError):
    """The work did not finish within its deadline."""


def deadline_error(timeout_s: float) -> CPUCallTimeoutError:
    return CPUCallTimeoutError(f"CPU-bound call exceeded its {timeout_s} s deadline")


def caller_wait_s(timeout_s: float) -> float:
    """How long the caller waits for a call's answer: its deadline, the grace for a worker that did not
    stop itself in time, and a few turns of the pool for the time it waits for a free worker (its own
    deadline starts only once a worker picks it up)."""
    return timeout_s + CALLER_GRACE_S + 4 * timeout_s


class _DeadlineInterrupt(BaseException):
    """Raised inside the worker when the timer fires. Not an Exception, so a library's own
    `except Exception` (math-verify has several) cannot swallow it and carry on computing."""


def _deadline_reached(signum: int, frame: Any) -> None:
    raise _DeadlineInterrupt


def _call_with_deadline(fn: Callable[..., ResultT], args: tuple[Any, ...], timeout_s: float) -> ResultT:
    """Runs in the worker process: `fn(*args)` under an interval timer."""
    signal.signal(signal.SIGALRM, _deadline_reached)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        return fn(*args)
    except _DeadlineInterrupt:
        raise deadline_error(timeout_s) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def worker_count() -> int:
    configured = os.environ.get(WORKERS_ENV)
    if configured:
        if not configured.isdigit() or int(configured) < 1:
            raise ValueError(f"{WORKERS_ENV}={configured!r}: expected a positive whole number")
        return int(configured)
    return os.cpu_count() or 1


def _shared_pool() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ProcessPoolExecutor(
            max_workers=worker_count(),
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_end_with_the_server,
            initargs=(os.getpid(),),
        )
    return _pool


def _end_with_the_server(parent_pid: int) -> None:
    """Pool initializer: the worker ends when the server that started it ends, even by SIGKILL (when the
    server's own cleanup never runs). Linux kills it at once; elsewhere a thread notices within a moment."""
    if not die_with_parent(signal.SIGKILL):
        _watch_parent(parent_pid)
    elif os.getppid() != parent_pid:  # the server died before the kernel was asked
        os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    """The portable fallback: a thread that exits this process once its parent is gone (the process is
    then adopted, so its parent pid changes). It cannot run while C code holds the GIL; the Linux way can."""
    threading.Thread(target=_exit_when_orphaned, args=(parent_pid,), daemon=True).start()


def _exit_when_orphaned(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(ORPHAN_CHECK_INTERVAL_S)
    os._exit(1)


async def run_cpu_bound(
    fn: Callable[..., ResultT], *args: Any, timeout_s: float = DEFAULT_TIMEOUT_S, on_timeout: Any = _RAISE
) -> ResultT:
    """`fn(*args)` in the worker pool (or as a Ray task); raises CPUCallTimeoutError past `timeout_s` (plus
    queueing time: the deadline starts when a worker picks the call up).

    With `on_timeout`, a call past its deadline logs one warning and returns `on_timeout` itself instead of
    raising. It is a value, never called: call sites build their fallback (a reward of 0.0, an empty grade)
    from what they already hold, and `None` is a fallback like any other.
    """
    try:
        if _backend == "ray":
            from nemo_gym.serving.cpu_pool_ray import run_as_ray_task

            return await run_as_ray_task(fn, args, timeout_s, _cluster_config)
        future = asyncio.get_running_loop().run_in_executor(
            _shared_pool(), _call_with_deadline, fn, args, timeout_s
        )
        try:
            with cpu_pool_call(worker_count()):
                return await asyncio.wait_for(future, caller_wait_s(timeout_s))
        except TimeoutError as error:
            raise deadline_error(timeout_s) from error
    except CPUCallTimeoutError:
        if on_timeout is _RAISE:
            raise
        what = f"{fn.__module__}.{fn.__qualname__} exceeded its {timeout_s} s deadline"
        logger.warning("%s; answering its on_timeout fallback", what)
        noted = _noted_fallbacks.get()
        if noted is not None:
            noted.append(what)
        return on_timeout


def shutdown_pool() -> None:
    """Kill the workers, busy or not, and release the pool's semaphores (servers call this on shutdown;
    a later call starts a new pool).

    A server stopped by a signal dies right after its shutdown hooks, before exit handlers would clean
    up: the pool must be gone by then, or the workers live on and the resource tracker reports leaked
    semaphores. Workers are killed first: a graceful pool shutdown would wait for every busy call. The
    `ray` backend leaves the cluster it joined, whose raylets then end this process's tasks.
    """
    global _pool
    ray_backend = sys.modules.get("nemo_gym.serving.cpu_pool_ray")  # loaded only if a call ever went to Ray
    if ray_backend is not None:
        ray_backend.leave_cluster()
    pool, _pool = _pool, None
    if pool is None:
        return
    # No public way to reach the workers before Python 3.14 (ProcessPoolExecutor.kill_workers).
    workers = list(pool._processes.values())
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.join(WORKER_EXIT_WAIT_S)
    # With every worker dead, the pool's manager thread sees the pool broken and closes its queues at once.
    pool.shutdown(wait=True, cancel_futures=True)
