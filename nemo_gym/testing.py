"""Start an environment's server as a real subprocess from a test, and learn the address it bound.

Environment tests talk HTTP to the server exactly as `gym run` starts it: `run_instance(config, name,
workdir)` writes the config to a file, starts `<type>/<implementation>/app.py` with port 0 and yields once
the server reports the port it bound. The server is always stopped afterwards, by its pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

from nemo_gym.global_config import install_root

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
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(install_root()), full_env.get("PYTHONPATH")]))
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


def implementation_folder(server_type: str, implementation: str) -> Path:
    """`<type>/<implementation>` under the current directory if it is there, else under the install root."""
    local = Path.cwd() / server_type / implementation
    return local if local.is_dir() else install_root() / server_type / implementation


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
    app_path = implementation_folder(server_type, implementation) / inner["entrypoint"]
    config_file = workdir / f"config-{instance_name}-{time.monotonic_ns()}.yaml"
    config_file.write_bytes(orjson.dumps(config))  # JSON is YAML
    instance_env = {"NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": instance_name}
    with run_server([str(app_path)], workdir, {**instance_env, **(env or {})}, cwd=app_path.parent) as server:
        yield server
