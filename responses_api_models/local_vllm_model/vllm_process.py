"""The vLLM OpenAI server local_vllm_model runs as its child: the `vllm serve` command line, the start,
the wait until it answers, and its end.

The child gets a process group of its own (vLLM starts engine processes; ending the group ends them too)
and is asked by Linux to stop when this server dies without cleaning up (SIGKILL). Its output is echoed
line by line, the last lines kept for the message that reports a failed start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.config_types import ConfigError
from nemo_gym.launch.child_processes import LineSplitter
from nemo_gym.serving.parent_death import die_with_parent

logger = logging.getLogger("local_vllm_model")

HOST = "127.0.0.1"
# Set by this server, never by vllm_serve_kwargs.
RESERVED_SERVE_KEYS = ("host", "port", "model")
# Variables of the Gym launcher's hand-over to this server; vLLM must not see (or act on) them.
LAUNCHER_ENV_PREFIX = "NEMO_GYM_"
READINESS_POLL_S = 1.0
PROBE_TIMEOUT_S = 5.0
STOP_GRACE_S = 30.0
TAIL_LINES = 8
TAIL_CHARS = 1500
OUTPUT_DRAIN_S = 2.0
READ_CHUNK_BYTES = 64 * 1024


def serve_flags(kwargs: Mapping[str, Any]) -> list[str]:
    """`vllm serve` flags of `vllm_serve_kwargs`: `tensor_parallel_size: 2` is `--tensor-parallel-size 2`,
    `true` the bare flag, `false` its `--no-` form (vLLM's boolean flags take both), a dict its JSON, a
    list one value after another, `null` nothing."""
    flags: list[str] = []
    for key, value in kwargs.items():
        name = key.replace("_", "-")
        if value is None:
            continue
        if value is True:
            flags.append(f"--{name}")
        elif value is False:
            flags.append(f"--no-{name}")
        elif isinstance(value, Mapping):
            flags += [f"--{name}", json.dumps(value)]
        elif isinstance(value, list | tuple):
            flags += [f"--{name}", *(str(item) for item in value)]
        else:
            flags += [f"--{name}", str(value)]
    return flags


def serve_command(program: list[str], model: str, port: int, kwargs: Mapping[str, Any]) -> list[str]:
    return [*program, "serve", model, "--host", HOST, "--port", str(port), *serve_flags(kwargs)]


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without the launcher's hand-over variables, plus `extra`."""
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(LAUNCHER_ENV_PREFIX)}
    return {**inherited, **extra}


def _end_with_this_server() -> None:
    die_with_parent(signal.SIGTERM)


@dataclass
class VLLMChild:
    """A started `vllm serve` and what it has printed lately."""

    process: subprocess.Popen[bytes]
    base_url: str
    owner_pid: int = field(default_factory=os.getpid)
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    ready: bool = False
    stopping: bool = False
    _reader: threading.Thread | None = None

    @classmethod
    def start(cls, command: list[str], env: dict[str, str], port: int) -> VLLMChild:
        try:
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_end_with_this_server,
            )
        except OSError as error:
            raise ConfigError(
                f"vllm_serve_command: cannot run {command[0]!r} ({error.strerror or error}); install vLLM "
                "where this server runs, or point vllm_serve_command at its `vllm` program"
            ) from None
        child = cls(process, f"http://{HOST}:{port}/v1")
        child._reader = threading.Thread(target=child._echo_output, name="vllm-output", daemon=True)
        child._reader.start()
        logger.info("vLLM started (pid %d), serving at %s once ready", process.pid, child.base_url)
        return child

    def _echo_output(self) -> None:
        """Echo the child's output and keep its tail; once it ends, a child that dies while serving stops
        this server too, so the launcher sees the failure instead of every request failing."""
        assert self.process.stdout is not None
        lines = LineSplitter()
        fd = self.process.stdout.fileno()
        while chunk := os.read(fd, READ_CHUNK_BYTES):
            self._show(lines.feed(chunk))
        self._show(lines.flush())
        code = self.process.wait()
        if self.ready and not self.stopping:
            logger.error(
                "vLLM (pid %d) exited with code %s while serving; stopping this server",
                self.process.pid,
                code,
            )
            os.kill(os.getpid(), signal.SIGTERM)

    def _show(self, lines: list[str]) -> None:
        for line in lines:
            self.recent.append(line)
            print(f"[vllm] {line}", file=sys.stderr, flush=True)

    def tail(self) -> str:
        text = " | ".join(line.strip() for line in self.recent if line.strip())
        return text[-TAIL_CHARS:] or "(nothing)"

    def wait_until_ready(self, deadline_s: float) -> None:
        """Return once `GET /v1/models` answers 200; a child that exits first, or a deadline that passes,
        is a one-line ConfigError with the tail of its output (the child is ended first)."""
        deadline = time.monotonic() + deadline_s
        while (remaining := deadline - time.monotonic()) > 0:
            if self.process.poll() is not None:
                self._drain_output()
                raise ConfigError(
                    f"vLLM exited with code {self.process.returncode} before it was ready; its last output: "
                    f"{self.tail()}"
                )
            if self._answers(min(PROBE_TIMEOUT_S, remaining)):
                self.ready = True
                logger.info("vLLM (pid %d) is ready at %s", self.process.pid, self.base_url)
                return
            with contextlib.suppress(subprocess.TimeoutExpired):  # wakes at once when the child exits
                self.process.wait(timeout=min(READINESS_POLL_S, max(deadline - time.monotonic(), 0.0)))
        self.stop()
        raise ConfigError(
            f"vLLM did not answer GET {self.base_url}/models within {deadline_s:g} s (vllm_startup_deadline_s); "
            f"its last output: {self.tail()}"
        )

    def _answers(self, timeout_s: float) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout_s) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError, TimeoutError):
            return False

    def _drain_output(self) -> None:
        if self._reader is not None:
            self._reader.join(OUTPUT_DRAIN_S)

    def stop(self) -> None:
        """End the child's process group: SIGTERM, then SIGKILL after STOP_GRACE_S. Only the process that
        started it does so (forked workers share this object)."""
        if os.getpid() != self.owner_pid:
            return
        self.stopping = True
        pid = self.process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            logger.warning("vLLM (pid %d) still running %g s after SIGTERM; killing it", pid, STOP_GRACE_S)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # whatever of its group is left
        self.process.wait()
        self._drain_output()
        logger.info("vLLM (pid %d) ended", pid)
