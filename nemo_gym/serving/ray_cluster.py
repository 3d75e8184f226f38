"""Joining the deployment's Ray cluster, only in processes that need it.

A single-host deployment never loads Ray: the launcher joins (or starts) a cluster only when the config
has `shards`, `cpu_pool_backend: ray`, or a server whose class declares `ray_enabled = True` (NeMo Gym
0.7's declaration, read from its entrypoint without importing it); a server process joins only when its
class declares it. Whoever joins first without `ray_head_node_address` starts a private local cluster and
writes its address into the config, so every child joins that one; Gym shuts down only a cluster it
started.

Ray reports usage statistics to the internet by default; Gym turns that off unless
RAY_USAGE_STATS_ENABLED is set.
"""

from __future__ import annotations

import ast
import logging
import os
import sys
from pathlib import Path

from omegaconf import DictConfig, open_dict

from nemo_gym.config.key_names import RAY_HEAD_NODE_ADDRESS_KEY_NAME
from nemo_gym.config.settings import top_level_setting
from nemo_gym.config.shards import SHARDS_KEY_NAME, ray_address_from

logger = logging.getLogger("nemo_gym.ray")
CPU_POOL_BACKEND_KEY_NAME = "cpu_pool_backend"
USAGE_STATS_ENV_VAR_NAME = "RAY_USAGE_STATS_ENABLED"
_joined_here = False  # whether initialize_ray connected this process (and shutdown_ray may disconnect it)


def server_uses_ray(server_class: type) -> bool:
    """Whether a server class declares `ray_enabled = True` (undeclared, unlike NeMo Gym 0.7: no Ray)."""
    return getattr(server_class, "ray_enabled", None) is True


def entrypoint_declares_ray(entrypoint: Path) -> bool:
    """Whether a server's entrypoint file has a class body that sets `ray_enabled = True`."""
    try:
        tree = ast.parse(entrypoint.read_bytes(), filename=str(entrypoint))
    except (OSError, SyntaxError, ValueError):
        return False  # the server itself reports it when it starts
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for statement in node.body:
            targets = (
                statement.targets
                if isinstance(statement, ast.Assign)
                else [getattr(statement, "target", None)]
            )
            value = getattr(statement, "value", None)
            if any(isinstance(t, ast.Name) and t.id == "ray_enabled" for t in targets) and (
                isinstance(value, ast.Constant) and value.value is True
            ):
                return True
    return False


def deployment_needs_ray(cfg: DictConfig, entrypoints: list[Path]) -> bool:
    """Whether the launcher must join or start a Ray cluster before its children start."""
    return (
        top_level_setting(cfg, SHARDS_KEY_NAME, None) is not None
        or top_level_setting(cfg, CPU_POOL_BACKEND_KEY_NAME, "process") == "ray"
        or any(entrypoint_declares_ray(path) for path in entrypoints)
    )


def initialize_ray(cfg: DictConfig | None = None) -> None:
    """Join the cluster at `ray_head_node_address` (or `auto`), or start a private local one, unless this
    process is already connected (a trainer's Ray actor); then make sure `cfg` names the cluster, so the
    children join the same one."""
    global _joined_here
    import ray

    if not ray.is_initialized():
        os.environ.setdefault(USAGE_STATS_ENV_VAR_NAME, "0")
        address = ray_address_from(cfg) if cfg is not None else None
        if address is None:
            ray.init(include_dashboard=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)
        _joined_here = True
    gcs_address = ray.get_runtime_context().gcs_address
    if cfg is not None and ray_address_from(cfg) in (None, "auto"):
        with open_dict(cfg):
            cfg[RAY_HEAD_NODE_ADDRESS_KEY_NAME] = gcs_address
    logger.info("joined the Ray cluster at %s", gcs_address)


def ray_initialized() -> bool:
    """Whether this process has joined a cluster, asked without loading Ray."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


def shutdown_ray() -> None:
    """Leave the cluster (stopping it, if this process started it) when this process joined it through
    `initialize_ray`; a connection the process had before (a trainer's) is left alone."""
    global _joined_here
    if _joined_here:
        sys.modules["ray"].shutdown()
        _joined_here = False
