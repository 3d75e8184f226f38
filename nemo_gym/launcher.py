"""Start, watch and stop every server of a deployment: what `gym run` does.

The launcher reserves each server's listening socket itself and hands it to the child (a free port is
bound at the moment it is chosen, so no other process can take it before the server starts). Every peer
address is therefore known before any child starts, and every child gets the same complete config,
through an anonymous in-memory file it inherits rather than an environment variable or a file on disk
(a launcher killed with SIGKILL leaves no secret behind). Children share a random per-deployment session
secret, stop with the launcher even if it is killed, and are supervised: one that dies stops the
deployment. A child's output is read in chunks, so no line, however long, can stall the reader, and its
exit is learnt from the process itself, not from the end of its output.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson
from omegaconf import DictConfig

from nemo_gym.colocation import (
    COLOCATED_SERVERS_ENV_VAR_NAME,
    COLOCATED_WORKERS_ENV_VAR_NAME,
    check_module_names,
)
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
from nemo_gym.http_protocol import RequestLimits
from nemo_gym.server_utils import (
    BOUND_ADDRESS_FILE_ENV_VAR_NAME,
    CHECK_CONFIG_ONLY_ENV_VAR_NAME,
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
KILL_WAIT_S = 5.0
OUTPUT_DRAIN_S = 1.0
RECENT_LINES_KEPT = 20
READINESS_POLL_S = 0.05
MAX_LINE_BYTES = 16 * 1024
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LIVENESS_POLICY = RetryPolicy(max_attempts=1, deadline_s=5.0, connect_timeout_s=2.0)


class DeploymentError(Exception):
    """The deployment could not start or stopped because a server failed; the message says which."""


# ---- reading a child's output and noticing its exit ----------------------------------------------------


class LineSplitter:
    """Cuts a byte stream into text lines. A line longer than `limit` bytes is cut there and marked,
    and the rest of it is dropped, so a single huge line costs neither memory nor the reader's life."""

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._dropping = False

    def feed(self, data: bytes) -> list[str]:
        lines: list[str] = []
        start = 0
        while (end := data.find(b"\n", start)) != -1:
            lines += self._take(data[start:end], line_ends=True)
            start = end + 1
        lines += self._take(data[start:], line_ends=False)
        return lines

    def flush(self) -> list[str]:
        """The unterminated last line, when the stream ends."""
        return self._take(b"", line_ends=True) if self._pending else []

    def _take(self, piece: bytes, line_ends: bool) -> list[str]:
        if self._dropping:
            self._dropping = not line_ends
            return []
        self._pending += piece
        if len(self._pending) > self._limit:
            head = _decoded(self._pending[: self._limit])
            self._pending.clear()
            self._dropping = not line_ends
            return [f"{head} [line truncated: longer than {self._limit} bytes]"]
        if not line_ends:
            return []
        line = _decoded(self._pending)
        self._pending.clear()
        return [line]


def _decoded(raw: bytes | bytearray) -> str:
    return bytes(raw).decode("utf-8", errors="replace").rstrip("\r")


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _ChildProtocol(asyncio.SubprocessProtocol):
    """Receives a child's output as it arrives and learns of its exit from the process itself: the output
    pipe can outlive the child (a helper it started may hold it open), so its end proves nothing."""

    def __init__(self, on_line: Callable[[str], None]) -> None:
        loop = asyncio.get_running_loop()
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()
        self._lines = LineSplitter()
        self._on_line = on_line

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._deliver(self._lines.feed(data))

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._deliver(self._lines.flush())
        _resolve(self.output_closed)

    def process_exited(self) -> None:
        _resolve(self.exited)

    def _deliver(self, lines: list[str]) -> None:
        for line in lines:
            # Whatever goes wrong with one line (a closed stdout, say), the pipe must keep being drained.
            with contextlib.suppress(Exception):
                self._on_line(line)


@dataclass
class ChildProcess:
    """A server process started by the launcher, in a session (and process group) of its own."""

    transport: asyncio.SubprocessTransport
    protocol: _ChildProtocol

    @property
    def pid(self) -> int:
        return self.transport.get_pid()

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode()

    async def wait(self) -> int | None:
        """Return once the process has exited, whether or not its output pipe is closed."""
        await asyncio.shield(self.protocol.exited)
        return self.returncode

    async def exits_within(self, timeout_s: float) -> bool:
        return await _done_within(self.protocol.exited, timeout_s)

    async def output_ends_within(self, timeout_s: float) -> bool:
        return await _done_within(self.protocol.output_closed, timeout_s)

    def signal_group(self, signum: int) -> None:
        """Signal the child's whole process group (a server's own helpers go too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)

    def close(self) -> None:
        """Release the pipe (a helper still holding its other end no longer matters)."""
        self.transport.close()


async def _done_within(future: asyncio.Future[None], timeout_s: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(future), timeout_s)
    return future.done()


async def start_child(
    args: list[str], cwd: Path, env: dict[str, str], pass_fds: list[int], on_line: Callable[[str], None]
) -> ChildProcess:
    """Run `python <args>` in `cwd`, stdout and stderr merged and handed to `on_line` line by line."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _ChildProtocol(on_line),
        sys.executable,
        *args,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        pass_fds=pass_fds,
        start_new_session=True,
    )
    return ChildProcess(transport, protocol)


async def all_exit_within(children: list[ChildProcess], timeout_s: float) -> bool:
    results = await asyncio.gather(*(child.exits_within(timeout_s) for child in children))
    return all(results)


# ---- handing the config over ---------------------------------------------------------------------------


class ConfigHandoff:
    """The merged config, unmasked, for children to read once when they start.

    On Linux it lives in an anonymous in-memory file (memfd) that each child inherits as a file descriptor
    and opens as `/proc/self/fd/<n>`: nothing is written to disk, so a launcher killed by SIGKILL leaves no
    secret behind, and the memory is freed when the last child exits. Elsewhere it is a private file in a
    private folder, removed by `close()` (called as soon as every child has read it).
    """

    def __init__(self, text: str) -> None:
        self._fd: int | None = None
        self._folder: Path | None = None
        data = text.encode()
        if hasattr(os, "memfd_create"):
            self._fd = os.memfd_create("gym-config")
            _write_all(self._fd, data)
        else:
            self._folder = Path(tempfile.mkdtemp(prefix="gym-config-"))
            descriptor = os.open(self._folder / "config.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_all(descriptor, data)
            finally:
                os.close(descriptor)

    @property
    def child_path(self) -> str:
        """What a child puts in NEMO_GYM_CONFIG_FILE to read the config."""
        if self._fd is not None:
            return f"/proc/self/fd/{self._fd}"
        assert self._folder is not None
        return str(self._folder / "config.yaml")

    @property
    def pass_fds(self) -> list[int]:
        return [self._fd] if self._fd is not None else []

    def close(self) -> None:
        """Forget the config here; children that inherited the memfd keep their own reference."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def child_environment(
    instance_name: str, dir_path: Path, config_path: str, extra: dict[str, str]
) -> dict[str, str]:
    """The environment of a server child: where its config is and which instance it is, never the config."""
    python_path = [str(install_root()), str(dir_path), os.environ.get("PYTHONPATH", "")]
    env = {key: value for key, value in os.environ.items() if key != CHECK_CONFIG_ONLY_ENV_VAR_NAME}
    return {
        **env,
        NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME: config_path,
        NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME: instance_name,
        LAUNCHER_PID_ENV_VAR_NAME: str(os.getpid()),
        "PYTHONPATH": os.pathsep.join(filter(None, python_path)),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


# ---- the servers and what is checked before they start --------------------------------------------------


@dataclass
class ServerProcess:
    """One server instance: where it runs from, its reserved socket, and its process once started."""

    instance: ServerInstanceConfig
    dir_path: Path
    host: str
    port: int
    sock: socket.socket | None
    process: ChildProcess | None = None
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

    def take(self, host: str, port: int, owner: str, advice: str) -> socket.socket:
        """The reserved socket of `host:port`, or a newly bound one for a port the user gave."""
        sock = self.sockets.pop((host, port), None)
        if sock is not None:
            return sock
        try:
            return bind_listening_socket(host, port)
        except OSError as error:
            raise ConfigError(
                f"{owner} cannot listen on {host}:{port} ({error.strerror or error}); another process "
                f"(maybe another deployment) uses it. {advice}"
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
    if colocation_from(cfg) is not None:
        check_colocatable(instances, cwd)
    for instance in instances:
        resolve_instance_config(cfg, instance.name)
        folder = implementation_dir(instance, cwd)
        entrypoint = instance.get_inner_run_server_config().entrypoint
        if not (folder / entrypoint).is_file():
            raise ConfigError(
                f"Server instance '{instance.name}': entrypoint {entrypoint} not found in {folder}; "
                "check its `entrypoint` key"
            )


def check_colocatable(instances: list[ServerInstanceConfig], cwd: Path) -> None:
    """Co-hosted servers share one process: no per-server workers, no clashing module names."""
    for instance in instances:
        workers = instance.get_inner_run_server_config().num_workers
        if workers is not None and workers > 1:
            raise ConfigError(
                f"Server instance '{instance.name}': num_workers has no effect with colocate: true; "
                "use colocate_num_workers for the whole deployment"
            )
    check_module_names(
        [
            (
                instance.name,
                implementation_dir(instance, cwd),
                instance.get_inner_run_server_config().entrypoint,
            )
            for instance in instances
        ]
    )


def colocation_from(cfg: DictConfig) -> int | None:
    """With `colocate: true`, the number of processes that each host every server (`colocate_num_workers`,
    default 1); None when each server gets a process of its own."""
    colocate = cfg.get("colocate", False)
    if not isinstance(colocate, bool):
        raise ConfigError(f"colocate must be true or false, got {colocate!r}")
    workers = cfg.get("colocate_num_workers", 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"colocate_num_workers must be a whole number of processes >= 1, got {workers!r}")
    return workers if colocate else None


def readiness_deadline_from(cfg: DictConfig) -> float:
    """`readiness_deadline_s` as a positive number of seconds (a typo must not become a traceback, and a
    negative deadline would fail every start)."""
    value = cfg.get("readiness_deadline_s")
    if value is None:
        return DEFAULT_READINESS_DEADLINE_S
    seconds: float | None = None
    if not isinstance(value, bool):
        with contextlib.suppress(TypeError, ValueError):
            seconds = float(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"readiness_deadline_s must be a positive number of seconds, got {value!r}")
    return seconds


async def check_server_configs(
    cfg: DictConfig, instances: list[ServerInstanceConfig], cwd: Path, deadline_s: float
) -> None:
    """Let every instance's own server validate its config, as `gym run` would at start, without serving.

    The server classes live in the implementation folders and are not importable from here, so each
    entrypoint runs in check-only mode (it loads and validates its config, sets up, and exits without
    binding). All run in parallel; the first failure in config order is raised as one line.
    """
    handoff = ConfigHandoff(to_yaml(cfg, mask=False))
    try:
        problems = await asyncio.gather(
            *(_check_one_server(instance, cwd, handoff, deadline_s) for instance in instances)
        )
    finally:
        handoff.close()
    for problem in problems:
        if problem is not None:
            raise ConfigError(problem)


async def _check_one_server(
    instance: ServerInstanceConfig, cwd: Path, handoff: ConfigHandoff, deadline_s: float
) -> str | None:
    """None if the server accepts its config, else why not (one line)."""
    folder = implementation_dir(instance, cwd)
    lines: deque[str] = deque(maxlen=RECENT_LINES_KEPT)
    env = child_environment(instance.name, folder, handoff.child_path, {CHECK_CONFIG_ONLY_ENV_VAR_NAME: "1"})
    entrypoint = instance.get_inner_run_server_config().entrypoint
    child = await start_child([entrypoint], folder, env, handoff.pass_fds, lines.append)
    try:
        if not await child.exits_within(deadline_s):
            return (
                f"Server instance '{instance.name}' did not finish checking its config within "
                f"{deadline_s:g}s (does its entrypoint call run_webserver()?)"
            )
        await child.output_ends_within(OUTPUT_DRAIN_S)
    finally:
        if child.returncode is None:
            child.signal_group(signal.SIGKILL)
            await child.exits_within(KILL_WAIT_S)
        child.close()
    if child.returncode == 0:
        return None
    return _check_failure(instance.name, child.returncode, list(lines))


def _check_failure(instance_name: str, returncode: int | None, lines: list[str]) -> str:
    reported = [line for line in lines if line.startswith("Error: ")]
    if reported:
        return reported[-1].removeprefix("Error: ")
    last = next((line.strip() for line in reversed(lines) if line.strip()), "no output")
    return f"Server instance '{instance_name}' failed its config check (exit code {returncode}): {last}"


# ---- the deployment ---------------------------------------------------------------------------------------


class Deployment:
    """A running deployment: head server plus one child process per server instance.

    Use `start()` (returns once every server answers), then `wait()` (returns the exit code when a stop
    was requested or a child died), and always `stop()` (which never raises).
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
        try:
            self.global_config_dict: DictConfig = parse_global_config_dict(
                overrides, cwd=self.cwd, port_reserver=self._reserver
            )
            self.instances = require_server_instances(self.global_config_dict)
            check_startable(self.global_config_dict, self.instances, self.cwd)
            self.colocated_workers = colocation_from(self.global_config_dict)
            self.readiness_deadline_s = readiness_deadline_s or readiness_deadline_from(
                self.global_config_dict
            )
        except BaseException:
            self._reserver.close_all()
            raise
        self.output = output or sys.stdout
        self.servers: list[ServerProcess] = []
        self.head_server_config: BaseServerConfig = head_server_config_from(self.global_config_dict)
        self._head: RunningServer | None = None
        self._run_dir: Path | None = None
        self._config: ConfigHandoff | None = None
        self._watchers: list[asyncio.Task[None]] = []
        self.stop_requested = asyncio.Event()
        self.stop_signal: int = signal.SIGINT
        self.interruption: str | None = None
        self._child_exited = asyncio.Event()

    # ---- starting -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the head server and every child, and wait until all answer `GET /` (or fail)."""
        try:
            self._reserve_sockets()
            self._start_head_server()
            self._run_dir = Path(tempfile.mkdtemp(prefix="gym-run-"))
            self._config = ConfigHandoff(to_yaml(self.global_config_dict, mask=False))
            secret = new_session_secret()
            if self.colocated_workers is not None:
                await self._spawn_colocated(secret, self.colocated_workers)
            else:
                for server in self.servers:
                    await self._spawn(server, secret)
            await self._wait_until_ready()
        finally:
            self._reserver.close_all()
        self._print_table()

    def _reserve_sockets(self) -> None:
        for instance in self.instances:
            inner = instance.get_inner_run_server_config()
            owner = f"Server instance '{instance.name}'"
            advice = "Give it another port, or leave its port unset to get a free one."
            sock = self._reserver.take(inner.host, inner.port, owner, advice)
            self.servers.append(
                ServerProcess(instance, implementation_dir(instance, self.cwd), inner.host, inner.port, sock)
            )

    def _start_head_server(self) -> None:
        head = self.head_server_config
        advice = "Choose another with ++head_server.port=<port>, or ++head_server.port=0 for any free port."
        sock = self._reserver.take(head.host, head.port, "The head server (head_server.port)", advice)
        if head.port == 0:
            head.port = sock.getsockname()[1]
            self.global_config_dict.head_server.port = head.port
        self._head_server = HeadServer(config=head, global_config_dict=self.global_config_dict)
        self._head = RunningServer(
            self._head_server.setup_webserver(), sock, RequestLimits.from_config(self.global_config_dict)
        )

    async def _spawn(self, server: ServerProcess, secret: str) -> None:
        assert server.sock is not None and self._config is not None
        env = child_environment(
            server.name,
            server.dir_path,
            self._config.child_path,
            {
                SESSION_SECRET_ENV_VAR_NAME: secret,
                LISTEN_FD_ENV_VAR_NAME: str(server.sock.fileno()),
                BOUND_ADDRESS_FILE_ENV_VAR_NAME: str(self._address_file(server)),
            },
        )
        entrypoint = server.instance.get_inner_run_server_config().entrypoint
        pass_fds = [server.sock.fileno(), *self._config.pass_fds]
        server.process = await start_child(
            [entrypoint], server.dir_path, env, pass_fds, lambda text: self._copy_line(server, text)
        )
        server.start_time = time.time()
        server.sock.close()
        server.sock = None
        self._watchers.append(asyncio.create_task(self._watch_exit(server.process)))
        self._publish_spawned_servers()

    async def _spawn_colocated(self, secret: str, num_workers: int) -> None:
        """One child hosting every server instance (see `nemo_gym.colocation`)."""
        assert self._config is not None and all(server.sock is not None for server in self.servers)
        specs = [
            {
                "name": server.name,
                "dir": str(server.dir_path),
                "entrypoint": server.instance.get_inner_run_server_config().entrypoint,
                "listen_fd": str(server.sock.fileno()),
                "address_file": str(self._address_file(server)),
            }
            for server in self.servers
        ]
        env = child_environment(
            self.servers[0].name,
            install_root(),
            self._config.child_path,
            {
                SESSION_SECRET_ENV_VAR_NAME: secret,
                COLOCATED_SERVERS_ENV_VAR_NAME: orjson.dumps(specs).decode(),
                COLOCATED_WORKERS_ENV_VAR_NAME: str(num_workers),
            },
        )
        pass_fds = [int(spec["listen_fd"]) for spec in specs] + list(self._config.pass_fds)
        process = await start_child(
            ["-m", "nemo_gym.colocation"], self.cwd, env, pass_fds, self._copy_colocated_line
        )
        started = time.time()
        for server in self.servers:
            server.process = process
            server.start_time = started
            server.sock.close()
            server.sock = None
        self._watchers.append(asyncio.create_task(self._watch_exit(process)))
        self._publish_spawned_servers()

    def _publish_spawned_servers(self) -> None:
        """List every spawned server on the head server's `/server_instances` at once: a server that
        already answers may be looked up while the others are still starting. The list is replaced, not
        changed in place, so the head server's thread never sees a half-built one."""
        self._head_server.server_instances = [
            server.describe() for server in self.servers if server.process is not None
        ]

    def _copy_colocated_line(self, text: str) -> None:
        """A co-hosting child speaks for all its servers: every one keeps the line for error reports."""
        for server in self.servers:
            server.recent_lines.append(text)
        print(f"(colocated) {text}", file=self.output, flush=True)

    def _copy_line(self, server: ServerProcess, text: str) -> None:
        """Keep the line for error reports and print it prefixed with the instance name."""
        server.recent_lines.append(text)
        print(f"({server.name}) {text}", file=self.output, flush=True)

    async def _watch_exit(self, process: ChildProcess) -> None:
        await process.wait()
        self._child_exited.set()

    def _address_file(self, server: ServerProcess) -> Path:
        assert self._run_dir is not None
        return self._run_dir / f"{server.name}.address.json"

    async def _wait_until_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.readiness_deadline_s
        pending = list(self.servers)
        while pending:
            await self._fail_if_a_child_exited("while starting")
            pending = [server for server in pending if not self._address_file(server).exists()]
            if pending and loop.time() >= deadline:
                raise DeploymentError(self._not_ready_message(pending))
            if pending:
                await asyncio.sleep(READINESS_POLL_S)
        # Every child has read the config and reported its address: drop both now, so that not even a
        # launcher killed by SIGKILL leaves anything of the run behind.
        self._forget_config()
        for server in self.servers:
            await self._check_liveness(server, deadline)

    def _forget_config(self) -> None:
        if self._config is not None:
            self._config.close()
            self._config = None
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    async def _check_liveness(self, server: ServerProcess, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._fail_if_a_child_exited("while starting")
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

    async def _fail_if_a_child_exited(self, when: str) -> None:
        """Raise naming a dead child, once its last output lines (which may trail its exit) are in."""
        for server in self.servers:
            if server.process is not None and server.process.returncode is not None:
                await server.process.output_ends_within(OUTPUT_DRAIN_S)
        self._raise_if_a_child_exited(when)

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

    def request_stop(self, signum: int = signal.SIGINT) -> None:
        if not self.stop_requested.is_set():
            self.stop_signal = signum
        self.stop_requested.set()

    def interrupted(self, what: str) -> int:
        """Note that a stop request cut `what` short (said once stopped); the exit code of a process ended
        by that signal."""
        self.interruption = what
        return 128 + self.stop_signal

    async def wait(self) -> int:
        """Block until a stop is requested (0) or a child dies (1, after saying which)."""
        stop = asyncio.create_task(self.stop_requested.wait())
        exited = asyncio.create_task(self._child_exited.wait())
        try:
            await asyncio.wait([stop, exited], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            exited.cancel()
        if self.stop_requested.is_set():
            return 0
        try:
            await self._fail_if_a_child_exited("while running; stopping the deployment")
        except DeploymentError as error:
            print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1

    async def stop(self) -> None:
        """SIGTERM every child, SIGKILL those still alive after the grace period, stop the head server and
        remove the run folder. Never fails: whatever goes wrong stopping the children (even cancellation),
        the cleanup still happens, and an error is only reported."""
        try:
            await self._stop_children()
        except Exception as error:
            print(f"Warning: stopping the servers went wrong ({error!r}).", file=sys.stderr, flush=True)
        finally:
            self._release()

    async def _stop_children(self) -> None:
        children = self._children()
        running = [child for child in children if child.returncode is None]
        for child in running:
            child.signal_group(signal.SIGTERM)
        if not await all_exit_within(running, STOP_GRACE_S):
            for child in running:
                if child.returncode is None:
                    child.signal_group(signal.SIGKILL)
            await all_exit_within(running, KILL_WAIT_S)
        # Let the last lines arrive; a pipe a helper process still holds is simply closed afterwards.
        await asyncio.gather(*(child.output_ends_within(OUTPUT_DRAIN_S) for child in children))

    def _children(self) -> list[ChildProcess]:
        """Each child process once (co-hosted servers share one)."""
        unique = {id(server.process): server.process for server in self.servers if server.process is not None}
        return list(unique.values())

    def _release(self) -> None:
        """Everything `stop()` must do even if stopping the children failed or was cancelled."""
        self._forget_config()
        for watcher in self._watchers:
            watcher.cancel()
        for process in self._children():
            process.close()
        if self._head is not None:
            self._head.stop()
            self._head = None
        self._reserver.close_all()


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )


# ---- running under Ctrl-C / SIGTERM ---------------------------------------------------------------------


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
        if not await _unless_stop_requested(deployment, deployment.start()):
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


async def _unless_stop_requested(deployment: Deployment, step: Coroutine[Any, Any, None]) -> bool:
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
