"""Start, watch and stop every server of a deployment: what `gym run` does.

`nemo_gym.launch.deployment` starts and stops the servers (checked first by `nemo_gym.launch.preflight`, each a child
process of `nemo_gym.launch.child_processes` given its config by `nemo_gym.launch.config_handoff`); this module runs a
deployment under Ctrl-C and SIGTERM, and keeps every name the launcher had importable from here.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from nemo_gym.launch.child_processes import (
    KILL_WAIT_S,
    MAX_LINE_BYTES,
    OUTPUT_DRAIN_S,
    RECENT_LINES_KEPT,
    ChildProcess,
    LineSplitter,
    all_exit_within,
    start_child,
)
from nemo_gym.launch.config_handoff import ConfigHandoff, child_environment
from nemo_gym.launch.deployment import (
    LIVENESS_POLICY,
    READINESS_POLL_S,
    STOP_GRACE_S,
    Deployment,
    DeploymentError,
)
from nemo_gym.launch.preflight import (
    DEFAULT_READINESS_DEADLINE_S,
    check_colocatable,
    check_server_configs,
    check_startable,
    colocation_from,
    implementation_dir,
    readiness_deadline_from,
)
from nemo_gym.launch.server_processes import ServerProcess, SocketReserver
from nemo_gym.text.tables import format_table

__all__ = [
    "DEFAULT_READINESS_DEADLINE_S",
    "KILL_WAIT_S",
    "LIVENESS_POLICY",
    "MAX_LINE_BYTES",
    "OUTPUT_DRAIN_S",
    "READINESS_POLL_S",
    "RECENT_LINES_KEPT",
    "STOP_GRACE_S",
    "STOP_SIGNALS",
    "ChildProcess",
    "ConfigHandoff",
    "Deployment",
    "DeploymentError",
    "LineSplitter",
    "ServerProcess",
    "SocketReserver",
    "all_exit_within",
    "check_colocatable",
    "check_server_configs",
    "check_startable",
    "child_environment",
    "colocation_from",
    "format_table",
    "implementation_dir",
    "readiness_deadline_from",
    "run_until_stopped",
    "start_child",
    "stop_even_if_cancelled",
    "unless_stop_requested",
]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def run_until_stopped(deployment: Deployment, work: Callable[[], Awaitable[int]] | None = None) -> int:
    """Start the deployment, then run `work` (default: serve until told to stop) and return its exit code.

    Ctrl-C / SIGTERM end either phase cleanly (startup or `work` cut short: 128 + the signal number;
    plain serving: 0); a child's death ends it with 1. Every server is stopped in the end, even if this
    coroutine is cancelled.
    """
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, deployment.request_stop, signum)
    try:
        if not await unless_stop_requested(deployment, deployment.start()):
            return deployment.interrupted("while starting")
        if work is None:
            return await deployment.wait()
        return await _supervised(deployment, work())
    finally:
        await stop_even_if_cancelled(deployment)
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        if deployment.interruption is not None:
            print(
                f"Interrupted {deployment.interruption}; every server is stopped.",
                file=sys.stderr,
                flush=True,
            )


async def unless_stop_requested(deployment: Deployment, step: Coroutine[Any, Any, None]) -> bool:
    """Run `step` unless a stop is requested first (then cancel it and return False)."""
    task = asyncio.create_task(step)
    stop = asyncio.create_task(deployment.stop_requested.wait())
    try:
        await asyncio.wait([task, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        cut_short = not task.done()
        if cut_short:
            task.cancel()
            await asyncio.wait([task])
    if cut_short:
        return False
    task.result()
    return True


async def _supervised(deployment: Deployment, work: Awaitable[int]) -> int:
    """`work`'s exit code, unless a stop request or a child's death ends it first."""
    work_task = asyncio.ensure_future(work)
    supervision = asyncio.create_task(deployment.wait())
    try:
        await asyncio.wait([work_task, supervision], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (work_task, supervision):
            if not task.done():
                task.cancel()
        await asyncio.wait([work_task, supervision])
    if not work_task.cancelled():
        return work_task.result()
    if deployment.stop_requested.is_set():
        return deployment.interrupted("while running")
    return supervision.result()


async def stop_even_if_cancelled(deployment: Deployment) -> None:
    """Finish `deployment.stop()` even when the caller is cancelled meanwhile (servers and the config must
    not be left behind), then pass the cancellation on."""
    stopping = asyncio.ensure_future(deployment.stop())
    cancelled = False
    while not stopping.done():
        try:
            await asyncio.shield(stopping)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
