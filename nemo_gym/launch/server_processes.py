"""A deployment's server instances as the launcher tracks them: the listening socket reserved for each
before anything starts, and the child process serving it once started.

A free port is bound at the moment it is chosen, so no other process can take it before its server
starts, and every peer address is known before any child starts.
"""

from __future__ import annotations

import socket
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.server_instances import ServerInstanceConfig
from nemo_gym.launch.child_processes import RECENT_LINES_KEPT, ChildProcess
from nemo_gym.serving.workers import bind_listening_socket


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
