"""What `gym run` and `gym validate` check before any server starts: implementation folders and
entrypoints, co-hosting constraints, the readiness deadline, and each server's own validation of its config.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from nemo_gym import extra_roots
from nemo_gym.config.discovery import resolve_instance_config
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.masking import to_yaml
from nemo_gym.config.server_instances import ServerInstanceConfig
from nemo_gym.config.server_refs import is_server_ref
from nemo_gym.config.shards import ShardSpec, shard_specs
from nemo_gym.config.sources import install_root
from nemo_gym.launch.child_processes import KILL_WAIT_S, OUTPUT_DRAIN_S, RECENT_LINES_KEPT, start_child
from nemo_gym.launch.colocation import check_module_names
from nemo_gym.launch.config_handoff import ConfigHandoff, child_environment
from nemo_gym.serving.servers import CHECK_CONFIG_ONLY_ENV_VAR_NAME
from nemo_gym.telemetry import tracing

DEFAULT_READINESS_DEADLINE_S = 120.0


def implementation_dir(instance: ServerInstanceConfig, cwd: Path) -> Path:
    """`<server_type>/<implementation>/` in the current directory, else the install root, else an extra root
    (`--search-dir`, `NEMO_GYM_EXTRA_ROOTS`)."""
    relative = Path(instance.SERVER_TYPE) / instance.impl_name
    roots = [cwd, install_root(), *extra_roots()]
    for root in roots:
        if (root / relative).is_dir():
            return root / relative
    raise ConfigError(
        f"Server instance '{instance.name}': implementation folder {relative} not found in "
        f"{', '.join(map(str, roots))}; check the implementation name under {instance.SERVER_TYPE}, or "
        "name its folder's root with --search-dir"
    )


def check_startable(cfg: DictConfig, instances: list[ServerInstanceConfig], cwd: Path) -> None:
    """Fail before anything starts on what a child would only find out once started: a missing folder or
    entrypoint, or a config value it cannot resolve (such as an unset `${policy_api_key}`)."""
    if colocation_from(cfg) is not None:
        check_colocatable(instances, cwd)
    check_shards(cfg, instances, cwd)
    tracing.telemetry_env(cfg)  # a telemetry block it cannot honour
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


def check_shards(cfg: DictConfig, instances: list[ServerInstanceConfig], cwd: Path) -> list[ShardSpec]:
    """The config's shards, each one co-hostable (a replica is one process), and no server referring to a
    server of another shard: a rollout's calls stay inside the replica that took its `/run`."""
    specs = shard_specs(cfg, [instance.name for instance in instances])
    if not specs:
        return specs
    shard_of = {name: spec.name for spec in specs for name in spec.servers}
    by_name = {instance.name: instance for instance in instances}
    for spec in specs:
        check_colocatable([by_name[name] for name in spec.servers], cwd)
    for instance in instances:
        own = shard_of.get(instance.name)
        inner = OmegaConf.to_container(instance.get_inner_run_server_config_dict(), resolve=False)
        for name in referred_servers(inner):
            other = shard_of.get(name)
            if other is not None and other != own:
                where = f"in shard '{own}'" if own else "in no shard"
                raise ConfigError(
                    f"server instance '{instance.name}' ({where}) refers to '{name}' of shard '{other}'; a "
                    f"rollout stays inside one shard replica, so add '{instance.name}' to shard '{other}'"
                )
    return specs


def referred_servers(value: object) -> list[str]:
    """The instance names of every server reference (`{type: ..., name: ...}`) inside a config value."""
    ref = is_server_ref(value)
    if ref is not None:
        return [ref.name]
    if isinstance(value, Mapping):
        return [name for item in value.values() for name in referred_servers(item)]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [name for item in value for name in referred_servers(item)]
    return []


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
