"""Start real server subprocesses on 127.0.0.1 and learn the address they bound."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import requests

REPO_ROOT = Path(__file__).resolve().parents[1]
STARTUP_DEADLINE_S = 30.0


@dataclass
class StartedServer:
    process: subprocess.Popen
    host: str
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_for_bound_address(process: subprocess.Popen, address_file: Path, log_path: Path) -> dict:
    """Poll for the address file the server writes once its socket is listening (bounded in time)."""
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if address_file.exists():
            return orjson.loads(address_file.read_bytes())
        if process.poll() is not None:
            raise RuntimeError(
                f"server exited with {process.returncode} before binding:\n{log_path.read_text()}"
            )
        time.sleep(0.02)
    raise TimeoutError(f"server did not bind within {STARTUP_DEADLINE_S}s:\n{log_path.read_text()}")


@contextmanager
def run_server(
    args: list[str], workdir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[StartedServer]:
    """Run `python <args>` as a subprocess, yield once it listens, and always stop it (by its pid)."""
    address_file = workdir / f"bound-{time.monotonic_ns()}.json"
    log_path = workdir / f"server-{time.monotonic_ns()}.log"
    full_env = {**os.environ, **(env or {}), "NEMO_GYM_BOUND_ADDRESS_FILE": str(address_file)}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, *args], env=full_env, stdout=log, stderr=subprocess.STDOUT, cwd=cwd
        )
    try:
        address = wait_for_bound_address(process, address_file, log_path)
        yield StartedServer(process, address["host"], address["port"], log_path)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def instance_config(server_type: str, implementation: str, **inner: object) -> dict:
    """The config block of one instance: `{server_type: {implementation: {entrypoint, host, port, ...}}}`.

    `port` defaults to 0: the server binds a free port itself and reports it (see `run_instance`).
    """
    return {server_type: {implementation: {"entrypoint": "app.py", "host": "127.0.0.1", "port": 0, **inner}}}


@contextmanager
def run_instance(
    config: dict, instance_name: str, workdir: Path, env: dict[str, str] | None = None
) -> Iterator[StartedServer]:
    """Start one instance of `config` from its implementation folder's `app.py`, as `gym run` would.

    `config` maps instance names to `instance_config(...)` blocks; peers the instance calls must be in it
    with their real ports. The config is handed over as a file (NEMO_GYM_CONFIG_FILE).
    """
    server_type, implementations = next(iter(config[instance_name].items()))
    implementation, inner = next(iter(implementations.items()))
    app_path = REPO_ROOT / server_type / implementation / inner["entrypoint"]
    config_file = workdir / f"config-{instance_name}-{time.monotonic_ns()}.yaml"
    config_file.write_bytes(orjson.dumps(config))  # JSON is YAML
    instance_env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": instance_name}
    with run_server([str(app_path)], workdir, {**instance_env, **(env or {})}, cwd=app_path.parent) as server:
        yield server


class OutputReader:
    """Collects a process's output lines in a thread, so a test can wait for a line with a timeout."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._seen_up_to = 0
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout_s: float) -> str:
        """The first line containing `text`, looking at lines already read first."""
        for line in self.lines:
            if text in line:
                return line
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return line
        raise AssertionError(f"never printed {text!r}; the output was:\n" + "\n".join(self.lines))


@dataclass
class RunningDeployment:
    """A `gym run` process started by a test, with the instances its head server reports."""

    process: subprocess.Popen
    head_url: str
    instances: dict[str, dict]
    output: OutputReader

    def url(self, instance_name: str) -> str:
        return self.instances[instance_name]["url"]

    def pids(self) -> list[int]:
        return [instance["pid"] for instance in self.instances.values()]

    def wait_for_output(self, text: str, timeout_s: float = STARTUP_DEADLINE_S) -> str:
        return self.output.wait_for(text, timeout_s)


def gym_command(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "gym"), *args]


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


@contextmanager
def running_deployment(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> Iterator[RunningDeployment]:
    """Run `gym run <args>` with the head server on any free port until every server is up; always stop it.

    The head server's address is read from the instance table, so the table must tell the truth."""
    process = subprocess.Popen(
        gym_command("run", *args, "++head_server.port=0"),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = OutputReader(process)
        head_url = output.wait_for("head_server ", STARTUP_DEADLINE_S * 2).split()[3]
        output.wait_for("server(s) are up", STARTUP_DEADLINE_S * 2)
        with urllib.request.urlopen(f"{head_url}/server_instances", timeout=10) as answer:
            instances = {entry["process_name"]: entry for entry in orjson.loads(answer.read())}
        yield RunningDeployment(process, head_url, instances, output)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def service_control(server: StartedServer, method: str, path: str, body: dict | None = None) -> Any:
    """Call a control route (`/_state`, `/_faults`, ...) of a local stand-in service; its JSON answer."""
    response = requests.request(method, server.url + path, json=body, timeout=10)
    response.raise_for_status()
    return response.json()


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The stderr of a CLI run that failed the way users should see failures: one line, no traceback."""
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr.strip()


def files_under(folder: Path) -> set[str]:
    """Every file and folder below `folder`, relative to it."""
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}
