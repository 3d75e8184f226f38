"""Settings that were renamed: a config class names its old keys, and configs written with them keep working.

One mechanism for every rename (`grading_timeout_seconds` -> `grading_timeout_s`, `max_retries` ->
`max_attempts`, ...): a `before` validator moves an old key onto its current name, and the unknown-key check
of server configs (`config.server_instances.unknown_setting`) accepts the old names. Giving both names is an
error rather than a silent pick. Unlike a pydantic alias, the mapping survives a subclass that only
changes the field's default. A subclass's `OLD_KEY_NAMES` adds to its bases' (an environment naming its
own old key for a base setting keeps the base's old keys).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, model_validator


class AcceptsOldKeyNames(BaseModel):
    """Mixin: `OLD_KEY_NAMES` maps each old key to the field that now reads it."""

    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _move_old_key_names(cls, data: Any) -> Any:
        renames = all_old_key_names(cls)
        if not isinstance(data, dict) or not renames.keys() & data.keys():
            return data
        data = dict(data)
        for old, current in renames.items():
            if old not in data:
                continue
            if current in data:
                raise ValueError(f"'{old}' and '{current}' name the same setting; keep only '{current}'")
            data[current] = data.pop(old)
        return data


def all_old_key_names(config_class: type[BaseModel]) -> dict[str, str]:
    """Old key -> current field for `config_class`: the `OLD_KEY_NAMES` of it and of every base class."""
    renames: dict[str, str] = {}
    for klass in reversed(config_class.__mro__):
        renames.update(vars(klass).get("OLD_KEY_NAMES", {}))
    return renames


def old_key_names(config_class: type[BaseModel]) -> set[str]:
    """The old keys `config_class` still reads."""
    return set(all_old_key_names(config_class))
