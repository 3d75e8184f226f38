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

No server instance is not an error here (`gym resolve` of an env.yaml alone is fine); the launcher calls
`require_server_instances`, which raises `NoServerInstancesError`.
"""

from __future__ import annotations

import copy
import difflib
import logging
import os
import random
import re
import socket
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from nemo_gym.config_types import (
    SERVER_TYPES,
    AlmostServerError,
    ConfigError,
    ConfigMissingValuesError,
    ConfigPathNotFoundError,
    HTTPClientSettings,
    InheritPathNotFoundError,
    MalformedConfigPathsError,
    NoServerInstancesError,
    ServerInstanceConfig,
    ServerRef,
    ServerRefNotFoundError,
    describe_server_instance_error,
    is_server_ref,
    looks_like_server,
    validate_server_instance_config,
)
from nemo_gym.redaction import MASKED_VALUE, without_url_passwords

logger = logging.getLogger(__name__)
SettingsT = TypeVar("SettingsT", bound=BaseModel)

NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME = "NEMO_GYM_CONFIG_DICT"
NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME = "NEMO_GYM_CONFIG_PATH"
NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME = "NEMO_GYM_CONFIG_FILE"

DEFAULT_HEAD_SERVER_PORT = 11000
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT_RANGE_LOW = 10001
DEFAULT_PORT_RANGE_HIGH = 20000
MAX_PORT_PROBES = 50

CONFIG_PATHS_KEY = "config_paths"
ENV_YAML_FILENAME = "env.yaml"
MISSING_VALUE = "???"
INHERIT_FROM_KEY = "_inherit_from"
COPY_KEY = "_copy"
DELETE_KEY_KEY = "_delete_key"

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

_INSTALL_ROOT = Path(__file__).resolve().parent.parent

PortReserver = Callable[[str, int], bool]
_SECRET_NAME_WORDS = frozenset(
    {"key", "keys", "tokens", "secrets", "passwords", "pwd", "passphrase", "auth", "authorization"}
    | {"cookie", "cookies", "credential", "credentials"}
)
_SECRET_WORD_ENDINGS = ("token", "secret", "password", "passwd", "apikey", "accesskey", "privatekey")
_SECRET_HEADER_PARTS = ("auth", "key", "token", "secret", "cookie", "session", "passw", "credential")
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # `X-Api-Key`, `apiKey`, `HF_TOKEN`
_COUNT_KEY_SUFFIXES = ("tokens", "_count", "_size")
_INTERPOLATED_KEY = re.compile(r"\$\{(?:[\w.]+:)?([^${}:,]+)[^${}]*\}")  # `${a.b}`, `${oc.env:NAME,x}`
_PURE_INTERPOLATION = re.compile(r"^\$\{[^${}]*\}$")
_DIRECTIVE_STRING = re.compile(r"^\$\{(inherit_from|copy):\s*([^}]*?)\s*\}$")

# A secret shorter than this ("EMPTY" placeholders aside) is not cut out of other strings: it would garble them.
MIN_SCRUBBED_SECRET_CHARS = 6

_cached_global_config_dict: DictConfig | None = None


def install_root() -> Path:
    """The directory holding the `nemo_gym` package: the second place relative config paths are tried."""
    return _INSTALL_ROOT


# ---------------------------------------------------------------------------------------------------------
# The pipeline


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
    root = install_root if install_root is not None else _INSTALL_ROOT
    command_line = _merged(
        [
            ("initial_global_config_dict", OmegaConf.create(initial_global_config_dict or {})),
            ("the command line", parse_overrides(overrides or [])),
        ]
    )
    env_yaml = _load_env_yaml(cwd, root)
    top_config_paths = _config_paths_in(_merged([("env.yaml", env_yaml), ("the command line", command_line)]))
    config_files, loaded_paths = _load_config_files(top_config_paths, cwd, root)
    merged = _merged([*config_files, ("env.yaml", env_yaml), ("the command line", command_line)])
    tree = OmegaConf.to_container(merged, resolve=False)
    tree[CONFIG_PATHS_KEY] = loaded_paths
    apply_structural_directives(tree)
    _raise_if_missing_values(tree)
    cfg = OmegaConf.create(tree)
    http_client_settings(cfg)
    instances = _checked_server_instances(cfg)
    _assign_addresses(cfg, instances, port_reserver or _can_bind)
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
        return _mapping_from_yaml_text(config_text, f"${NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME}")
    return parse_global_config_dict(
        sys.argv[1:] if overrides is None else overrides, initial_global_config_dict
    )


def _merged(labelled_configs: list[tuple[str, DictConfig]]) -> DictConfig:
    """Merge left to right (later wins); a type clash names the source that caused it."""
    result = OmegaConf.create({})
    for label, config in labelled_configs:
        try:
            result = OmegaConf.merge(result, config)
        except OmegaConfBaseException as error:
            raise ConfigError(f"Cannot merge {label} into the config: {_first_line(error)}") from error
    return result


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


# ---------------------------------------------------------------------------------------------------------
# Command-line overrides


def parse_overrides(overrides: Sequence[str]) -> DictConfig:
    """Apply Hydra override tokens to an empty config: `+a.b=1` adds a key, `++a.b=1` adds or replaces."""
    parser = OverridesParser.create()
    config = OmegaConf.create({})
    for token in overrides:
        _apply_override(config, token, _parsed_override(parser, token))
    return config


def displayed_override(token: str) -> str:
    """The override as it may appear in a message: the value is hidden when the key names a secret, and
    so is a password in a URL."""
    key, equals, _ = token.partition("=")
    *parents, name = key.split(".")
    if equals and _is_secret_key(name, header=bool(parents) and _is_header_map(parents[-1])):
        return f"{key}={MASKED_VALUE}"
    return without_url_passwords(token)


def _parsed_override(parser: OverridesParser, token: str) -> Override:
    try:
        override = parser.parse_override(token)
    except HydraException as error:
        message = _first_line(error) if displayed_override(token) == token else "invalid syntax"
        raise ConfigError(f"Cannot parse override '{displayed_override(token)}': {message}") from error
    token = displayed_override(token)
    if override.is_sweep_override():
        raise ConfigError(
            f"Override '{token}' has several comma-separated values; quote the value or write a list [a,b]"
        )
    if not (override.is_add() or override.is_force_add()):
        raise ConfigError(
            f"Override '{token}' must start with '+' (add) or '++' (add or replace), "
            f"e.g. ++{override.key_or_group}=<value>"
        )
    return override


def _apply_override(config: DictConfig, token: str, override: Override) -> None:
    key = override.key_or_group
    if override.is_add() and OmegaConf.select(config, key, throw_on_missing=False) is not None:
        raise ConfigError(
            f"Override '{displayed_override(token)}': '{key}' is already set by an earlier override; use ++{key}=... to replace it"
        )
    parts = key.split(".")
    for depth in range(1, len(parts)):
        parent = ".".join(parts[:depth])
        if not isinstance(OmegaConf.select(config, parent, default={}), DictConfig | dict):
            raise ConfigError(
                f"Override '{displayed_override(token)}': '{parent}' is already set to a plain value, "
                f"so it cannot hold '{key}'; set {parent} as a mapping instead"
            )
    OmegaConf.update(config, key, override.value(), merge=True, force_add=True)


# ---------------------------------------------------------------------------------------------------------
# Files


def load_yaml_file(path: Path) -> DictConfig:
    """A YAML file as a DictConfig; syntax errors are reported as `file:line:column: problem`."""
    try:
        text = path.read_text()
    except FileNotFoundError as error:
        raise ConfigPathNotFoundError(f"Config file {path} does not exist") from error
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start}); save the file as UTF-8") from error
    except OSError as error:
        raise ConfigError(f"Cannot read config file {path}: {error.strerror}") from error
    return _mapping_from_yaml_text(text, str(path))


def _mapping_from_yaml_text(text: str, source: str) -> DictConfig:
    try:
        config = OmegaConf.create(text) if text.strip() else OmegaConf.create({})
    except yaml.MarkedYAMLError as error:
        raise ConfigError(_yaml_error_message(error, source)) from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: {error}") from error
    except RecursionError as error:
        raise ConfigError(f"{source}: a YAML alias refers to a node that contains it") from error
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None)
        where = f" at '{key}'" if key else ""
        raise ConfigError(f"{source}{where}: {_first_line(error)}") from error
    if not isinstance(config, DictConfig):
        raise ConfigError(f"{source}: the top level must be a mapping of keys to values, not a list")
    return config


def _yaml_error_message(error: yaml.MarkedYAMLError, source: str) -> str:
    mark = error.problem_mark or error.context_mark
    location = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
    context = f" ({error.context})" if error.context else ""
    return f"{location}: {error.problem or 'invalid YAML'}{context}"


def _load_env_yaml(cwd: Path, root: Path) -> DictConfig:
    """`./env.yaml` if there is one, else `<install root>/env.yaml`, else nothing."""
    for candidate in (cwd / ENV_YAML_FILENAME, root / ENV_YAML_FILENAME):
        if candidate.is_file():
            return load_yaml_file(candidate)
    return OmegaConf.create({})


def _config_paths_in(config: DictConfig, where: str = "the command line or env.yaml") -> list[str]:
    """The `config_paths` of `config`, which must be a list of strings."""
    value = OmegaConf.to_container(config, resolve=False).get(CONFIG_PATHS_KEY)
    if value is None:
        return []
    if isinstance(value, str):
        raise MalformedConfigPathsError(
            f"config_paths in {where} must be a list, got the string '{value}'; write +config_paths=[{value}]"
        )
    if not isinstance(value, list) or not all(isinstance(entry, str) and entry for entry in value):
        raise MalformedConfigPathsError(
            f"config_paths in {where} must be a list of file paths, e.g. +config_paths=[a.yaml,b.yaml]; "
            f"got {value!r}"
        )
    return value


def _load_config_files(
    config_paths: list[str], cwd: Path, root: Path
) -> tuple[list[tuple[str, DictConfig]], list[str]]:
    """Every config file reachable from `config_paths`, in load order (lowest precedence first), and their
    paths as given.

    NeMo Gym's order: a work list seeded with `config_paths`, to whose end each loaded file's own
    `config_paths` are appended; a file reached a second time is skipped with a warning. An included
    file therefore loads after, and wins over, its includer.
    """
    loaded: list[tuple[str, DictConfig]] = []
    loaded_entries: list[str] = []
    seen: set[Path] = set()
    work_list: list[tuple[str, Path | None]] = [(entry, None) for entry in config_paths]
    for entry, listed_in in work_list:  # grows while it is walked
        path = _locate_config_file(entry, cwd, root, listed_in)
        if path in seen:
            logger.warning("Config file %s is listed more than once in config_paths; loaded once", entry)
            continue
        seen.add(path)
        config = load_yaml_file(path)
        work_list.extend((included, path) for included in _config_paths_in(config, str(path)))
        loaded.append((str(path), config))
        loaded_entries.append(entry)
    return loaded, loaded_entries


def _locate_config_file(entry: str, cwd: Path, root: Path, listed_in: Path | None) -> Path:
    """A relative path is tried in the current directory, then in the install root."""
    path = Path(entry).expanduser()
    candidates = [path] if path.is_absolute() else [cwd / path, root / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    listed = f" (listed in config_paths of {listed_in})" if listed_in else ""
    tried = " and ".join(str(candidate) for candidate in candidates)
    raise ConfigPathNotFoundError(f"Config file '{entry}'{listed} not found; tried {tried}")


# ---------------------------------------------------------------------------------------------------------
# Structural directives


def apply_structural_directives(tree: dict[str, Any]) -> None:
    """Expand `_inherit_from` (move), `_copy` (copy) and `_delete_key` in place, anywhere in `tree`."""
    expansion = _expanded_directive(tree, tree, (), ())
    if expansion is not None:
        new_root, _ = expansion
        if not isinstance(new_root, dict):
            raise ConfigError("A directive at the top level of the config must resolve to a mapping")
        tree.clear()
        tree.update(new_root)
    _expand_directives_below(tree, tree, (), ())


def _expand_directives_below(
    root: dict[str, Any], node: dict | list, path: tuple, active_sources: tuple[str, ...]
) -> None:
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    for key in keys:
        if key not in (node if isinstance(node, dict) else range(len(node))):
            continue  # moved away by an earlier `_inherit_from`
        child_path = (*path, key)
        sources = active_sources
        expansion = _expanded_directive(root, node[key], child_path, active_sources)
        if expansion is not None:
            node[key], source = expansion
            sources = (*active_sources, source) if source else active_sources
        if isinstance(node[key], dict | list):
            _expand_directives_below(root, node[key], child_path, sources)


def _expanded_directive(
    root: dict[str, Any], value: Any, path: tuple, active_sources: tuple[str, ...]
) -> tuple[Any, str | None] | None:
    """`(new value, source path or None)` if `value` is a directive, else None."""
    if isinstance(value, str) and (match := _DIRECTIVE_STRING.match(value)):
        kind, source = match.groups()
        return _taken_from_source(
            root, source, path, move=kind == "inherit_from", active=active_sources
        ), source
    if not isinstance(value, dict) or not ({INHERIT_FROM_KEY, COPY_KEY, DELETE_KEY_KEY} & value.keys()):
        return None
    if INHERIT_FROM_KEY in value and COPY_KEY in value:
        raise ConfigError(f"'{_dotted(path)}' has both {INHERIT_FROM_KEY} and {COPY_KEY}; keep one")
    own = {k: v for k, v in value.items() if k not in (INHERIT_FROM_KEY, COPY_KEY, DELETE_KEY_KEY)}
    keys_to_delete = _keys_to_delete(value.get(DELETE_KEY_KEY), path)
    for key in keys_to_delete & own.keys():
        del own[key]
    source = value.get(INHERIT_FROM_KEY, value.get(COPY_KEY))
    if source is None:
        _delete_keys(own, keys_to_delete - value.keys(), path)
        return own, None
    base = _taken_from_source(root, str(source), path, move=INHERIT_FROM_KEY in value, active=active_sources)
    if base == MISSING_VALUE:
        return MISSING_VALUE, str(source)
    if not isinstance(base, dict):
        if own:
            raise ConfigError(f"'{_dotted(path)}' adds keys to '{source}', which is not a mapping")
        return base, str(source)
    result = _deep_merged(base, own)
    _delete_keys(result, keys_to_delete - value.keys(), path)
    return result, str(source)


def _keys_to_delete(spec: Any, path: tuple) -> set[str]:
    """`_delete_key: "a, b"` (or a list) as a set of key names."""
    if spec is None:
        return set()
    names = spec.split(",") if isinstance(spec, str) else spec
    if not isinstance(names, list):
        raise ConfigError(f"{DELETE_KEY_KEY} at '{_dotted(path)}' must be a comma-separated string of keys")
    return {str(name).strip() for name in names if str(name).strip()}


def _delete_keys(mapping: dict[str, Any], keys: set[str], path: tuple) -> None:
    for key in sorted(keys):
        if key not in mapping:
            raise InheritPathNotFoundError(
                f"{DELETE_KEY_KEY} at '{_dotted(path)}' names '{key}', which is not a key there"
            )
        del mapping[key]


def _taken_from_source(
    root: dict[str, Any], source: str, target: tuple, move: bool, active: tuple[str, ...]
) -> Any:
    """A deep copy of the subtree at dotted path `source`, removed from its place when `move`."""
    directive = INHERIT_FROM_KEY if move else COPY_KEY
    parts = tuple(part for part in source.split(".") if part)
    if not parts:
        raise InheritPathNotFoundError(f"{directive} at '{_dotted(target)}' names no path")
    if source in active or tuple(map(str, target[: len(parts)])) == parts:
        raise ConfigError(
            f"{directive} at '{_dotted(target)}' refers to '{source}', which encloses it (a cycle)"
        )
    parent, last = _parent_and_key(root, parts, directive, target)
    value = copy.deepcopy(parent[last])
    if move:
        del parent[last]
    return _fully_expanded(root, value, target, (*active, source))


def _fully_expanded(root: dict[str, Any], value: Any, path: tuple, active: tuple[str, ...]) -> Any:
    """`value` with its own directives and those below it expanded, so chains resolve in any order."""
    expansion = _expanded_directive(root, value, path, active)
    if expansion is not None:
        value, source = expansion
        active = (*active, source) if source else active
    if isinstance(value, dict | list):
        _expand_directives_below(root, value, path, active)
    return value


def _parent_and_key(
    root: dict[str, Any], parts: tuple[str, ...], directive: str, target: tuple
) -> tuple[Any, Any]:
    """The container holding the (non-empty) dotted path `parts`, and the last key."""
    parent: Any = None
    key: Any = None
    node: Any = root
    for depth, part in enumerate(parts):
        key = _existing_child_key(node, part)
        if key is None:
            siblings = [str(name) for name in node] if isinstance(node, dict) else []
            close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.6)
            hint = f"; did you mean '{_dotted((*parts[:depth], close[0]))}'?" if close else ""
            raise InheritPathNotFoundError(
                f"{directive} at '{_dotted(target)}' names '{'.'.join(parts)}', "
                f"which does not exist in the merged config{hint}"
            )
        parent, node = node, node[key]
    return parent, key


def _existing_child_key(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return part if part in node else None
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return int(part)
    return None


def _deep_merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in override.items():
        both_mappings = isinstance(result.get(key), dict) and isinstance(value, dict)
        result[key] = _deep_merged(result[key], value) if both_mappings else value
    return result


def _dotted(path: Sequence[Any]) -> str:
    return ".".join(str(part) for part in path) or "<root>"


# ---------------------------------------------------------------------------------------------------------
# Missing values


def find_missing_value_paths(tree: Any, path: tuple = ()) -> list[str]:
    """Dotted paths of every `???` leaf, in config order."""
    if isinstance(tree, dict):
        return [
            found for key, value in tree.items() for found in find_missing_value_paths(value, (*path, key))
        ]
    if isinstance(tree, list):
        return [
            found
            for index, value in enumerate(tree)
            for found in find_missing_value_paths(value, (*path, index))
        ]
    return [_dotted(path)] if tree == MISSING_VALUE else []


def _raise_if_missing_values(tree: dict[str, Any]) -> None:
    missing = find_missing_value_paths(tree)
    if missing:
        raise ConfigMissingValuesError(
            f"Missing values (???): {', '.join(missing)} — set each with ++<path>=<value> "
            f"(e.g. ++{missing[0]}=<value>) or in env.yaml"
        )


# ---------------------------------------------------------------------------------------------------------
# Server instances


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
        if not isinstance(raw_block, dict) or not (raw_block.keys() & set(SERVER_TYPES)):
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


def _checked_server_instances(cfg: DictConfig) -> list[ServerInstanceConfig]:
    instances, almost_servers = _classified_top_level_blocks(cfg)
    if almost_servers:
        _report_almost_servers(cfg, almost_servers)
    _check_server_refs(instances)
    return instances


def _report_almost_servers(cfg: DictConfig, almost_servers: dict[str, str]) -> None:
    """Error out (or only warn, with `error_on_almost_servers: false`) on blocks that almost are servers."""
    reports = [
        f"Server instance '{name}' looks like a server but is not valid: {problems}.\n"
        f"{to_yaml({name: cfg[name]}, mask=True)}"
        for name, problems in almost_servers.items()
    ]
    if _top_level_setting(cfg, "error_on_almost_servers", True):
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
        yield _dotted(path), ref
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


# ---------------------------------------------------------------------------------------------------------
# Hosts and ports


def _assign_addresses(
    cfg: DictConfig, instances: list[ServerInstanceConfig], port_reserver: PortReserver
) -> None:
    """Fill each instance's missing host/port; no two instances and not the head server share a port."""
    default_host = _default_host(cfg)
    head_port = _head_server_port(cfg)
    port_low = _port_setting(cfg, "port_range_low", DEFAULT_PORT_RANGE_LOW)
    port_high = _port_setting(cfg, "port_range_high", DEFAULT_PORT_RANGE_HIGH)
    if port_low > port_high:
        raise ConfigError(f"port_range_low ({port_low}) must not be above port_range_high ({port_high})")
    explicit_ports = _explicit_ports(instances, head_port)
    taken = {head_port, *explicit_ports, *_user_disallowed_ports(cfg)}
    ports = [head_port]
    for instance in instances:
        inner_config, inner_dict = (
            instance.get_inner_run_server_config(),
            instance.get_inner_run_server_config_dict(),
        )
        if not inner_config.host:
            inner_dict["host"] = default_host
        port = inner_config.port
        if not port:
            port = _random_free_port(inner_dict["host"], port_low, port_high, taken, port_reserver)
            inner_dict["port"] = port
        taken.add(port)
        ports.append(port)
    cfg["port_range_low"], cfg["port_range_high"] = port_low, port_high
    cfg["head_server"] = _completed_head_server(cfg, default_host, head_port)
    cfg["disallowed_ports"] = list(dict.fromkeys([*_user_disallowed_ports(cfg), *ports]))


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


def _can_bind(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _default_host(cfg: DictConfig) -> str:
    if _top_level_setting(cfg, "use_absolute_ip", False):
        return socket.gethostbyname(socket.gethostname())
    return str(_top_level_setting(cfg, "default_host", None) or DEFAULT_HOST)


def _head_server_port(cfg: DictConfig) -> int:
    head_server = _top_level_setting(cfg, "head_server", None)
    port = head_server.get("port") if isinstance(head_server, Mapping) else None
    if port == 0:
        return 0  # any free port, chosen when the launcher binds it
    return _validated_port(port, "head_server.port") if port is not None else DEFAULT_HEAD_SERVER_PORT


def _completed_head_server(cfg: DictConfig, default_host: str, head_port: int) -> dict[str, Any]:
    head_server = cfg.get("head_server")
    given = OmegaConf.to_container(head_server, resolve=False) if isinstance(head_server, DictConfig) else {}
    return {**given, "host": given.get("host") or default_host, "port": head_port}


def _user_disallowed_ports(cfg: DictConfig) -> list[int]:
    ports = _top_level_setting(cfg, "disallowed_ports", None) or []
    if not isinstance(ports, list | ListConfig):
        raise ConfigError(f"disallowed_ports must be a list of ports, got {ports!r}")
    return [_validated_port(port, "disallowed_ports") for port in ports]


def _port_setting(cfg: DictConfig, key: str, default: int) -> int:
    return _validated_port(_top_level_setting(cfg, key, default), key)


def _validated_port(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ConfigError(f"{key} must be a port number between 1 and 65535, got {value!r}")
    return value


def _top_level_setting(cfg: DictConfig, key: str, default: Any) -> Any:
    """A top-level value with interpolations resolved; one that cannot be resolved is a config error."""
    if key not in cfg:
        return default
    try:
        value = cfg[key]
    except OmegaConfBaseException as error:
        raise ConfigError(f"Cannot resolve top-level key '{key}': {_first_line(error)}") from error
    return default if value is None else value


def command_settings(
    model: type[SettingsT], cfg: DictConfig, fallbacks: Mapping[str, Any] | None = None
) -> SettingsT:
    """The top-level keys `model` declares, resolved and validated; a bad value names its key and the fix.

    `fallbacks` supply keys the config leaves unset (a token from the environment, say). `+h=true` /
    `+help=true` reach the model too, so a command's config model can print its own help."""
    values = {key: True for key in ("h", "help") if _top_level_setting(cfg, key, None)}
    for key in model.model_fields:
        value = _top_level_setting(cfg, key, None)
        if value is None and fallbacks:
            value = fallbacks.get(key)
        if value is not None:
            values[key] = (
                OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value
            )
    try:
        return model.model_validate(values)
    except ValidationError as error:
        problem = error.errors()[0]
        key = ".".join(str(part) for part in problem["loc"]) or model.__name__
        got = f" (got {problem['input']!r})" if problem["type"] != "missing" else ""
        raise ConfigError(
            f"Top-level key '{key}': {problem['msg']}{got}; set it with ++{key}=<value>"
        ) from error


def secret_setting(cfg: DictConfig, key: str, env_var: str) -> str | None:
    """A credential from the config (env.yaml or an override) or else from an environment variable; the
    variable is the safer place, since command lines show up in process lists and shell history."""
    value = _top_level_setting(cfg, key, None)
    return str(value) if value else os.environ.get(env_var) or None


def http_client_settings(cfg: DictConfig) -> HTTPClientSettings:
    """The outbound-client knobs of the config, checked; a bad value names its key."""
    return command_settings(HTTPClientSettings, cfg)


def locate_data_file(path: str, key: str, cwd: Path | None = None) -> Path:
    """A data file named by config key `key`: relative paths are tried in the current directory, then in
    the install root (where the shipped example data lives)."""
    given = Path(path).expanduser()
    candidates = [given] if given.is_absolute() else [(cwd or Path.cwd()) / given, install_root() / given]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = " and ".join(str(candidate) for candidate in candidates)
    raise ConfigPathNotFoundError(f"{key}: file '{path}' not found; tried {tried}")


# ---------------------------------------------------------------------------------------------------------
# Reading the config of one instance


def get_first_server_config_dict(cfg: DictConfig, instance_name: str) -> DictConfig:
    """The inner config of an instance: `cfg[name][<server type>][<implementation dir>]`, unresolved."""
    block = cfg.get(instance_name) if instance_name in cfg else None
    if not isinstance(block, DictConfig) or not block:
        raise ServerRefNotFoundError(_unknown_instance_message(cfg, instance_name))
    server_type = next((key for key in SERVER_TYPES if key in block), next(iter(block)))
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
        if name not in RESERVED_TOP_LEVEL_KEYS
        and isinstance(value, dict)
        and value.keys() & set(SERVER_TYPES)
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
            f"Cannot resolve {error.full_key} of server instance '{instance_name}': {_first_line(error)}. "
            "Set the referenced key, e.g. in env.yaml or with ++<key>=<value>"
        ) from error
    return {**resolved, "name": instance_name}


# ---------------------------------------------------------------------------------------------------------
# Display


def mask_secrets(value: Any) -> Any:
    """A plain deep copy in which secret values read "****", for any display of a config.

    A key is secret when `_is_secret_key` says so; every string below it is masked, in nested mappings
    and lists too, and so is the value of a credential header in a header map (`default_headers`,
    `openai_default_headers`, ...). A password in a URL (`https://user:pass@host`) is masked in any
    string. Left visible: None, booleans, numbers under a count-like key (`max_tokens`), a value that is
    only an interpolation such as `${policy_api_key}` (the key it refers to is masked where it is
    defined), and the structure of server instances: an instance, server-type or implementation name like
    `token_counter` never hides its host and port, which clients need to find it.
    """
    return _masked(value, under_secret_key=False, names_level=3)


def _masked(value: Any, under_secret_key: bool, names_level: int = 0, key: Any = "") -> Any:
    """`names_level`: 3 at the root (keys are instance names), 2 for a top-level block, 1 under a
    server-type key (keys are implementation names), 0 for ordinary config below."""
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=False)
    if isinstance(value, Mapping):
        headers = _is_header_map(key)
        return {
            child_key: _masked(
                child,
                under_secret_key
                or (_names_a_setting(names_level, child) and _is_secret_key(child_key, header=headers)),
                _child_names_level(names_level, child_key),
                child_key,
            )
            for child_key, child in value.items()
        }
    if isinstance(value, list | tuple):
        return [_masked(child, under_secret_key, 0, key) for child in value]
    if not under_secret_key:
        return without_url_passwords(value) if isinstance(value, str) else value
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float) and str(key).lower().endswith(_COUNT_KEY_SUFFIXES):
        return value
    if isinstance(value, str) and _PURE_INTERPOLATION.match(value):
        return value
    return MASKED_VALUE


def _names_a_setting(names_level: int, child: Any) -> bool:
    """False for a key that names a server instance or implementation rather than a setting."""
    if names_level == 3:
        return not (isinstance(child, Mapping) and child.keys() & set(SERVER_TYPES))
    return names_level != 1


def _child_names_level(names_level: int, child_key: Any) -> int:
    if names_level == 3:
        return 2
    if names_level == 2 and child_key in SERVER_TYPES:
        return 1
    return 0


def _is_secret_key(key: Any, header: bool = False) -> bool:
    """Whether the value of a setting named `key` (an HTTP header name, with `header`) is a credential.

    A setting name is cut into words (`X-Api-Key`, `apiKey`, `HF_TOKEN`, `db_passwd`), so that `tokenizer`,
    `keyword` or `author` stay visible: it is secret when a word is a credential word (key, token, secret,
    password, passwd, pwd, auth, cookie, credentials, ...) or runs one on at its end (`hftoken`,
    `apikey`). A header name is secret when it merely contains auth, key, token, secret, cookie, session,
    passw or credential, since headers of those names carry little else (`X-Upstream-Auth`, `Set-Cookie`).
    """
    if header:
        return any(part in str(key).lower() for part in _SECRET_HEADER_PARTS)
    return any(word in _SECRET_NAME_WORDS or word.endswith(_SECRET_WORD_ENDINGS) for word in _name_words(key))


def _is_header_map(key: Any) -> bool:
    """A mapping under `headers`, `extra_headers`, `openai_default_headers`... maps header names to values."""
    return _name_words(key)[-1:] == ["headers"]


def _name_words(key: Any) -> list[str]:
    return [word.lower() for word in _NAME_WORD.findall(str(key))]


def to_yaml(cfg: Any, mask: bool) -> str:
    """YAML text of a config (interpolations kept as written), with secrets masked when `mask`."""
    return OmegaConf.to_yaml(mask_secrets(cfg) if mask else cfg)


def to_resolved_yaml(cfg: Any) -> str:
    """YAML text of a config as the servers will see it: interpolations resolved, then secrets masked.

    Masking by key runs on the resolved values, so `openai_api_key: ${policy_api_key}` shows "****"; a
    value interpolating a secret key (`Bearer ${policy_api_key}` under a header named `X-Auth`) is masked
    whole; and every secret value is also cut out of any other string it reached through a chain of
    interpolations (`X-Auth: ${bearer}` with `bearer: Bearer ${policy_api_key}`). An
    interpolation that cannot be resolved is shown as written, so a half-finished config can still be
    inspected.
    """
    config = cfg if OmegaConf.is_config(cfg) else OmegaConf.create(cfg)
    resolved = _resolved_leniently(config)
    masked = mask_secrets(resolved)
    secrets = sorted(set(_masked_strings(resolved, masked)), key=len, reverse=True)
    return OmegaConf.to_yaml(_without_secrets(masked, secrets))


def _resolved_leniently(node: DictConfig | ListConfig) -> dict | list:
    """`node` as plain data, each value resolved on its own; one that fails to resolve stays as written."""
    raw = OmegaConf.to_container(node, resolve=False)
    keys = list(node.keys()) if isinstance(node, DictConfig) else list(range(len(node)))
    values = [_resolved_value(node, key, raw[key]) for key in keys]
    return dict(zip(keys, values, strict=True)) if isinstance(node, DictConfig) else values


def _resolved_value(node: DictConfig | ListConfig, key: Any, raw: Any) -> Any:
    """`node[key]` resolved; a value that interpolates a secret-named key is masked whole here already,
    since the key it ends up under (`X-Auth`, say) need not look secret to `mask_secrets`."""
    try:
        value = node[key]
    except OmegaConfBaseException:
        return raw
    if OmegaConf.is_config(value):
        return _resolved_leniently(value)
    secret = next(
        (name for name in _INTERPOLATED_KEY.findall(str(raw)) if _is_secret_key(name.rsplit(".", 1)[-1])),
        None,
    )
    return value if secret is None else _masked(value, under_secret_key=True, key=secret)


def _masked_strings(plain: Any, masked: Any) -> Iterator[str]:
    """The strings of `plain` that masking replaced: the secret values themselves."""
    if isinstance(plain, dict) and isinstance(masked, dict):
        for key, value in plain.items():
            yield from _masked_strings(value, masked.get(key))
    elif isinstance(plain, list) and isinstance(masked, list):
        for value, masked_value in zip(plain, masked, strict=False):
            yield from _masked_strings(value, masked_value)
    elif isinstance(plain, str) and masked == MASKED_VALUE and len(plain) >= MIN_SCRUBBED_SECRET_CHARS:
        yield plain


def _without_secrets(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, dict):
        return {key: _without_secrets(child, secrets) for key, child in value.items()}
    if isinstance(value, list):
        return [_without_secrets(child, secrets) for child in value]
    if isinstance(value, str):
        for secret in secrets:
            value = value.replace(secret, MASKED_VALUE)
    return value
