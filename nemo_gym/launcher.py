"""Start, watch and stop every server of a deployment: what `gym run` does.

The launcher reserves each server's listening socket itself and hands it to the child (a free port is
bound at the moment it is chosen, so no other process can take it before the server starts). Every peer
address is therefore known before any child starts, and every child gets the same complete config, as a
private file rather than an environment variable. Children share a random per-deployment session secret,
stop with the launcher even if it is killed, and are supervised: one that dies stops the deployment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig

from nemo_gym.config_types import BaseServerConfig, ConfigError, ServerInstanceConfig
from nemo_gym.global_config import (
    NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME,
    NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME,
    install_root,
    parse_global_config_dict,
    require_server_instances,
    resolve_instance_config,
    to_yaml,
)
from nemo_gym.http_client import RequestFailedError, RetryPolicy, request
from nemo_gym.server_utils import (
    BOUND_ADDRESS_FILE_ENV_VAR_NAME,
    LAUNCHER_PID_ENV_VAR_NAME,
    LISTEN_FD_ENV_VAR_NAME,
    HeadServer,
    RunningServer,
    bind_listening_socket,
    head_server_config_from,
)
from nemo_gym.sessions import SESSION_SECRET_ENV_VAR_NAME, new_session_secret

DEFAULT_READINESS_DEADLINE_S = 120.0
STOP_GRACE_S = 3.0
RECENT_LINES_KEPT = 20
READINESS_POLL_S = 0.05
LIVENESS_POLICY = RetryPolicy(max_attempts=1, deadline_s=5.0, connect_timeout_s=2.0)


class DeploymentError(Exception):
    """The deployment could not start or stopped because a server failed; the message says which."""


@dataclass
class ServerProcess:
    """One server instance: where it runs from, its reserved socket, and its process once started."""

    instance: ServerInstanceConfig
    dir_path: Path
    host: str
    port: int
    sock: socket.socket | None
    process: asyncio.subprocess.Process | None = None
    start_time: float = 0.0
    recent_lines: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_LINES_KEPT))

    @property
    def name(self) -> str:
        return self.instance.name

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def describe(self) -> dict[str, Any]:
        """The `/server_instances` entry of this server (same keys as the reference head server)."""
        inner = self.instance.get_inner_run_server_config()
        return {
            "process_name": self.name,
            "config_path": self.name,
            "server_type": self.instance.SERVER_TYPE,
            "name": self.instance.impl_name,
            "dir_path": str(self.dir_path),
            "entrypoint": inner.entrypoint,
            "host": self.host,
            "port": self.port,
            "url": self.url,
            "pid": self.process.pid if self.process else None,
            "start_time": self.start_time,
            "status": None,
            "uptime_seconds": None,
        }

    def last_lines(self) -> str:
        return "\n".join(f"    {line}" for line in self.recent_lines) or "    (no output)"


class SocketReserver:
    """Binds every port the config parser hands out and keeps the sockets for the children."""

    def __init__(self) -> None:
        self.sockets: dict[tuple[str, int], socket.socket] = {}

    def __call__(self, host: str, port: int) -> bool:
        try:
            self.sockets[(host, port)] = bind_listening_socket(host, port)
        except OSError:
            return False
        return True

    def take(self, host: str, port: int, owner: str) -> socket.socket:
        """The reserved socket of `host:port`, or a newly bound one for a port the user gave."""
        sock = self.sockets.pop((host, port), None)
        if sock is not None:
            return sock
        try:
            return bind_listening_socket(host, port)
        except OSError as error:
            raise ConfigError(
                f"{owner} cannot listen on {host}:{port} ({error.strerror or error}); another process "
                "(maybe another deployment) uses it. Give it another port or leave the port unset."
            ) from error

    def close_all(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()


def implementation_dir(instance: ServerInstanceConfig, cwd: Path) -> Path:
    """`<server_type>/<implementation>/` in the current directory if it is there, else in the install root."""
    relative = Path(instance.SERVER_TYPE) / instance.impl_name
    for root in (cwd, install_root()):
        if (root / relative).is_dir():
            return root / relative
    raise ConfigError(
        f"Server instance '{instance.name}': implementation folder {relative} not found in {cwd} or "
        f"{install_root()}; check the implementation name under {instance.SERVER_TYPE}"
    )


def check_startable(cfg: DictConfig, instances: list[ServerInstanceConfig], cwd: Path) -> None:
    """Fail before anything starts on what a child would only find out once started: a missing folder or
    entrypoint, or a config value it cannot resolve (such as an unset `${policy_api_key}`)."""
    for instance in instances:
        resolve_instance_config(cfg, instance.name)
        folder = implementation_dir(instance, cwd)
        entrypoint = instance.get_inner_run_server_config().entrypoint
        if not (folder / entrypoint).is_file():
            raise ConfigError(
                f"Server instance '{instance.name}': entrypoint {entrypoint} not found in {folder}; "
                "check its `entrypoint` key"
            )


class Deployment:
    """A running deployment: head server plus one child process per server instance.

    Use `start()` (returns once every server answers), then `wait()` (returns the exit code when a stop
    was requested or a child died), and always `stop()`.
    """

    def __init__(
        self,
        overrides: list[str],
        *,
        readiness_deadline_s: float | None = None,
        output: TextIO | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._reserver = SocketReserver()
        self.cwd = cwd or Path.cwd()
        self.global_config_dict: DictConfig = parse_global_config_dict(
            overrides, cwd=self.cwd, port_reserver=self._reserver
        )
        self.instances = require_server_instances(self.global_config_dict)
        check_startable(self.global_config_dict, self.instances, self.cwd)
        self.readiness_deadline_s = readiness_deadline_s or float(
            self.global_config_dict.get("readiness_deadline_s") or DEFAULT_READINESS_DEADLINE_S
        )
        self.output = output or sys.stdout
        self.servers: list[ServerProcess] = []
        self.head_server_config: BaseServerConfig = head_server_config_from(self.global_config_dict)
        self._head: RunningServer | None = None
        self._run_dir: Path | None = None
        self._pumps: list[asyncio.Task] = []
        self.stop_requested = asyncio.Event()
        self._child_exited = asyncio.Event()

    # ---- starting -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the head server and every child, and wait until all answer `GET /` (or fail)."""
        try:
            self._reserve_sockets()
            self._start_head_server()
            self._run_dir = Path(tempfile.mkdtemp(prefix="gym-run-"))
            config_file = self._run_dir / "config.yaml"
            config_file.touch(mode=0o600)
            config_file.write_text(to_yaml(self.global_config_dict, mask=False))
            secret = new_session_secret()
            for server in self.servers:
                await self._spawn(server, config_file, secret)
            await self._wait_until_ready()
        finally:
            self._reserver.close_all()
        self._head_server.server_instances = [server.describe() for server in self.servers]
        self._print_table()

    def _reserve_sockets(self) -> None:
        for instance in self.instances:
            inner = instance.get_inner_run_server_config()
            owner = f"Server instance '{instance.name}'"
            sock = self._reserver.take(inner.host, inner.port, owner)
            self.servers.append(
                ServerProcess(instance, implementation_dir(instance, self.cwd), inner.host, inner.port, sock)
            )

    def _start_head_server(self) -> None:
        head = self.head_server_config
        sock = self._reserver.take(head.host, head.port, "The head server (head_server.port)")
        if head.port == 0:
            head.port = sock.getsockname()[1]
            self.global_config_dict.head_server.port = head.port
        self._head_server = HeadServer(config=head, global_config_dict=self.global_config_dict)
        self._head = RunningServer(self._head_server.setup_webserver(), sock)

    async def _spawn(self, server: ServerProcess, config_file: Path, secret: str) -> None:
        assert server.sock is not None and self._run_dir is not None
        inner = server.instance.get_inner_run_server_config()
        python_path = [str(install_root()), str(server.dir_path), os.environ.get("PYTHONPATH", "")]
        env = {
            **os.environ,
            NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME: str(config_file),
            NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME: server.name,
            SESSION_SECRET_ENV_VAR_NAME: secret,
            LISTEN_FD_ENV_VAR_NAME: str(server.sock.fileno()),
            BOUND_ADDRESS_FILE_ENV_VAR_NAME: str(self._address_file(server)),
            LAUNCHER_PID_ENV_VAR_NAME: str(os.getpid()),
            "PYTHONPATH": os.pathsep.join(filter(None, python_path)),
            "PYTHONUNBUFFERED": "1",
        }
        server.process = await asyncio.create_subprocess_exec(
            sys.executable,
            inner.entrypoint,
            cwd=server.dir_path,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            pass_fds=[server.sock.fileno()],
            start_new_session=True,
        )
        server.start_time = time.time()
        server.sock.close()
        server.sock = None
        self._pumps.append(asyncio.create_task(self._pump_output(server)))

    def _address_file(self, server: ServerProcess) -> Path:
        assert self._run_dir is not None
        return self._run_dir / f"{server.name}.address.json"

    async def _pump_output(self, server: ServerProcess) -> None:
        """Copy the child's output line by line, prefixed with its instance name; notice its exit."""
        assert server.process is not None and server.process.stdout is not None
        while line := await server.process.stdout.readline():
            text = line.decode("utf-8", errors="replace").rstrip("\n")
            server.recent_lines.append(text)
            print(f"({server.name}) {text}", file=self.output, flush=True)
        await server.process.wait()
        self._child_exited.set()

    async def _wait_until_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.readiness_deadline_s
        pending = list(self.servers)
        while pending:
            self._raise_if_a_child_exited("while starting")
            pending = [server for server in pending if not self._address_file(server).exists()]
            if pending and loop.time() >= deadline:
                raise DeploymentError(self._not_ready_message(pending))
            if pending:
                await asyncio.sleep(READINESS_POLL_S)
        for server in self.servers:
            await self._check_liveness(server, deadline)

    async def _check_liveness(self, server: ServerProcess, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._raise_if_a_child_exited("while starting")
            try:
                response = await request("GET", server.url + "/", retry_policy=LIVENESS_POLICY)
                response.release()
                return
            except RequestFailedError:
                if loop.time() >= deadline:
                    raise DeploymentError(self._not_ready_message([server])) from None
                await asyncio.sleep(READINESS_POLL_S)

    def _not_ready_message(self, pending: list[ServerProcess]) -> str:
        parts = [
            f"{len(pending)} server(s) did not come up within {self.readiness_deadline_s:g}s "
            "(raise +readiness_deadline_s=<seconds> if they need longer):"
        ]
        parts += [
            f"  {server.name} ({server.url}), last output:\n{server.last_lines()}" for server in pending
        ]
        return "\n".join(parts)

    def _raise_if_a_child_exited(self, when: str) -> None:
        for server in self.servers:
            if server.process is not None and server.process.returncode is not None:
                raise DeploymentError(
                    f"Server instance '{server.name}' exited with code {server.process.returncode} {when}; "
                    f"last output:\n{server.last_lines()}"
                )

    def _print_table(self) -> None:
        rows = [("INSTANCE", "TYPE", "IMPLEMENTATION", "URL", "PID")]
        head = self.head_server_config
        rows.append(("head_server", "head", "-", f"http://{head.host}:{head.port}", str(os.getpid())))
        for server in self.servers:
            pid = str(server.process.pid) if server.process else "-"
            rows.append(
                (server.name, server.instance.SERVER_TYPE, server.instance.impl_name, server.url, pid)
            )
        print(format_table(rows), file=self.output, flush=True)
        print(f"All {len(self.servers)} server(s) are up. Ctrl-C stops them.", file=self.output, flush=True)

    def server_url(self, instance_name: str) -> str:
        return next(server.url for server in self.servers if server.name == instance_name)

    # ---- running and stopping ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        self.stop_requested.set()

    async def wait(self) -> int:
        """Block until a stop is requested (0) or a child dies (1, after saying which)."""
        stop = asyncio.create_task(self.stop_requested.wait())
        exited = asyncio.create_task(self._child_exited.wait())
        await asyncio.wait([stop, exited], return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        exited.cancel()
        if self.stop_requested.is_set():
            return 0
        await asyncio.sleep(0)  # let the dead child's last output lines be copied first
        try:
            self._raise_if_a_child_exited("while running; stopping the deployment")
        except DeploymentError as error:
            print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1

    async def stop(self) -> None:
        """SIGTERM every child, SIGKILL those still alive after the grace period, then stop the head."""
        running = [s.process for s in self.servers if s.process is not None and s.process.returncode is None]
        for process in running:
            _signal_group(process, signal.SIGTERM)
        if running:
            _, still_running = await asyncio.wait(
                [asyncio.create_task(process.wait()) for process in running], timeout=STOP_GRACE_S
            )
            if still_running:
                for process in running:
                    if process.returncode is None:
                        _signal_group(process, signal.SIGKILL)
                await asyncio.gather(*(process.wait() for process in running))
        for pump in self._pumps:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(pump, timeout=1.0)
        if self._head is not None:
            self._head.stop()
        self._reserver.close_all()
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)


def _signal_group(process: asyncio.subprocess.Process, signum: int) -> None:
    """Signal the child's whole process group (a server's own helpers go too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


async def run_until_stopped(deployment: Deployment, on_ready: Callable[[], Any] | None = None) -> int:
    """Start, then serve until Ctrl-C / SIGTERM (exit 0) or a child's death (exit 1); always stop."""
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, deployment.request_stop)
    try:
        start = asyncio.create_task(deployment.start())
        stop = asyncio.create_task(deployment.stop_requested.wait())
        await asyncio.wait([start, stop], return_when=asyncio.FIRST_COMPLETED)
        if not start.done():
            start.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await start
            return 0
        stop.cancel()
        start.result()
        if on_ready is not None:
            on_ready()
        return await deployment.wait()
    finally:
        await deployment.stop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
