"""The merged config of a Gym deployment: where it comes from, how it is checked, how it is completed.

`parse_global_config_dict` runs, in order (sources from lowest to highest precedence: config files <
env.yaml < programmatic dict < command line):

1. parse the Hydra overrides (`+k=v` adds, `++k=v` adds or replaces) onto an empty config and merge
   them over `initial_global_config_dict`;
2. read `env.yaml` (current directory, else install root) and take `config_paths` from env.yaml merged
   with step 1; load the listed files as a work list (current directory first, then install root): a
   file's own `config_paths` are appended to the end of the list, a file already loaded is skipped with
   a warning;
3. merge the files in NeMo Gym 0.7's post-order (a file after everything it includes, so an includer
   overrides its includes; a later sibling subtree overrides an earlier one), then env.yaml and step 1;
   write the expanded `config_paths` back, in load order;
4. apply the structural directives `_inherit_from`, `_copy` and `_delete_key` (and their string forms
   `${inherit_from:a.b}` / `${copy:a.b}`; environment servers follow an agent a top-level
   `_inherit_from` moved), then compose an unbound agent (`--agent-type`) over the others
   and check the pairings resources servers allow (`nemo_gym.config.agent_composition`); route 0.7's
   renamed reasoning-gym agents' old names to them (`nemo_gym.config.renames`); warn about a
   top-level key that nearly spells a setting (`num_repeat`: did you mean `num_repeats`?); copy the
   top-level `skip_verification(_reward)` into the agents;
5. fail if a `???` is left, listing every unset path; check the `token_id_capture` block and, when it is
   enabled, write its directory into it as an absolute path;
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

import logging
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict

from nemo_gym.config import server_kinds
from nemo_gym.config.agent_composition import compose_unbound_agent
from nemo_gym.config.defaults import DEFAULT_HEAD_SERVER_PORT as DEFAULT_HEAD_SERVER_PORT
from nemo_gym.config.defaults import DEFAULT_HOST as DEFAULT_HOST
from nemo_gym.config.defaults import DEFAULT_PORT_RANGE_HIGH as DEFAULT_PORT_RANGE_HIGH
from nemo_gym.config.defaults import DEFAULT_PORT_RANGE_LOW as DEFAULT_PORT_RANGE_LOW
from nemo_gym.config.defaults import MAX_PORT_PROBES as MAX_PORT_PROBES
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
from nemo_gym.config.environment_servers import check_agents_have_environment_servers
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_agent_settings import apply_global_agent_settings
from nemo_gym.config.key_names import *  # noqa: F403  (NeMo Gym's key-name constants live here too)
from nemo_gym.config.key_names import (
    HF_TOKEN_KEY_NAME,
    NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME,
    POLICY_API_KEY_KEY_NAME,
    POLICY_BASE_URL_KEY_NAME,
    POLICY_MODEL_KEY_NAME,
    POLICY_MODEL_NAME_KEY_NAME,
)
from nemo_gym.config.masking import MIN_SCRUBBED_SECRET_CHARS as MIN_SCRUBBED_SECRET_CHARS
from nemo_gym.config.masking import mask_secrets as mask_secrets
from nemo_gym.config.masking import to_resolved_yaml as to_resolved_yaml
from nemo_gym.config.masking import to_yaml as to_yaml
from nemo_gym.config.overrides import displayed_override as displayed_override
from nemo_gym.config.overrides import parse_overrides
from nemo_gym.config.ports import PortReserver as PortReserver
from nemo_gym.config.ports import assign_addresses, can_bind
from nemo_gym.config.renames import (
    apply_legacy_agent_aliases,
    repoint_moved_agents,
    top_level_agent_copies,
)
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
from nemo_gym.config.token_id_capture import complete_token_id_capture
from nemo_gym.config.top_level_keys import misspelt_keys

NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME = "NEMO_GYM_CONFIG_FILE"
NEMO_GYM_RESERVED_TOP_LEVEL_KEYS = RESERVED_TOP_LEVEL_KEYS
# A Hydra override token: `key=value`, `+key=value`, `++key=value` or `~key` (dotted keys, indices).
_OVERRIDE_TOKEN = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][\w\-./\[\]@]*(=.*)?$", re.DOTALL)

logger = logging.getLogger("nemo_gym.global_config")

_cached_global_config_dict: DictConfig | None = None


def parse_global_config_dict(
    overrides: Sequence[str] | None = None,
    initial_global_config_dict: Mapping[str, Any] | DictConfig | None = None,
    cwd: Path | None = None,
    install_root: Path | None = None,
    port_reserver: PortReserver | None = None,
    env_yaml_path: Path | None = None,
    skip_env_yaml: bool = False,
) -> DictConfig:
    """Build, check and complete the merged config (see the module docstring for the steps).

    `port_reserver(host, port) -> bool` decides whether a free port may be given to an instance; the
    default only probes. The launcher passes one that binds and keeps the socket, so no other process
    can take the port before the server starts. `env_yaml_path` names the env.yaml to read instead of the
    usual search (a missing file is no error, as in NeMo Gym); `skip_env_yaml` reads none.
    """
    cwd = cwd if cwd is not None else Path.cwd()
    root = install_root if install_root is not None else INSTALL_ROOT
    command_line = merged(
        [
            ("initial_global_config_dict", OmegaConf.create(initial_global_config_dict or {})),
            ("the command line", parse_overrides(overrides or [])),
        ]
    )
    if skip_env_yaml:
        env_yaml = OmegaConf.create({})
    elif env_yaml_path is not None:
        env_yaml = load_yaml_file(env_yaml_path) if env_yaml_path.is_file() else OmegaConf.create({})
    else:
        env_yaml = load_env_yaml(cwd, root)
    top_config_paths = config_paths_in(merged([("env.yaml", env_yaml), ("the command line", command_line)]))
    config_files, loaded_paths = load_config_files(top_config_paths, cwd, root)
    tree = OmegaConf.to_container(
        merged([*config_files, ("env.yaml", env_yaml), ("the command line", command_line)]), resolve=False
    )
    tree[CONFIG_PATHS_KEY] = loaded_paths
    agent_copies = top_level_agent_copies(tree)
    apply_structural_directives(tree)
    repoint_moved_agents(tree, agent_copies)
    compose_unbound_agent(tree, OmegaConf.to_container(parse_overrides(overrides or []), resolve=False))
    apply_legacy_agent_aliases(tree)
    apply_global_agent_settings(tree)
    misspelt_keys(tree)
    raise_if_missing_values(tree)
    cfg = OmegaConf.create(tree)
    complete_token_id_capture(cfg, cwd)
    settings = deployment_settings(cfg)
    instances = checked_server_instances(cfg, settings.knobs.error_on_almost_servers)
    check_agents_have_environment_servers(cfg, instances)
    assign_addresses(cfg, instances, settings, port_reserver or can_bind)
    return cfg


class GlobalConfigDictParserConfig(BaseModel):
    """Where a config comes from, as NeMo Gym's trainers describe it to `RunHelper.start` and
    `get_global_config_dict`: a config built in memory (`initial_global_config_dict`), an env.yaml
    (`dotenv_path`, default: the usual search) and, unless skipped, the command line's overrides."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    dotenv_path: Path | None = None
    initial_global_config_dict: DictConfig | dict[str, Any] | None = None
    skip_load_from_cli: bool = False
    skip_load_from_dotenv: bool = False
    hide_secrets: bool = False
    # Inspect a config without side effects: ports are given without probing whether they are free.
    offline: bool = False

    # Enough of a policy model to resolve a config that names none (data tools, dataset checks).
    NO_MODEL_GLOBAL_CONFIG_DICT: ClassVar[DictConfig] = DictConfig(
        {
            POLICY_BASE_URL_KEY_NAME: "",
            POLICY_API_KEY_KEY_NAME: "",
            POLICY_MODEL_NAME_KEY_NAME: "",
            POLICY_MODEL_KEY_NAME: {server_kinds.MODEL.key: {"dummy_model": {"entrypoint": "app.py"}}},
        }
    )


class GlobalConfigDictParser:
    """Builds a merged config from a `GlobalConfigDictParserConfig` (NeMo Gym's entry point for it)."""

    def parse(
        self,
        parse_config: GlobalConfigDictParserConfig | None = None,
        *,
        port_reserver: PortReserver | None = None,
    ) -> DictConfig:
        parse_config = parse_config or GlobalConfigDictParserConfig()
        if parse_config.offline:
            port_reserver = _any_port
        cfg = parse_global_config_dict(
            [] if parse_config.skip_load_from_cli else self.parse_global_config_dict_from_cli(),
            parse_config.initial_global_config_dict,
            port_reserver=port_reserver,
            env_yaml_path=parse_config.dotenv_path,
            skip_env_yaml=parse_config.skip_load_from_dotenv,
        )
        return OmegaConf.create(mask_secrets(cfg)) if parse_config.hide_secrets else cfg

    def parse_no_environment(
        self, initial_global_config_dict: Mapping[str, Any] | DictConfig | None = None
    ) -> DictConfig:
        """The config from `initial_global_config_dict` alone: no command line, no env.yaml."""
        return self.parse(
            GlobalConfigDictParserConfig(
                initial_global_config_dict=initial_global_config_dict,
                skip_load_from_cli=True,
                skip_load_from_dotenv=True,
            )
        )

    def parse_global_config_dict_from_cli(self) -> list[str]:
        return command_line_overrides(sys.argv[1:])

    def raise_on_no_server_instances(self, global_config_dict: DictConfig) -> None:
        require_server_instances(global_config_dict)


def _any_port(host: str, port: int) -> bool:
    return True


def command_line_overrides(argv: Sequence[str]) -> list[str]:
    """`argv` when it is a list of config overrides (`+a=1`, `a.b=x`, `~c`), else nothing: a library call
    in a process that is not Gym's (a Ray worker, pytest, a trainer script) must not read that program's
    own arguments as config."""
    if all(_OVERRIDE_TOKEN.match(token) for token in argv):
        return list(argv)
    logger.debug("Not reading the command line as config overrides: %s is not Gym's", sys.argv[0])
    return []


def get_global_config_dict(
    global_config_dict_parser_config: GlobalConfigDictParserConfig | None = None,
    global_config_dict_parser_cls: type[GlobalConfigDictParser] = GlobalConfigDictParser,
) -> DictConfig:
    """The config of this process, built once and then cached.

    A server child loads the launcher's merged YAML; a process that `RunHelper` started a deployment in
    gets that deployment's config; otherwise the config is parsed from `global_config_dict_parser_config`
    (default: env.yaml and this program's command line, when it is made of config overrides).
    """
    cached = maybe_get_global_config_dict()
    if cached is not None:
        return cached
    set_global_config_dict(global_config_dict_parser_config, global_config_dict_parser_cls)
    assert _cached_global_config_dict is not None
    return _cached_global_config_dict


def set_global_config_dict(
    global_config_dict_parser_config: GlobalConfigDictParserConfig | None = None,
    global_config_dict_parser_cls: type[GlobalConfigDictParser] = GlobalConfigDictParser,
    *,
    global_config_dict: DictConfig | None = None,
) -> None:
    """Parse and cache the config of this process (or cache `global_config_dict`, already parsed)."""
    global _cached_global_config_dict
    if global_config_dict is None:
        global_config_dict = global_config_dict_parser_cls().parse(global_config_dict_parser_config)
    _cached_global_config_dict = global_config_dict


def maybe_get_global_config_dict() -> DictConfig | None:
    """The config this process already has (cached, or handed over by the launcher); never parses."""
    global _cached_global_config_dict
    if _cached_global_config_dict is None:
        _cached_global_config_dict = _launcher_config()
    return _cached_global_config_dict


def reset_global_config_dict_cache() -> None:
    """Forget the cached config, so that the next `get_global_config_dict` builds it again (tests)."""
    global _cached_global_config_dict
    _cached_global_config_dict = None


def get_hf_token() -> str | None:
    """The Hugging Face token of this process's config (`hf_token`), if any."""
    token = get_global_config_dict().get(HF_TOKEN_KEY_NAME)
    return str(token) if token else None


def find_open_port(disallowed_ports: Sequence[int] | None = None, max_retries: int = MAX_PORT_PROBES) -> int:
    """A port of 127.0.0.1 that is free now and not in `disallowed_ports`."""
    taken = set(disallowed_ports or ())
    for _ in range(max_retries):
        with socket.socket() as probe:
            probe.bind((DEFAULT_HOST, 0))
            port = probe.getsockname()[1]
        if port not in taken:
            return port
    raise ConfigError(f"No free port outside {len(taken)} disallowed ones after {max_retries} tries")


def _launcher_config() -> DictConfig | None:
    """The merged config a launcher handed this server process, if it is one."""
    config_file = os.environ.get(NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME)
    if config_file:
        return load_yaml_file(Path(config_file))
    config_text = os.environ.get(NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME)
    if config_text:
        return mapping_from_yaml_text(config_text, f"${NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME}")
    return None
