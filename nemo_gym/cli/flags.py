"""Friendly command-line flags as shorthands for `++key=value` overrides.

Every command takes its settings from the merged config, so a flag is only another spelling of an
override: `-o out.jsonl` is `++output_jsonl_fpath=out.jsonl`. Arguments that are not flags (`+key=value`)
pass through unchanged.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from nemo_gym.config_types import ConfigError

PLAIN_VALUE = re.compile(r"[\w./:@+-]*")


def override_value(value: str) -> str:
    """A value as a Hydra override token: quoted unless it is plainly a word, number or path."""
    if PLAIN_VALUE.fullmatch(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class FlagSet:
    """The flags of one command.

    `values` flags take a value and may set several keys at once; `switches` set a key to true (or to the
    value given as `--flag=value`); `lists` may be repeated, their values collected into one list key.
    """

    command: str
    values: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)
    switches: Mapping[str, str] = field(default_factory=dict)
    lists: Mapping[str, str] = field(default_factory=dict)

    def to_overrides(self, args: Sequence[str]) -> list[str]:
        overrides: list[str] = []
        listed: dict[str, list[str]] = {}
        remaining = list(args)
        while remaining:
            arg = remaining.pop(0)
            if not arg.startswith("-"):
                overrides.append(arg)
                continue
            flag, has_value, value = arg.partition("=")
            if flag in self.switches:
                overrides.append(f"++{self.switches[flag]}={value if has_value else 'true'}")
                continue
            if flag not in self.values and flag not in self.lists:
                raise ConfigError(f"{self.command}: unknown option {flag}{self._suggestion(flag)}")
            if not has_value:
                if not remaining:
                    raise ConfigError(f"{self.command}: {flag} needs a value, e.g. {flag} <value>")
                value = remaining.pop(0)
            if flag in self.lists:
                listed.setdefault(self.lists[flag], []).append(override_value(value))
                continue
            keys = self.values[flag]
            for key in (keys,) if isinstance(keys, str) else keys:
                overrides.append(f"++{key}={override_value(value)}")
        overrides += [f"++{key}=[{','.join(values)}]" for key, values in listed.items()]
        return overrides

    def help_lines(self) -> list[str]:
        lines = []
        for flag, keys in self.values.items():
            spelled = " ".join(f"++{key}=<value>" for key in ((keys,) if isinstance(keys, str) else keys))
            lines.append(f"  {flag:<20} {spelled}")
        lines += [f"  {flag:<20} ++{key}=true" for flag, key in self.switches.items()]
        lines += [f"  {flag:<20} ++{key}=[<value>, ...] (repeatable)" for flag, key in self.lists.items()]
        return lines

    def _suggestion(self, flag: str) -> str:
        known = [*self.values, *self.switches, *self.lists]
        close = difflib.get_close_matches(flag, known, n=1)
        return f"; did you mean {close[0]}?" if close else f"; known flags: {' '.join(known)}"
