"""A running deployment: the head server plus one child process per server instance (or one co-hosting
them all), started with their sockets reserved, waited for until ready, watched, and stopped.

Children share a random per-deployment session secret and stop with the launcher even if it is killed;
one that dies stops the deployment.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig

from nemo_gym.config.deployment import deployment_settings
from nemo_gym.config.discovery import get_first_server_config_dict, require_server_instances
from nemo_gym.config.environment_servers import (
    agents_without_environment_server_deprecation,
    generated_relays,
)
from nemo_gym.config.global_config import (
    GlobalConfigDictParser,
    GlobalConfigDictParserConfig,
    parse_global_config_dict,
)
from nemo_gym.config.masking import to_yaml
from nemo_gym.config.server_instances import BaseServerConfig
from nemo_gym.config.shards import shard_specs
from nemo_gym.http.client import RequestFailedError, RetryPolicy, request
from nemo_gym.http.protocol import RequestLimits
from nemo_gym.http.sessions import SESSION_SECRET_ENV_VAR_NAME, new_session_secret
from nemo_gym.launch.child_processes import (
    KILL_WAIT_S,
    OUTPUT_DRAIN_S,
    ChildProcess,
    all_exit_within,
    start_child,
)
from nemo_gym.launch.colocation import hosted_server_spec, start_cohosting_child
from nemo_gym.launch.config_handoff import ConfigHandoff, child_environment
from nemo_gym.launch.preflight import (
    check_startable,
    colocation_from,
    implementation_dir,
    readiness_deadline_from,
)
from nemo_gym.launch.server_processes import ServerProcess, SocketReserver
from nemo_gym.serving.ray_cluster import deployment_needs_ray, initialize_ray, shutdown_ray
from nemo_gym.serving.servers import HeadServer, RunningServer, head_server_address
from nemo_gym.serving.workers import BOUND_ADDRESS_FILE_ENV_VAR_NAME, LISTEN_FD_ENV_VAR_NAME
from nemo_gym.telemetry import tracing
from nemo_gym.text.tables import format_table

STOP_GRACE_S = 3.0
READINESS_POLL_S = 0.05
LIVENESS_POLICY = RetryPolicy(max_attempts=1, deadline_s=5.0, connect_timeout_s=2.0)


class DeploymentError(Exception):
    """The deployment could not start or stopped because a server failed; the message says which."""


class Deployment:
    """A running deployment: head server plus one child process per server instance.

    Use `start()` (returns once every server answers), then `wait()` (returns the exit code when a stop
    was requested or a child died), and always `stop()` (which never raises).
    """

    def __init__(
        self,
        overrides: list[str] | None = None,
        *,
        parser_config: GlobalConfigDictParserConfig | None = None,
        readiness_deadline_s: float | None = None,
        output: TextIO | None = None,
        cwd: Path | None = None,
    ) -> None:
        """The config comes from command-line `overrides` (`gym env start`) or, for a deployment started
        inside another program (`RunHelper`), from `parser_config`."""
        self._reserver = SocketReserver()
        self.cwd = cwd or Path.cwd()
        try:
            if parser_config is not None:
                parsed = GlobalConfigDictParser().parse(parser_config, port_reserver=self._reserver)
            else:
                parsed = parse_global_config_dict(overrides, cwd=self.cwd, port_reserver=self._reserver)
            self.global_config_dict: DictConfig = parsed
            self.instances = require_server_instances(self.global_config_dict)
            check_startable(self.global_config_dict, self.instances, self.cwd)
            tracing.export_to_environment(self.global_config_dict)  # read by every child it starts
            self.shards = shard_specs(self.global_config_dict, [instance.name for instance in self.instances])
            self.needs_ray = deployment_needs_ray(
                self.global_config_dict,
                [
                    implementation_dir(instance, self.cwd) / instance.get_inner_run_server_config().entrypoint
                    for instance in self.instances
                ],
            )
            self.colocated_workers = colocation_from(self.global_config_dict)
            self.readiness_deadline_s = readiness_deadline_s or readiness_deadline_from(
                self.global_config_dict
            )
        except BaseException:
            self._reserver.close_all()
            raise
        self.output = output or sys.stdout
        self.servers: list[ServerProcess] = []
        self.settings = deployment_settings(self.global_config_dict)  # read once, passed down
        self.head_server_config: BaseServerConfig = head_server_address(self.settings)
        self._head: RunningServer | None = None
        self._run_dir: Path | None = None
        self._config: ConfigHandoff | None = None
        self._watchers: list[asyncio.Task[None]] = []
        self.stop_requested = asyncio.Event()
        self.stop_signal: int = signal.SIGINT
        self.interruption: str | None = None
        self._child_exited = asyncio.Event()
        self._placement: Any = None  # a ShardPlacement once the shards are placed (it imports Ray)

    # ---- starting -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the head server and every child, and wait until all answer `GET /` (or fail)."""
        try:
            self._reserve_sockets()
            self._start_head_server()
            if self.needs_ray:  # before the config is handed over: it then names the cluster to join
                await asyncio.to_thread(initialize_ray, self.global_config_dict)
            self._run_dir = Path(tempfile.mkdtemp(prefix="gym-run-"))
            config_yaml = to_yaml(self.global_config_dict, mask=False)
            self._config = ConfigHandoff(config_yaml)
            secret = new_session_secret()
            if self.servers and self.colocated_workers is not None:
                await self._spawn_colocated(secret, self.colocated_workers)
            else:
                for server in self.servers:
                    await self._spawn(server, secret)
            if self.shards:
                await self._place_shards(config_yaml, secret)
            await self._wait_until_ready()
            self._head_server.ready = True
        finally:
            self._reserver.close_all()
        self.print_server_table()
        relays = generated_relays(self.instances)
        if relays:
            print(agents_without_environment_server_deprecation(relays), file=self.output, flush=True)

    def _reserve_sockets(self) -> None:
        sharded = {name for spec in self.shards for name in spec.servers}
        for instance in self.instances:
            if instance.name in sharded:
                continue  # every replica binds its own ports on its node
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
            self._head_server.setup_webserver(), sock, RequestLimits.of(self.settings.knobs)
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
        """One child hosting every server instance (see `nemo_gym.launch.colocation`)."""
        assert self._config is not None and all(server.sock is not None for server in self.servers)
        specs = [
            hosted_server_spec(
                server.name,
                server.dir_path,
                server.instance.get_inner_run_server_config().entrypoint,
                server.sock,
                self._address_file(server),
            )
            for server in self.servers
        ]
        process = await start_cohosting_child(
            specs,
            self._config,
            self.cwd,
            num_workers,
            {SESSION_SECRET_ENV_VAR_NAME: secret},
            self._copy_colocated_line,
        )
        started = time.time()
        for server in self.servers:
            server.process = process
            server.start_time = started
            server.sock.close()
            server.sock = None
        self._watchers.append(asyncio.create_task(self._watch_exit(process)))
        self._publish_spawned_servers()

    async def _place_shards(self, config_yaml: str, secret: str) -> None:
        """Every replica of every shard started on the Ray cluster (see `nemo_gym.launch.shard_placement`)."""
        from nemo_gym.launch.shard_placement import ShardedServer, ShardPlacement, ShardPlacementError

        by_name = {instance.name: instance for instance in self.instances}
        servers = {
            name: ShardedServer(by_name[name], implementation_dir(by_name[name], self.cwd))
            for spec in self.shards
            for name in spec.servers
        }
        self._placement = ShardPlacement(self.shards, servers, self.cwd)
        started = time.monotonic()
        try:
            await self._placement.place(
                config_yaml, secret, self.readiness_deadline_s, self._replicas_changed
            )
        except ShardPlacementError as error:
            raise DeploymentError(str(error)) from None
        nodes = {replica.node_id for replica in self._placement.replicas}
        print(
            f"Placed {len(self._placement.replicas)} shard replica(s) on {len(nodes)} Ray node(s) in "
            f"{time.monotonic() - started:.1f}s.",
            file=self.output,
            flush=True,
        )
        self._replicas_changed()

    def _replicas_changed(self) -> None:
        """Point the served config's sharded servers at a live replica (for clients that do not balance)
        and republish the instance list."""
        for name, (host, port) in self._placement.first_live_addresses().items():
            inner = get_first_server_config_dict(self.global_config_dict, name)
            inner.host, inner.port = host, port
        self._head_server.publish_config()
        self._publish_spawned_servers()

    def _publish_spawned_servers(self) -> None:
        """List every spawned server on the head server's `/server_instances` at once: a server that
        already answers may be looked up while the others are still starting. The list is replaced, not
        changed in place, so the head server's thread never sees a half-built one."""
        self._head_server.server_instances = [
            server.describe() for server in self.servers if server.process is not None
        ] + (self._placement.describe() if self._placement is not None else [])

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

    def raise_if_not_running(self) -> None:
        """Raise `DeploymentError` naming what stopped, the head server or a server's process; callable from
        any thread (it only reads what the deployment's own thread records)."""
        if self._head is None or not self._head.is_alive():
            raise DeploymentError("The head server is not running")
        self._raise_if_a_child_exited("while running")

    def _raise_if_a_child_exited(self, when: str) -> None:
        for server in self.servers:
            if server.process is not None and server.process.returncode is not None:
                raise DeploymentError(
                    f"Server instance '{server.name}' exited with code {server.process.returncode} {when}; "
                    f"last output:\n{server.last_lines()}"
                )

    def print_server_table(self) -> None:
        rows = [("INSTANCE", "TYPE", "IMPLEMENTATION", "URL", "PID")]
        head = self.head_server_config
        rows.append(("head_server", "head", "-", f"http://{head.host}:{head.port}", str(os.getpid())))
        for server in self.servers:
            pid = str(server.process.pid) if server.process else "-"
            rows.append(
                (server.name, server.instance.SERVER_TYPE, server.instance.impl_name, server.url, pid)
            )
        replicas = self._placement.describe() if self._placement is not None else []
        for entry in replicas:
            rows.append(
                (
                    f"{entry['process_name']}[{entry['shard']}#{entry['replica']}]",
                    entry["server_type"],
                    entry["name"],
                    entry["url"],
                    f"{entry['pid']}@{entry['node_id'][:8]}",
                )
            )
        print(format_table(rows), file=self.output, flush=True)
        count = len(self.servers) + len(replicas)
        print(f"All {count} server(s) are up. Ctrl-C stops them.", file=self.output, flush=True)

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
        waits = [stop, exited]
        if self._placement is not None:
            waits.append(asyncio.create_task(self._placement.shard_emptied.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiting in waits:
                waiting.cancel()
        if self.stop_requested.is_set():
            return 0
        if self._placement is not None and self._placement.shard_emptied.is_set():
            print(
                f"Error: {self._placement.emptied_message}; stopping the deployment",
                file=sys.stderr,
                flush=True,
            )
            return 1
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
            if self._placement is not None:
                await self._placement.stop()
            await self._stop_children()
        except Exception as error:
            print(f"Warning: stopping the servers went wrong ({error!r}).", file=sys.stderr, flush=True)
        finally:
            self._release()
            shutdown_ray()

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
