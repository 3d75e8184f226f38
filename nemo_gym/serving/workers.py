"""Serving built apps from a process: listening sockets, uvicorn, forked workers, and what the launcher
expects of a server process (stopping with it, reporting the bound address).

A co-hosting process (`nemo_gym.launch.colocation`) loads several servers inside `collecting_apps()`: each one's
`serve_instance()` then hands its app over instead of serving it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import resource
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import orjson
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from nemo_gym.config.server_instances import BaseServerConfig
from nemo_gym.http.protocol import RequestLimits, StartGate, gym_protocol
from nemo_gym.serving.parent_death import die_with_parent

logger = logging.getLogger("nemo_gym.server")

BOUND_ADDRESS_FILE_ENV_VAR_NAME = "NEMO_GYM_BOUND_ADDRESS_FILE"
LISTEN_FD_ENV_VAR_NAME = "NEMO_GYM_LISTEN_FD"
LAUNCHER_PID_ENV_VAR_NAME = "NEMO_GYM_LAUNCHER_PID"
# The signal a server gets when its launcher dies: SIGTERM (stop gracefully) unless it names another. A shard
# replica's servers get SIGKILL: their launcher's death is their node's, and nothing may finish there.
LAUNCHER_DEATH_SIGNAL_ENV_VAR_NAME = "NEMO_GYM_LAUNCHER_DEATH_SIGNAL"
SERVER_KEEPALIVE_S = 30
TARGET_NOFILE_LIMIT = 65535
# Collections of the young generation every 10,000 allocations instead of 700, full ones 50x rarer: a
# server under load allocates millions of short-lived objects a second.
GC_THRESHOLDS = (10_000, 10, 50)


def bind_listening_socket(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """Bind and listen before serving, so the bound port is known and no other process can take it
    (`reuse_port`: except other sockets of this user that ask for SO_REUSEPORT too, as workers do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(4096)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def listening_socket(instance_name: str, config: BaseServerConfig) -> socket.socket:
    """The socket the launcher reserved for this server (NEMO_GYM_LISTEN_FD), else a newly bound one."""
    inherited_fd = os.environ.pop(LISTEN_FD_ENV_VAR_NAME, None)
    if inherited_fd:
        return socket.socket(fileno=int(inherited_fd))
    try:
        return bind_listening_socket(config.host, config.port)
    except OSError as error:
        sys.exit(
            f"Error: server instance '{instance_name}' cannot listen on {config.host}:{config.port} "
            f"({error.strerror or error}). Choose another port, or leave it unset to get a free one."
        )


def exit_with_the_launcher() -> None:
    """Ask Linux to stop this server when the launcher dies, even by SIGKILL, so no child is orphaned."""
    launcher_pid = os.environ.get(LAUNCHER_PID_ENV_VAR_NAME)
    if not launcher_pid or not sys.platform.startswith("linux"):
        return
    die_with_parent(signal.Signals[os.environ.get(LAUNCHER_DEATH_SIGNAL_ENV_VAR_NAME, "SIGTERM")])
    if os.getppid() != int(launcher_pid):
        sys.exit("Error: the launcher exited before this server started.")


def raise_open_file_limit() -> None:
    """A busy server holds thousands of connections; the usual soft limit of 1024 would refuse them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = TARGET_NOFILE_LIMIT if hard == resource.RLIM_INFINITY else min(TARGET_NOFILE_LIMIT, hard)
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        except (ValueError, OSError) as error:
            logger.warning("could not raise the open-file limit from %d to %d: %s", soft, wanted, error)


def _report_bound_address(sock: socket.socket) -> None:
    """Write `{"host", "port"}` atomically to the file the launcher named, if it named one."""
    target = os.environ.get(BOUND_ADDRESS_FILE_ENV_VAR_NAME)
    if not target:
        return
    host, port = sock.getsockname()[:2]
    temporary = Path(f"{target}.tmp")
    temporary.write_bytes(orjson.dumps({"host": host, "port": port, "pid": os.getpid()}))
    temporary.replace(target)


async def liveness() -> dict[str, str]:
    """`GET /` of every Gym server."""
    return {"status": "ok"}


def answers_liveness(app: FastAPI) -> bool:
    """Whether the app's `GET /` is `liveness` (the protocol may then answer it without the app)."""
    return any(
        getattr(route, "path", None) == "/" and route.endpoint is liveness for route in app.router.routes
    )


@dataclass
class BoundApp:
    """A server instance ready to serve: its app and the socket it listens on."""

    instance_name: str
    app: FastAPI
    sock: socket.socket

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return host, port


_collected_apps: ContextVar[list[BoundApp] | None] = ContextVar("nemo_gym_collected_apps", default=None)


@contextlib.contextmanager
def collecting_apps() -> Iterator[list[BoundApp]]:
    """Within this block `serve_instance()` appends its app to the yielded list instead of serving it,
    so that one process can load several servers and then serve them all."""
    collected: list[BoundApp] = []
    token = _collected_apps.set(collected)
    try:
        yield collected
    finally:
        _collected_apps.reset(token)


def serve_instance(bound: BoundApp, server_label: str, limits: RequestLimits, num_workers: int) -> None:
    """Tell the launcher where this instance listens, then serve it until stopped, or, inside
    `collecting_apps()`, hand it over and return."""
    _report_bound_address(bound.sock)
    logger.info("%s listening on %s:%d", server_label, *bound.address)
    collected = _collected_apps.get()
    if collected is not None:
        collected.append(bound)
        return
    serve([bound], limits, num_workers)


class PortDispatcher:
    """One ASGI app in front of several: each request goes to the app listening on its local port."""

    def __init__(self, bound_apps: list[BoundApp]) -> None:
        self.apps = {bound.address[1]: bound.app for bound in bound_apps}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self.apps[scope["server"][1]](scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with contextlib.AsyncExitStack() as stack:
            try:
                for app in self.apps.values():
                    await stack.enter_async_context(app.router.lifespan_context(app))
            except Exception as error:
                await send({"type": "lifespan.startup.failed", "message": f"{type(error).__name__}: {error}"})
                return
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


def serve(bound_apps: list[BoundApp], limits: RequestLimits, num_workers: int = 1) -> None:
    """Serve the apps on their sockets with uvloop and httptools (blocks).

    With `num_workers` > 1 the process forks that many copies in all, each serving every port on a socket
    of its own (see `_sockets_per_worker`); a copy that dies takes the others down with it, so the
    launcher sees the failure instead of a server quietly running at reduced strength.
    """
    app: ASGIApp = StartGate(bound_apps[0].app if len(bound_apps) == 1 else PortDispatcher(bound_apps))
    sockets = [bound.sock for bound in bound_apps]
    _tune_gc_for_serving()
    if num_workers > 1:
        per_worker = _sockets_per_worker(sockets, num_workers)
        sockets = per_worker[_fork_workers(num_workers - 1)]
        for other in per_worker:
            if other is not sockets:
                for sock in other:
                    sock.close()
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http=gym_protocol(
            limits,
            "+".join(bound.instance_name for bound in bound_apps),
            all(answers_liveness(bound.app) for bound in bound_apps),
        ),
        proxy_headers=False,
        timeout_keep_alive=SERVER_KEEPALIVE_S,
        timeout_graceful_shutdown=5,
        access_log=False,
        log_level="warning",
    )
    uvicorn.Server(config).run(sockets=sockets)


def _tune_gc_for_serving() -> None:
    """Keep what the server built at startup (modules, app, schemas: most of its objects) out of every
    later garbage collection, and collect less often. Full collections otherwise walked them all, several
    times a second under load, each stalling the event loop for 50-150 ms. Done before forking, so workers
    share those pages."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def _sockets_per_worker(sockets: list[socket.socket], num_workers: int) -> list[list[socket.socket]]:
    """For each worker, its own listening socket on each address (SO_REUSEPORT).

    Workers sharing one socket do not share its connections: whichever wakes first accepts a whole burst,
    and a trainer's keep-alive connections then all land on one worker (seen: 32 of 32, the other core
    idle). Separate sockets in one SO_REUSEPORT group get connections spread by the kernel instead. Only
    processes of the same user that ask for SO_REUSEPORT can join the group; a plain bind still fails.
    Without SO_REUSEPORT (not Linux or BSD), the workers share the inherited sockets.
    """
    if not hasattr(socket, "SO_REUSEPORT"):
        return [sockets] * num_workers
    addresses = [sock.getsockname()[:2] for sock in sockets]
    for sock in sockets:
        sock.close()  # the port is free for a moment: rebound at once below, or the server exits naming it
    try:
        return [
            [bind_listening_socket(host, port, reuse_port=True) for host, port in addresses]
            for _ in range(num_workers)
        ]
    except OSError as error:
        sys.exit(f"Error: cannot listen again on {addresses} for the workers ({error.strerror or error})")


def _fork_workers(count: int) -> int:
    """Fork `count` workers; returns this process's worker number (0 for the first, which serves too and
    stops when any worker exits)."""
    parent = os.getpid()
    workers = []
    for number in range(1, count + 1):
        pid = os.fork()
        if pid == 0:
            die_with_parent(signal.SIGTERM)
            if os.getppid() != parent:
                os._exit(1)
            return number
        workers.append(pid)
    for pid in workers:
        # A thread waiting on that one pid, not a SIGCHLD handler: those would also reap the server's other
        # children (a verifier's subprocess, the CPU pool), and the event loop may take SIGCHLD over.
        threading.Thread(target=_stop_when_worker_exits, args=(pid,), daemon=True).start()
    return 0


def _stop_when_worker_exits(pid: int) -> None:
    _, status = os.waitpid(pid, 0)
    asked_to_stop = os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT)
    if not asked_to_stop and os.waitstatus_to_exitcode(status) != 0:
        logger.error("worker %d exited (%d); stopping this server", pid, os.waitstatus_to_exitcode(status))
    os.kill(os.getpid(), signal.SIGTERM)
