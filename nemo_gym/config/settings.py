"""Top-level settings of a merged config, read one key at a time: a command's arguments, a credential, a
data file named by a key. A bad or unresolvable value is a one-line ConfigError naming the key and the fix."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from nemo_gym.config.errors import ConfigError, first_line
from nemo_gym.config.sources import install_root, located_file
from nemo_gym.wire.validation_errors import describe_problem, dotted_location

SettingsT = TypeVar("SettingsT", bound=BaseModel)


def top_level_setting(cfg: DictConfig, key: str, default: Any) -> Any:
    """A top-level value with interpolations resolved; one that cannot be resolved is a config error."""
    if key not in cfg:
        return default
    try:
        value = cfg[key]
    except OmegaConfBaseException as error:
        raise ConfigError(f"Cannot resolve top-level key '{key}': {first_line(error)}") from error
    return default if value is None else value


def command_settings(
    model: type[SettingsT], cfg: DictConfig, fallbacks: Mapping[str, Any] | None = None
) -> SettingsT:
    """The top-level keys `model` declares, resolved and validated; a bad value names its key and the fix.

    `fallbacks` supply keys the config leaves unset (a token from the environment, say). `+h=true` /
    `+help=true` reach the model too, so a command's config model can print its own help."""
    values = {key: True for key in ("h", "help") if top_level_setting(cfg, key, None)}
    for key in model.model_fields:
        value = top_level_setting(cfg, key, None)
        if value is None and fallbacks:
            value = fallbacks.get(key)
        if value is not None:
            values[key] = (
                OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value
            )
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise ConfigError(top_level_problem(error, model.__name__)) from error


def top_level_problem(error: ValidationError, model_name: str) -> str:
    """`Top-level key 'k': <problem> (got <value>); set it with ++k=<value>` for the first problem: one
    line, since a user fixes one key at a time. A problem between keys (a model-level check) has no one
    key to name: its own message, which names the keys, is the line."""
    problem = error.errors()[0]
    key = dotted_location(problem["loc"])
    if not key:
        return describe_problem(problem, root=model_name)
    described = describe_problem(problem, relocate=lambda _location: (f"'{key}'",))
    got = f" (got {problem['input']!r})" if problem["type"] != "missing" else ""
    return f"Top-level key {described}{got}; set it with ++{key}=<value>"


def secret_setting(cfg: DictConfig, key: str, env_var: str) -> str | None:
    """A credential from the config (env.yaml or an override) or else from an environment variable; the
    variable is the safer place, since command lines show up in process lists and shell history."""
    value = top_level_setting(cfg, key, None)
    return str(value) if value else os.environ.get(env_var) or None


def locate_data_file(path: str, key: str, cwd: Path | None = None) -> Path:
    """A data file named by config key `key`: relative paths are tried in the current directory, then in
    the install root (where the shipped example data lives)."""
    return located_file(path, cwd or Path.cwd(), install_root(), f"{key}: file '{path}'")
