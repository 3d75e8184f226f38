"""Giving every server instance a host and a port: explicit ports are checked for clashes, missing ones
are drawn at random from the port range, and the derived top-level keys are written back."""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nemo_gym.config.defaults import MAX_PORT_PROBES
from nemo_gym.config.deployment import DeploymentSettings
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.server_instances import ServerInstanceConfig

PortReserver = Callable[[str, int], bool]


def assign_addresses(
    cfg: DictConfig,
    instances: list[ServerInstanceConfig],
    settings: DeploymentSettings,
    port_reserver: PortReserver,
) -> None:
    """Fill each instance's missing host/port; no two instances and not the head server share a port."""
    head_port, port_low, port_high = (
        settings.head_server_port,
        settings.port_range_low,
        settings.port_range_high,
    )
    explicit_ports = _explicit_ports(instances, head_port)
    taken = {head_port, *explicit_ports, *settings.disallowed_ports}
    ports = [head_port] if head_port else []  # 0 is no port but "any free one", bound by the launcher
    for instance in instances:
        inner_config, inner_dict = (
            instance.get_inner_run_server_config(),
            instance.get_inner_run_server_config_dict(),
        )
        if not inner_config.host:
            inner_dict["host"] = settings.default_host
        port = inner_config.port
        if not port:
            port = _random_free_port(inner_dict["host"], port_low, port_high, taken, port_reserver)
            inner_dict["port"] = port
        taken.add(port)
        ports.append(port)
    cfg["port_range_low"], cfg["port_range_high"] = port_low, port_high
    cfg["head_server"] = _completed_head_server(cfg, settings.default_host, head_port)
    cfg["disallowed_ports"] = list(dict.fromkeys([*settings.disallowed_ports, *ports]))


def _explicit_ports(instances: list[ServerInstanceConfig], head_port: int) -> dict[int, str]:
    """Ports given in the config, by owner; a port given twice, or the head server's, is an error."""
    owners: dict[int, str] = {}
    for instance in instances:
        port = instance.get_inner_run_server_config().port
        if not port:
            continue
        if port == head_port:
            raise ConfigError(
                f"Server instance '{instance.name}' has port {port}, which is the head server's port "
                "(head_server.port); give the instance another port or leave it unset"
            )
        if port in owners:
            raise ConfigError(
                f"Server instances '{owners[port]}' and '{instance.name}' both have port {port}; "
                "give each its own port or leave port unset to get a free one"
            )
        owners[port] = instance.name
    return owners


def _random_free_port(host: str, low: int, high: int, taken: set[int], port_reserver: PortReserver) -> int:
    """A random port of [low, high] not in `taken` that can be bound right now on `host`."""
    free = [port for port in range(low, high + 1) if port not in taken]
    if not free:
        raise ConfigError(
            f"No free port left in port_range_low..port_range_high ({low}..{high}); widen the range"
        )
    for candidate in random.sample(free, min(len(free), MAX_PORT_PROBES)):
        if port_reserver(host, candidate):
            return candidate
    raise ConfigError(
        f"No bindable port on {host} found in {low}..{high} after {MAX_PORT_PROBES} tries; "
        "set port_range_low/port_range_high to a less busy range"
    )


def can_bind(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _completed_head_server(cfg: DictConfig, default_host: str, head_port: int) -> dict[str, Any]:
    head_server = cfg.get("head_server")
    given = OmegaConf.to_container(head_server, resolve=False) if isinstance(head_server, DictConfig) else {}
    return {**given, "host": given.get("host") or default_host, "port": head_port}
