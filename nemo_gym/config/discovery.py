"""The server instances of a merged config: finding them, refusing blocks that almost are instances,
checking the references between them, and reading the config of one instance."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException
from pydantic import ValidationError

from nemo_gym.config.directives import COPY_KEY, INHERIT_FROM_KEY, dotted
from nemo_gym.config.errors import (
    AlmostServerError,
    ConfigError,
    ConfigMissingValuesError,
    NoServerInstancesError,
    ServerRefNotFoundError,
    first_line,
)
from nemo_gym.config.masking import to_yaml
from nemo_gym.config.server_instances import (
    ServerInstanceConfig,
    describe_server_instance_error,
    looks_like_server,
    validate_server_instance_config,
)
from nemo_gym.config.server_kinds import SERVER_TYPES, is_instance_block, server_type_of
from nemo_gym.config.server_refs import ServerRef, is_server_ref
from nemo_gym.config.sources import CONFIG_PATHS_KEY

logger = logging.getLogger("nemo_gym.global_config")  # the name config warnings have always been logged under

RESERVED_TOP_LEVEL_KEYS: frozenset[str] = frozenset(
    {
        CONFIG_PATHS_KEY,
        "entrypoint",
        "default_host",
        "head_server",
        "disallowed_ports",
        "head_server_deps",
        "python_version",
        "pip_install_verbose",
        "use_absolute_ip",
        "uv_pip_set_python",
        "skip_venv_if_present",
        "hf_token",
        "ray_head_node_address",
        "shards",
        "cpu_pool_backend",
        "port_range_low",
        "port_range_high",
        "dry_run",
        "uv_cache_dir",
        "uv_venv_dir",
        INHERIT_FROM_KEY,
        COPY_KEY,
        "nemo_gym_log_dir",
        "verbose",
        "json",
        "query",
    }
)


def find_server_instances(cfg: DictConfig) -> list[ServerInstanceConfig]:
    """The valid server instances of a merged config, in config order."""
    return _classified_top_level_blocks(cfg)[0]


def require_server_instances(cfg: DictConfig) -> list[ServerInstanceConfig]:
    """The server instances, for a caller that starts them: none at all is a config error."""
    instances = find_server_instances(cfg)
    if not instances:
        config_paths = OmegaConf.to_container(cfg, resolve=False).get(CONFIG_PATHS_KEY) or []
        raise NoServerInstancesError(
            f"No server instances in the merged config (config_paths: {config_paths}). An instance is a "
            "top-level key shaped like <name>: {<server type>: {<implementation dir>: {entrypoint: app.py}}}; "
            "pass the files defining them with +config_paths=[<file>.yaml]"
        )
    return instances


def _classified_top_level_blocks(cfg: DictConfig) -> tuple[list[ServerInstanceConfig], dict[str, str]]:
    """Valid instances in config order, and for each block that only looks like one, why it is not."""
    instances: list[ServerInstanceConfig] = []
    almost_servers: dict[str, str] = {}
    raw = OmegaConf.to_container(cfg, resolve=False)
    for name, raw_block in raw.items():
        if not is_instance_block(raw_block):
            continue
        if name in RESERVED_TOP_LEVEL_KEYS:
            if looks_like_server(raw_block):
                almost_servers[name] = (
                    f"'{name}' is a reserved top-level key and cannot name a server instance"
                )
            continue
        try:
            instances.append(validate_server_instance_config(str(name), cfg[name]))
        except ValidationError as error:
            if looks_like_server(raw_block):
                almost_servers[name] = describe_server_instance_error(error)
    return instances, almost_servers


def checked_server_instances(cfg: DictConfig, error_on_almost_servers: bool) -> list[ServerInstanceConfig]:
    """The valid instances, once blocks that almost are servers are refused (or warned about) and every
    server reference between instances is known to name an instance of the right type."""
    instances, almost_servers = _classified_top_level_blocks(cfg)
    if almost_servers:
        _report_almost_servers(cfg, almost_servers, error_on_almost_servers)
    _check_server_refs(instances)
    return instances


def _report_almost_servers(
    cfg: DictConfig, almost_servers: dict[str, str], error_on_almost_servers: bool
) -> None:
    """Error out (or only warn, with `error_on_almost_servers: false`) on blocks that almost are servers."""
    reports = [
        f"Server instance '{name}' looks like a server but is not valid: {problems}.\n"
        f"{to_yaml({name: cfg[name]}, mask=True)}"
        for name, problems in almost_servers.items()
    ]
    if error_on_almost_servers:
        raise AlmostServerError(
            "\n".join(reports)
            + "Fix the block(s) above, or set ++error_on_almost_servers=false to skip them."
        )
    for report in reports:
        logger.warning("%sIt will not be started.", report)


def _check_server_refs(instances: list[ServerInstanceConfig]) -> None:
    """Every server reference in an inner config must name an instance of the referenced type."""
    names_by_type = {server_type: [] for server_type in SERVER_TYPES}
    for instance in instances:
        names_by_type[instance.SERVER_TYPE].append(instance.name)
    for instance in instances:
        inner = OmegaConf.to_container(instance.get_inner_run_server_config_dict(), resolve=False)
        for field, ref in _server_refs_in(inner, ()):
            if ref.name not in names_by_type[ref.type]:
                raise ServerRefNotFoundError(_dangling_ref_message(instance.name, field, ref, names_by_type))


def _server_refs_in(value: Any, path: tuple) -> Iterator[tuple[str, ServerRef]]:
    ref = is_server_ref(value)
    if ref is not None:
        yield dotted(path), ref
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from _server_refs_in(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _server_refs_in(child, (*path, index))


def _dangling_ref_message(
    instance_name: str, field: str, ref: ServerRef, names_by_type: dict[str, list[str]]
) -> str:
    message = (
        f"In server instance '{instance_name}', field '{field}' references {ref.type}/'{ref.name}', "
        "which is not defined in the merged config."
    )
    same_type = names_by_type[ref.type]
    close = difflib.get_close_matches(ref.name, same_type, n=3, cutoff=0.6)
    other_types = [server_type for server_type, names in names_by_type.items() if ref.name in names]
    if close:
        return f"{message} Did you mean: {', '.join(repr(name) for name in close)}?"
    if other_types:
        return f"{message} '{ref.name}' is an instance of {other_types[0]}, not of {ref.type}."
    if same_type:
        return f"{message} Defined {ref.type} instances: {', '.join(repr(name) for name in same_type)}."
    return f"{message} No {ref.type} instance is defined; check config_paths."


def get_first_server_config_dict(cfg: DictConfig, instance_name: str) -> DictConfig:
    """The inner config of an instance: `cfg[name][<server type>][<implementation dir>]`, unresolved."""
    block = cfg.get(instance_name) if instance_name in cfg else None
    if not isinstance(block, DictConfig) or not block:
        raise ServerRefNotFoundError(_unknown_instance_message(cfg, instance_name))
    server_type = server_type_of(block, default=next(iter(block)))
    implementations = block[server_type]
    if not isinstance(implementations, DictConfig) or not implementations:
        raise ConfigError(
            f"'{instance_name}.{server_type}' must map an implementation directory to its config"
        )
    return implementations[next(iter(implementations))]


def _unknown_instance_message(cfg: DictConfig, instance_name: str) -> str:
    candidates = [
        str(name)
        for name, value in OmegaConf.to_container(cfg, resolve=False).items()
        if name not in RESERVED_TOP_LEVEL_KEYS and is_instance_block(value)
    ]
    close = difflib.get_close_matches(instance_name, candidates, n=3, cutoff=0.6)
    hint = (
        f"Did you mean: {', '.join(map(repr, close))}?"
        if close
        else f"Known: {', '.join(candidates) or 'none'}."
    )
    return f"No server instance named '{instance_name}' in the merged config. {hint}"


def resolve_instance_config(cfg: DictConfig, instance_name: str) -> dict[str, Any]:
    """The inner config with every interpolation resolved against the whole config, plus `name`."""
    inner = get_first_server_config_dict(cfg, instance_name)
    try:
        resolved = OmegaConf.to_container(inner, resolve=True)
    except MissingMandatoryValue as error:
        raise ConfigMissingValuesError(
            f"Missing value (???) at {error.full_key} of server instance '{instance_name}'; "
            f"set it with ++{error.full_key}=<value>"
        ) from error
    except OmegaConfBaseException as error:
        raise ConfigError(
            f"Cannot resolve {error.full_key} of server instance '{instance_name}': {first_line(error)}. "
            "Set the referenced key, e.g. in env.yaml or with ++<key>=<value>"
        ) from error
    return {**resolved, "name": instance_name}
