"""The `ray` backend of nemo_gym.serving.cpu_pool (`cpu_pool_backend: ray`): each call a Ray task, so the CPU-bound
work of every server spreads over the nodes of the deployment's cluster instead of its own host's cores.

The contract stays the process backend's: the task runs `fn` under the same in-worker deadline, the caller
stops waiting at the same moment and then force-cancels the task (which kills its worker process, however
stuck), and an exception of `fn` reaches the caller as itself, not wrapped in Ray's. Ray is imported and
the cluster joined on the first call, in a thread, so the server's event loop keeps answering meanwhile.

`fn` travels to the worker by reference (module and name), so its module must import there: tasks run
with this process's own import paths (its server folder, the folder's root, the repository) in PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from nemo_gym.serving.cpu_pool import _call_with_deadline, caller_wait_s, deadline_error
from nemo_gym.serving.ray_cluster import initialize_ray, ray_initialized, shutdown_ray

TASK_NUM_CPUS = 1
SCHEDULING_STRATEGY = "SPREAD"
"""Best effort over every node, rather than filling the caller's own node first."""

_join_lock = threading.Lock()
_connected = False
"""This backend has made sure the process is in the cluster (joined it, or found it joined already)."""


async def run_as_ray_task(
    fn: Callable[..., Any], args: tuple[Any, ...], timeout_s: float, cluster_config: DictConfig | None
) -> Any:
    """`fn(*args)` as a Ray task; raises CPUCallTimeoutError once the caller's wait is over (nemo_gym.serving.cpu_pool
    answers the `on_timeout` fallback)."""
    if not (_connected and ray_initialized()):  # never let Ray start a cluster of its own on `.remote()`
        await asyncio.to_thread(_join_cluster, cluster_config)
    import ray

    task = _remote_call(worker_python_path(tuple(sys.path), os.getcwd()))
    ref = task.remote(fn, args, timeout_s)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), caller_wait_s(timeout_s))
    except TimeoutError:
        ray.cancel(ref, force=True)
        raise deadline_error(timeout_s) from None
    except asyncio.CancelledError:  # the caller gave up (its client left): free the CPU too
        ray.cancel(ref, force=True)
        raise
    except ray.exceptions.RayTaskError as error:
        raise error.cause from error  # the remote traceback stays readable in the chain


def _join_cluster(cluster_config: DictConfig | None) -> None:
    global _connected
    with _join_lock:
        initialize_ray(cluster_config)
        _connected = True


@functools.lru_cache(maxsize=8)
def _remote_call(python_path: str) -> Any:
    """`_call_with_deadline` as a Ray remote function whose workers import with `python_path`."""
    import ray

    return ray.remote(
        num_cpus=TASK_NUM_CPUS,
        scheduling_strategy=SCHEDULING_STRATEGY,
        runtime_env={"env_vars": {"PYTHONPATH": python_path}},
    )(_call_with_deadline)


@functools.lru_cache(maxsize=8)
def worker_python_path(import_paths: tuple[str, ...], cwd: str) -> str:
    """This process's own import paths (`import_paths`, its sys.path), without the interpreter's: those the
    worker has already, perhaps elsewhere on its node. An empty entry is the current directory `cwd`."""
    interpreter_dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    own: list[str] = []
    for entry in import_paths:
        path = os.path.abspath(os.path.join(cwd, entry))
        inside_interpreter = any(path == top or path.startswith(top + os.sep) for top in interpreter_dirs)
        if os.path.isdir(path) and not inside_interpreter and path not in own:
            own.append(path)
    return os.pathsep.join(own)


def leave_cluster() -> None:
    """Leave the cluster (servers do so on shutdown, through `cpu_pool.shutdown_pool`), unless the process
    was connected before Gym joined it (a trainer's); a later call joins again."""
    global _connected
    with _join_lock:
        if _connected:
            shutdown_ray()
        _connected = False
        _remote_call.cache_clear()
