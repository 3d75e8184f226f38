"""The process that co-hosts several server instances (`gym run` with `colocate: true`).

Each instance is set up exactly as in a process of its own (its folder's entrypoint runs as `__main__`
and calls `run_webserver()`, which validates the config, builds the app and takes the reserved socket),
but hands its app back instead of serving it. Then one event loop serves every socket, and calls between
the co-hosted instances go in-process (`nemo_gym.http.in_process`). With `colocate_num_workers` > 1 the whole
set is forked that many times after setup; a rollout's calls stay inside the worker that took its `/run`.

Started by the launcher as `python -m nemo_gym.launch.colocation`; the servers to host arrive as JSON in
NEMO_GYM_COLOCATED_SERVERS.
"""

from __future__ import annotations

import ast
import os
import runpy
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from nemo_gym.config.deployment import deployment_settings
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import get_global_config_dict
from nemo_gym.config.key_names import NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME
from nemo_gym.config.sources import install_root
from nemo_gym.http.in_process import host_in_process
from nemo_gym.http.protocol import RequestLimits
from nemo_gym.launch.child_processes import ChildProcess, start_child
from nemo_gym.launch.config_handoff import ConfigHandoff, child_environment
from nemo_gym.serving.ray_cluster import ray_initialized
from nemo_gym.serving.servers import apply_http_client_settings
from nemo_gym.serving.workers import (
    BOUND_ADDRESS_FILE_ENV_VAR_NAME,
    LISTEN_FD_ENV_VAR_NAME,
    BoundApp,
    collecting_apps,
    serve,
)
from nemo_gym.telemetry import tracing

COLOCATED_SERVERS_ENV_VAR_NAME = "NEMO_GYM_COLOCATED_SERVERS"
COLOCATED_WORKERS_ENV_VAR_NAME = "NEMO_GYM_COLOCATED_WORKERS"


def bare_imported_modules(folder: Path, entrypoint: str) -> set[str]:
    """The folder's own modules and packages that its code imports by bare name (`from grading import`),
    the only ones two co-hosted servers can clash on; package-qualified imports
    (`from resources_servers.mcqa.grading import`) never clash."""
    local = {path.stem for path in folder.glob("*.py") if path.name != entrypoint}
    local |= {path.parent.name for path in folder.glob("*/__init__.py")}
    imported: set[str] = set()
    for source in folder.glob("*.py"):
        try:
            tree = ast.parse(source.read_bytes(), filename=str(source))
        except (SyntaxError, ValueError):
            continue  # the server itself will report it when it starts
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    return local & imported


def check_module_names(servers: list[tuple[str, Path, str]]) -> None:
    """One process has one `sys.modules`: two servers (instance, folder, entrypoint) each importing, say,
    its own `grading.py` by bare name would share the first one loaded. Refuse that instead of grading
    with the wrong module."""
    owners: dict[str, tuple[str, Path]] = {}
    for instance_name, folder, entrypoint in servers:
        for name in sorted(bare_imported_modules(folder, entrypoint)):
            owner, owner_folder = owners.setdefault(name, (instance_name, folder))
            if owner_folder != folder:  # two instances of one implementation share its modules, rightly
                raise ConfigError(
                    f"server instances '{owner}' and '{instance_name}' both have a module named '{name}', "
                    "which one process cannot hold twice; set colocate: false or deploy them apart"
                )


def hosted_server_spec(
    name: str, folder: Path, entrypoint: str, sock: socket.socket, address_file: Path
) -> dict[str, str]:
    """How the co-hosting process finds one server: its folder and entrypoint, the inherited socket, and
    the file it reports its bound address to."""
    return {
        "name": name,
        "dir": str(folder),
        "entrypoint": entrypoint,
        "listen_fd": str(sock.fileno()),
        "address_file": str(address_file),
    }


async def start_cohosting_child(
    specs: list[dict[str, str]],
    config: ConfigHandoff,
    cwd: Path,
    num_workers: int,
    extra_env: dict[str, str],
    on_line: Callable[[str], None],
) -> ChildProcess:
    """`python -m nemo_gym.launch.colocation` serving the servers of `specs` on their inherited sockets."""
    env = child_environment(
        specs[0]["name"],
        install_root(),
        config.child_path,
        {
            **extra_env,
            COLOCATED_SERVERS_ENV_VAR_NAME: orjson.dumps(specs).decode(),
            COLOCATED_WORKERS_ENV_VAR_NAME: str(num_workers),
        },
    )
    pass_fds = [int(spec["listen_fd"]) for spec in specs] + list(config.pass_fds)
    return await start_child(["-m", "nemo_gym.launch.colocation"], cwd, env, pass_fds, on_line)


def load_servers(specs: list[dict[str, str]]) -> list[BoundApp]:
    """Run each entrypoint in its own folder and collect the app it builds (the launcher has checked that
    their module names do not clash)."""
    home = Path.cwd()
    with collecting_apps() as collected:
        try:
            for spec in specs:
                os.environ[NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME] = spec["name"]
                os.environ[LISTEN_FD_ENV_VAR_NAME] = spec["listen_fd"]
                os.environ[BOUND_ADDRESS_FILE_ENV_VAR_NAME] = spec["address_file"]
                sys.path.insert(0, spec["dir"])
                os.chdir(spec["dir"])
                before = len(collected)
                runpy.run_path(spec["entrypoint"], run_name="__main__")
                if len(collected) != before + 1:
                    sys.exit(
                        f"Error: server instance '{spec['name']}': {spec['entrypoint']} did not call "
                        "run_webserver() once when run as __main__, so it cannot be co-hosted; set colocate: false"
                    )
        finally:
            os.chdir(home)
    return collected


def main() -> None:
    specs = orjson.loads(os.environ.pop(COLOCATED_SERVERS_ENV_VAR_NAME))
    num_workers = int(os.environ.get(COLOCATED_WORKERS_ENV_VAR_NAME, "1"))
    tracing.start("colocated")  # one provider for every co-hosted server
    bound_apps = load_servers(specs)
    if num_workers > 1 and ray_initialized():
        sys.exit(
            "Error: a co-hosted server declares ray_enabled, and its connection to Ray cannot be shared by "
            "forked workers; set colocate_num_workers: 1"
        )
    # Every instance configured the pooled client for itself; the pool is shared by the workers.
    settings = deployment_settings(get_global_config_dict())
    apply_http_client_settings(settings.http_client, num_workers)
    for bound in bound_apps:
        host_in_process(bound.instance_name, bound.app, *bound.address)
    serve(bound_apps, RequestLimits.of(settings.knobs), num_workers)


if __name__ == "__main__":
    main()
