"""One replica of a shard, as a Ray actor on its node: the shard's servers in one co-hosting process there.

The actor binds a free port for each server on its node's address (the one its peers reach it at), hands
the co-hosting process (`nemo_gym.launch.colocation`) a copy of the deployment's config in which those servers
live at those addresses, and reports them back to the launcher. The servers die with the actor, by
SIGKILL: when the actor goes, its node is gone or the launcher stopped it, and nothing may go on there.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

import ray
import yaml
from omegaconf import OmegaConf

from nemo_gym.config.discovery import get_first_server_config_dict
from nemo_gym.config.masking import to_yaml
from nemo_gym.http.client import RequestFailedError, request
from nemo_gym.http.sessions import SESSION_SECRET_ENV_VAR_NAME
from nemo_gym.launch.child_processes import KILL_WAIT_S, RECENT_LINES_KEPT, ChildProcess, all_exit_within
from nemo_gym.launch.colocation import hosted_server_spec, start_cohosting_child
from nemo_gym.launch.config_handoff import ConfigHandoff
from nemo_gym.launch.deployment import LIVENESS_POLICY, READINESS_POLL_S, STOP_GRACE_S
from nemo_gym.serving.workers import LAUNCHER_DEATH_SIGNAL_ENV_VAR_NAME, bind_listening_socket


class ReplicaStartError(RuntimeError):
    """The replica's servers did not come up; the message has their last output lines."""


class ShardReplica:
    """The servers of one shard replica, hosted on the node Ray placed this actor on."""

    def __init__(
        self,
        shard: str,
        index: int,
        servers: list[dict[str, str]],
        config_yaml: str,
        cwd: str,
        session_secret: str,
    ) -> None:
        """`servers`: name, folder and entrypoint of each server; `config_yaml`: the deployment's config."""
        self.label = f"{shard}#{index}"
        self.servers = servers
        self.config_yaml = config_yaml
        self.cwd = Path(cwd)
        self.session_secret = session_secret
        self.process: ChildProcess | None = None
        self.recent_lines: deque[str] = deque(maxlen=RECENT_LINES_KEPT)

    async def start(self, readiness_deadline_s: float) -> dict[str, Any]:
        """Start the servers and return where they listen once every one answers `GET /`."""
        node_ip = ray.util.get_node_ip_address()
        sockets = {spec["name"]: bind_listening_socket(node_ip, 0) for spec in self.servers}
        ports = {name: sock.getsockname()[1] for name, sock in sockets.items()}
        cfg = OmegaConf.create(yaml.safe_load(self.config_yaml))
        for name, port in ports.items():
            inner = get_first_server_config_dict(cfg, name)
            inner.host, inner.port = node_ip, port
        run_dir = Path(tempfile.mkdtemp(prefix="gym-shard-"))
        config = ConfigHandoff(to_yaml(cfg, mask=False))
        try:
            specs = [
                hosted_server_spec(
                    spec["name"], Path(spec["dir"]), spec["entrypoint"], sockets[spec["name"]],
                    run_dir / f"{spec['name']}.address.json",
                )
                for spec in self.servers
            ]  # fmt: skip
            self.process = await start_cohosting_child(
                specs,
                config,
                self.cwd,
                1,
                {
                    SESSION_SECRET_ENV_VAR_NAME: self.session_secret,
                    LAUNCHER_DEATH_SIGNAL_ENV_VAR_NAME: "SIGKILL",
                },
                self._keep_line,
            )
            for sock in sockets.values():
                sock.close()
            await self._wait_until_ready(
                [Path(spec["address_file"]) for spec in specs],
                [f"http://{node_ip}:{port}" for port in ports.values()],
                readiness_deadline_s,
            )
        finally:
            config.close()
            shutil.rmtree(run_dir, ignore_errors=True)
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "node_ip": node_ip,
            "pid": self.process.pid,
            "ports": ports,
        }

    def _keep_line(self, text: str) -> None:
        self.recent_lines.append(text)
        print(f"({self.label}) {text}", flush=True)

    async def _wait_until_ready(self, address_files: list[Path], urls: list[str], deadline_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + deadline_s
        pending_files = list(address_files)
        pending_urls = list(urls)
        while pending_files or pending_urls:
            assert self.process is not None
            if self.process.returncode is not None:
                raise ReplicaStartError(self._failure(f"exited with code {self.process.returncode}"))
            if loop.time() >= deadline:
                raise ReplicaStartError(self._failure(f"did not come up within {deadline_s:g}s"))
            pending_files = [path for path in pending_files if not path.exists()]
            if not pending_files and pending_urls and await self._answers(pending_urls[0]):
                pending_urls.pop(0)
                continue
            await asyncio.sleep(READINESS_POLL_S)

    @staticmethod
    async def _answers(url: str) -> bool:
        try:
            response = await request("GET", url + "/", retry_policy=LIVENESS_POLICY)
        except RequestFailedError:
            return False
        response.release()
        return True

    def _failure(self, what: str) -> str:
        lines = "\n".join(f"    {line}" for line in self.recent_lines) or "    (no output)"
        return f"shard replica {self.label} {what}; last output:\n{lines}"

    async def wait_for_exit(self) -> int | None:
        """The servers' exit code, once their process ends."""
        assert self.process is not None
        return await self.process.wait()

    async def stop(self) -> None:
        """SIGTERM the servers, SIGKILL them after a grace period."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.signal_group(signal.SIGTERM)
        if not await all_exit_within([self.process], STOP_GRACE_S):
            self.process.signal_group(signal.SIGKILL)
            await all_exit_within([self.process], KILL_WAIT_S)
