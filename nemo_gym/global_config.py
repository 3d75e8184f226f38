"""The merged config of a Gym deployment: where it comes from, how it is checked, how it is completed.

`parse_global_config_dict` runs, in order (sources from lowest to highest precedence: config files <
env.yaml < programmatic dict < command line):

1. parse the Hydra overrides (`+k=v` adds, `++k=v` adds or replaces) onto an empty config and merge
   them over `initial_global_config_dict`;
2. read `env.yaml` (current directory, else install root) and take `config_paths` from env.yaml merged
   with step 1; load the listed files as a work list (current directory first, then install root): a
   file's own `config_paths` are appended to the end of the list, a file already loaded is skipped with
   a warning, so an included file loads after its includer and the rest of the top-level list;
3. merge files in load order (later wins, so an included file overrides its includer, as in NeMo Gym),
   then env.yaml and step 1; write the expanded `config_paths` back, in load order;
4. apply the structural directives `_inherit_from`, `_copy` and `_delete_key` (and their string forms
   `${inherit_from:a.b}` / `${copy:a.b}`);
5. fail if a `???` is left, listing every unset path;
6. refuse a block that looks like a server instance but does not validate as one (a warning instead
   with `error_on_almost_servers: false`), discover the server instances, and check that every server
   reference between them names an existing instance of the right type;
7. give each instance a host and a port that no other instance and not the head server has, then write
   the derived keys (`head_server`, `port_range_low/high`, `disallowed_ports`).

Interpolations such as `${policy_model_name}` stay unresolved in the result; a server resolves its own
inner config against the whole config when it starts (`resolve_instance_config`). A server process does
not parse at all: it loads the launcher's merged YAML from `NEMO_GYM_CONFIG_FILE` (or, as upstream, the
YAML text in `NEMO_GYM_CONFIG_DICT`).

The steps live in `nemo_gym.config` (sources, overrides, directives, discovery, ports, deployment settings,
masking); this module keeps the entry points and re-exports the names callers have always imported from here.

No server instance is not an error here (`gym resolve` of an env.yaml alone is fine); the launcher calls
`require_server_instances`, which raises `NoServerInstancesError`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nemo_gym.config.deployment import deployment_settings
from nemo_gym.config.deployment import http_client_settings as http_client_settings
from nemo_gym.config.directives import COPY_KEY as COPY_KEY
from nemo_gym.config.directives import DELETE_KEY_KEY as DELETE_KEY_KEY
from nemo_gym.config.directives import INHERIT_FROM_KEY as INHERIT_FROM_KEY
from nemo_gym.config.directives import MISSING_VALUE as MISSING_VALUE
from nemo_gym.config.directives import apply_structural_directives as apply_structural_directives
from nemo_gym.config.directives import find_missing_value_paths as find_missing_value_paths
from nemo_gym.config.directives import raise_if_missing_values
from nemo_gym.config.discovery import RESERVED_TOP_LEVEL_KEYS as RESERVED_TOP_LEVEL_KEYS
from nemo_gym.config.discovery import checked_server_instances
from nemo_gym.config.discovery import find_server_instances as find_server_instances
from nemo_gym.config.discovery import get_first_server_config_dict as get_first_server_config_dict
from nemo_gym.config.discovery import require_server_instances as require_server_instances
from nemo_gym.config.discovery import resolve_instance_config as resolve_instance_config
from nemo_gym.config.masking import MIN_SCRUBBED_SECRET_CHARS as MIN_SCRUBBED_SECRET_CHARS
from nemo_gym.config.masking import mask_secrets as mask_secrets
from nemo_gym.config.masking import to_resolved_yaml as to_resolved_yaml
from nemo_gym.config.masking import to_yaml as to_yaml
from nemo_gym.config.overrides import displayed_override as displayed_override
from nemo_gym.config.overrides import parse_overrides
from nemo_gym.config.ports import PortReserver as PortReserver
from nemo_gym.config.ports import assign_addresses, can_bind
from nemo_gym.config.settings import SettingsT as SettingsT
from nemo_gym.config.settings import command_settings as command_settings
from nemo_gym.config.settings import locate_data_file as locate_data_file
from nemo_gym.config.settings import secret_setting as secret_setting
from nemo_gym.config.sources import (
    CONFIG_PATHS_KEY,
    INSTALL_ROOT,
    config_paths_in,
    load_config_files,
    load_env_yaml,
    mapping_from_yaml_text,
    merged,
)
from nemo_gym.config.sources import ENV_YAML_FILENAME as ENV_YAML_FILENAME
from nemo_gym.config.sources import install_root as install_root
from nemo_gym.config.sources import load_yaml_file as load_yaml_file
from nemo_gym.defaults import DEFAULT_HEAD_SERVER_PORT as DEFAULT_HEAD_SERVER_PORT
from nemo_gym.defaults import DEFAULT_HOST as DEFAULT_HOST
from nemo_gym.defaults import DEFAULT_PORT_RANGE_HIGH as DEFAULT_PORT_RANGE_HIGH
from nemo_gym.defaults import DEFAULT_PORT_RANGE_LOW as DEFAULT_PORT_RANGE_LOW
from nemo_gym.defaults import MAX_PORT_PROBES as MAX_PORT_PROBES

NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME = "NEMO_GYM_CONFIG_DICT"
NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME = "NEMO_GYM_CONFIG_PATH"
NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME = "NEMO_GYM_CONFIG_FILE"

_cached_global_config_dict: DictConfig | None = None


def parse_global_config_dict(
    overrides: Sequence[str] | None = None,
    initial_global_config_dict: Mapping[str, Any] | DictConfig | None = None,
    cwd: Path | None = None,
    install_root: Path | None = None,
    port_reserver: PortReserver | None = None,
) -> DictConfig:
    """Build, check and complete the merged config (see the module docstring for the steps).

    `port_reserver(host, port) -> bool` decides whether a free port may be given to an instance; the
    default only probes. The launcher passes one that binds and keeps the socket, so no other process
    can take the port before the server starts.
    """
    cwd = cwd if cwd is not None else Path.cwd()
    root = install_root if install_root is not None else INSTALL_ROOT
    command_line = merged(
        [
            ("initial_global_config_dict", OmegaConf.create(initial_global_config_dict or {})),
            ("the command line", parse_overrides(overrides or [])),
        ]
    )
    env_yaml = load_env_yaml(cwd, root)
    top_config_paths = config_paths_in(merged([("env.yaml", env_yaml), ("the command line", command_line)]))
    config_files, loaded_paths = load_config_files(top_config_paths, cwd, root)
    tree = OmegaConf.to_container(
        merged([*config_files, ("env.yaml", env_yaml), ("the command line", command_line)]), resolve=False
    )
    tree[CONFIG_PATHS_KEY] = loaded_paths
    apply_structural_directives(tree)
    raise_if_missing_values(tree)
    cfg = OmegaConf.create(tree)
    settings = deployment_settings(cfg)
    instances = checked_server_instances(cfg, settings.knobs.error_on_almost_servers)
    assign_addresses(cfg, instances, settings, port_reserver or can_bind)
    return cfg


def get_global_config_dict(
    overrides: Sequence[str] | None = None,
    initial_global_config_dict: Mapping[str, Any] | None = None,
) -> DictConfig:
    """The config of this process, built once: a server child loads the launcher's merged YAML.

    Outside a server process the config is parsed from `overrides` (default: `sys.argv[1:]`).
    """
    global _cached_global_config_dict
    if _cached_global_config_dict is None:
        _cached_global_config_dict = _load_process_config(overrides, initial_global_config_dict)
    return _cached_global_config_dict


def reset_global_config_dict_cache() -> None:
    """Forget the cached config, so that the next `get_global_config_dict` builds it again (tests)."""
    global _cached_global_config_dict
    _cached_global_config_dict = None


def _load_process_config(
    overrides: Sequence[str] | None, initial_global_config_dict: Mapping[str, Any] | None
) -> DictConfig:
    config_file = os.environ.get(NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME)
    if config_file:
        return load_yaml_file(Path(config_file))
    config_text = os.environ.get(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME)
    if config_text:
        return mapping_from_yaml_text(config_text, f"${NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME}")
    return parse_global_config_dict(
        sys.argv[1:] if overrides is None else overrides, initial_global_config_dict
    )
