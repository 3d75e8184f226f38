"""Command-line overrides in Hydra's grammar: `+a.b=1` adds a key, `++a.b=1` adds or replaces one."""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from nemo_gym.config.errors import ConfigError, first_line
from nemo_gym.config.masking import is_header_map, is_secret_key
from nemo_gym.text.redaction import MASKED_VALUE, without_url_passwords


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
    if equals and is_secret_key(name, header=bool(parents) and is_header_map(parents[-1])):
        return f"{key}={MASKED_VALUE}"
    return without_url_passwords(token)


def _parsed_override(parser: OverridesParser, token: str) -> Override:
    try:
        override = parser.parse_override(token)
    except HydraException as error:
        message = first_line(error) if displayed_override(token) == token else "invalid syntax"
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
