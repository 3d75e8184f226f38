"""The deployment-wide settings of a merged config, typed and validated once per process.

Addresses (default host, head server, port range, disallowed ports), the outbound HTTP client's knobs and
the knobs every server applies at start all live at the top level of the config; `deployment_settings`
reads them together so that each process checks them once and every reader sees the same values.
"""

from __future__ import annotations

import functools
import json
import socket
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.config.defaults import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_CONNECTOR_LIMIT,
    DEFAULT_CONNECTOR_LIMIT_PER_HOST,
    DEFAULT_CPU_POOL_BACKEND,
    DEFAULT_DEADLINE_S,
    DEFAULT_HEAD_SERVER_PORT,
    DEFAULT_HOST,
    DEFAULT_HTTP_MAX_ATTEMPTS,
    DEFAULT_MAX_REQUEST_BODY_MB,
    DEFAULT_PORT_RANGE_HIGH,
    DEFAULT_PORT_RANGE_LOW,
    DEFAULT_REQUEST_READ_TIMEOUT_S,
    CPUPoolBackend,
)
from nemo_gym.config.errors import ConfigError, first_line
from nemo_gym.config.settings import command_settings, top_level_setting


class HTTPClientSettings(BaseModel):
    """The top-level `global_aiohttp_*` / `global_http_*` knobs of every server's outbound client."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    global_aiohttp_connector_limit: int = Field(default=DEFAULT_CONNECTOR_LIMIT, ge=1)
    global_aiohttp_connector_limit_per_host: int = Field(default=DEFAULT_CONNECTOR_LIMIT_PER_HOST, ge=1)
    global_http_max_attempts: int = Field(default=DEFAULT_HTTP_MAX_ATTEMPTS, ge=1)
    global_http_deadline_s: float = Field(default=DEFAULT_DEADLINE_S, gt=0)
    global_http_connect_timeout_s: float = Field(default=DEFAULT_CONNECT_TIMEOUT_S, gt=0)


class ServerKnobs(BaseModel):
    """Plain top-level switches, each under its own key: how strict parsing is about blocks that almost are
    servers, whether servers log at debug level, how big and slow a request a server accepts, and where
    `run_cpu_bound` work runs."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    error_on_almost_servers: bool = True
    verbose: bool = False
    global_max_request_body_mb: float = Field(default=DEFAULT_MAX_REQUEST_BODY_MB, gt=0)
    global_request_read_timeout_s: float = Field(default=DEFAULT_REQUEST_READ_TIMEOUT_S, gt=0)
    cpu_pool_backend: CPUPoolBackend = DEFAULT_CPU_POOL_BACKEND


class DeploymentSettings(BaseModel):
    """The top-level settings the processes of one deployment read at start, checked."""

    model_config = ConfigDict(frozen=True)

    default_host: str
    head_server_host: str
    head_server_port: int = Field(description="0: any free port, chosen when the launcher binds it")
    port_range_low: int
    port_range_high: int
    disallowed_ports: tuple[int, ...] = Field(description="ports no server instance may be given")
    http_client: HTTPClientSettings
    knobs: ServerKnobs


# Every top-level key the settings are read from: the cache key of one validation.
_ADDRESS_KEYS = (
    "default_host",
    "use_absolute_ip",
    "head_server",
    "port_range_low",
    "port_range_high",
    "disallowed_ports",
)
_SETTING_KEYS = (*_ADDRESS_KEYS, *HTTPClientSettings.model_fields, *ServerKnobs.model_fields)


def deployment_settings(cfg: DictConfig) -> DeploymentSettings:
    """The deployment settings of `cfg`; a bad value is a one-line ConfigError naming its key and the fix.

    Validated once for each distinct set of values, so a process reading them again (or reading them from
    a config that was completed in the meantime) pays only for looking the keys up.
    """
    given = {key: _plain_setting(cfg, key) for key in _SETTING_KEYS}
    return _validated_settings(json.dumps(given, sort_keys=True, default=repr))


def http_client_settings(cfg: DictConfig) -> HTTPClientSettings:
    """The outbound-client knobs of the config, checked; a bad value names its key."""
    return deployment_settings(cfg).http_client


def _plain_setting(cfg: DictConfig, key: str) -> Any:
    value = top_level_setting(cfg, key, None)
    if not isinstance(value, DictConfig | ListConfig):
        return value
    try:
        return OmegaConf.to_container(value, resolve=True)
    except OmegaConfBaseException as error:
        raise ConfigError(f"Cannot resolve top-level key '{key}': {first_line(error)}") from error


@functools.lru_cache(maxsize=16)
def _validated_settings(given_json: str) -> DeploymentSettings:
    given = OmegaConf.create(json.loads(given_json))
    default_host = _default_host(given)
    head_server = given.get("head_server")
    head_host = head_server.get("host") if isinstance(head_server, Mapping) else None
    port_low = _port_setting(given, "port_range_low", DEFAULT_PORT_RANGE_LOW)
    port_high = _port_setting(given, "port_range_high", DEFAULT_PORT_RANGE_HIGH)
    if port_low > port_high:
        raise ConfigError(f"port_range_low ({port_low}) must not be above port_range_high ({port_high})")
    return DeploymentSettings(
        default_host=default_host,
        head_server_host=head_host or default_host,
        head_server_port=_head_server_port(head_server),
        port_range_low=port_low,
        port_range_high=port_high,
        disallowed_ports=_user_disallowed_ports(given),
        http_client=command_settings(HTTPClientSettings, given),
        knobs=command_settings(ServerKnobs, given),
    )


def _default_host(given: DictConfig) -> str:
    if top_level_setting(given, "use_absolute_ip", False):
        return socket.gethostbyname(socket.gethostname())
    return str(top_level_setting(given, "default_host", None) or DEFAULT_HOST)


def _head_server_port(head_server: Any) -> int:
    port = head_server.get("port") if isinstance(head_server, Mapping) else None
    if port == 0:
        return 0
    return _validated_port(port, "head_server.port") if port is not None else DEFAULT_HEAD_SERVER_PORT


def _user_disallowed_ports(given: DictConfig) -> tuple[int, ...]:
    ports = top_level_setting(given, "disallowed_ports", None) or []
    if not isinstance(ports, list | ListConfig):
        raise ConfigError(f"disallowed_ports must be a list of ports, got {ports!r}")
    return tuple(_validated_port(port, "disallowed_ports") for port in ports)


def _port_setting(given: DictConfig, key: str, default: int) -> int:
    return _validated_port(top_level_setting(given, key, default), key)


def _validated_port(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigError(f"{key} must be a port number between 1 and 65535, got {value!r}")
    return value
