"""Command-line flags, parsed with argparse, as the friendly spelling of `++key=value` overrides.

Every command takes its settings from the merged config, so most flags are only another spelling of an
override: `-o out.jsonl` is `++output_jsonl_fpath=out.jsonl`. Arguments that start with `+` are Hydra
overrides and pass through unchanged. `--config` and the asset selectors (`--resources-server mcqa`) add
files to `config_paths`; all of them, and any `+config_paths=[...]` of the user, become one token, as in
NeMo Gym. A flag without an override key is an option of the command itself (`--storage`, `--json`).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nemo_gym.config import server_kinds
from nemo_gym.config.errors import ConfigError

PLAIN_VALUE = re.compile(r"[\w./:@+-]*")
CONFIG_PATHS_OVERRIDE = re.compile(r"^\+{1,2}config_paths=")
BACKSLASHES_BEFORE_QUOTE = re.compile(r"(\\+)(?='|\Z)")
HELP_OVERRIDE = re.compile(r"^(\+{1,2}(h|help)=(true|True)|-h|--help)$")
OVERRIDES_EPILOG = (
    "Any setting can also be given as an override after the flags: +key=value adds a key, ++key=value\n"
    "adds or replaces it (dotted keys reach into server blocks, e.g. ++policy_model.port=9000)."
)

FlagKind = Literal["value", "switch", "list"]


class UsageError(Exception):
    """A command line that does not parse: one line, exit code 2."""


def override_value(value: str, always_quote: bool = False) -> str:
    """A value as a Hydra override token: quoted unless it is plainly a word, number or path (or always,
    for text that must not be read as a number: version `1.10` is not 1.1)."""
    if PLAIN_VALUE.fullmatch(value) and not always_quote:
        return value
    # Hydra reads a backslash as an escape only before a quote or the closing quote: double only those.
    escaped = BACKSLASHES_BEFORE_QUOTE.sub(r"\1\1", value)
    return "'" + escaped.replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Flag:
    """One flag: `keys` are the overrides its value sets (none: an option of the command itself)."""

    names: tuple[str, ...]
    help: str
    keys: tuple[str, ...] = ()
    kind: FlagKind = "value"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    text: bool = False  # the value stays a string even when it looks like a number

    @property
    def dest(self) -> str:
        return max(self.names, key=len).lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.kind == "switch":
            parser.add_argument(*self.names, dest=self.dest, action="store_true", help=self.help)
            return
        parser.add_argument(
            *self.names,
            dest=self.dest,
            action="append" if self.kind == "list" else "store",
            metavar=self.metavar or self.dest.upper(),
            choices=self.choices,
            help=self.help,
        )


def value(*names: str, key: str | tuple[str, ...] = (), help: str, **kwargs: Any) -> Flag:
    return Flag(names, help, (key,) if isinstance(key, str) else key, "value", **kwargs)


def switch(*names: str, key: str | tuple[str, ...] = (), help: str) -> Flag:
    return Flag(names, help, (key,) if isinstance(key, str) else key, "switch")


def repeated(*names: str, key: str | tuple[str, ...] = (), help: str, **kwargs: Any) -> Flag:
    return Flag(names, help, (key,) if isinstance(key, str) else key, "list", **kwargs)


VERBOSE = switch("-v", "--verbose", key="verbose", help="debug logging in every process (++verbose=true)")
CONFIG = repeated("--config", metavar="FILE", help="a config file to load (repeatable; adds to config_paths)")
SEARCH_DIR = repeated(
    "--search-dir", metavar="DIR", help="another folder to look for selected servers and benchmarks in"
)
RESOURCES_SERVER = repeated(
    "--resources-server",
    metavar="NAME[/FLAVOR]",
    help="load resources_servers/NAME/configs/(FLAVOR|NAME).yaml (repeatable)",
)
MODEL_TYPE = value(
    "--model-type", metavar="NAME[/FLAVOR]", help="load responses_api_models/NAME/configs/(FLAVOR|NAME).yaml"
)
AGENT_TYPE = value(
    "--agent-type",
    metavar="NAME[/FLAVOR]",
    help="run every environment with this agent: load responses_api_agents/NAME/configs/(FLAVOR|NAME).yaml",
)
ALLOW_UNSUPPORTED_PAIRING = switch(
    "--allow-unsupported-pairing",
    key="allow_unsupported_pairing",
    help="run agents and model servers with environments whose allowed_agents / allowed_model_types omit them",
)
BENCHMARK = repeated(
    "--benchmark", metavar="NAME[/FLAVOR]", help="load benchmarks/NAME/(FLAVOR|config).yaml (repeatable)"
)
ENVIRONMENT = repeated(
    "--environment", metavar="NAME[/FLAVOR]", help="load environments/NAME/(FLAVOR|config).yaml (repeatable)"
)
MODEL_FLAGS = (
    value("-m", "--model", key="policy_model_name", help="the policy model's name (policy_model_name)"),
    value("--model-url", key="policy_base_url", metavar="URL", help="its endpoint, ending in /v1 (policy_base_url)"),
    value("--model-api-key", key="policy_api_key", metavar="KEY", help="its API key (policy_api_key; never shown)"),
)  # fmt: skip
# What selects a deployment: files, servers by folder name, and the policy model.
DEPLOYMENT_FLAGS = (
    CONFIG, RESOURCES_SERVER, ENVIRONMENT, BENCHMARK, MODEL_TYPE, AGENT_TYPE, ALLOW_UNSUPPORTED_PAIRING, SEARCH_DIR,
    *MODEL_FLAGS,
)  # fmt: skip
# The selectors: each value names a folder of that kind whose config joins config_paths.
SELECTOR_KINDS = {
    RESOURCES_SERVER: server_kinds.RESOURCES.key,
    ENVIRONMENT: "environments",
    BENCHMARK: "benchmarks",
    MODEL_TYPE: server_kinds.MODEL.key,
    AGENT_TYPE: server_kinds.AGENT.key,
}


@dataclass(frozen=True)
class Invocation:
    """A parsed command line: the overrides for the config, and the command's own options."""

    overrides: list[str]
    options: dict[str, Any] = field(default_factory=dict)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


@dataclass(frozen=True)
class Command:
    """A leaf of the `gym` command tree: its flags, help, and what runs it."""

    name: str
    summary: str
    run: Callable[[Invocation], int]
    flags: tuple[Flag, ...] = ()
    details: Callable[[Sequence[str]], str] | None = None
    # (name, help) of one optional positional argument, or (name, help, "*") for any number of them
    positional: tuple[str, str] | tuple[str, str, str] | None = None
    # Flags defined beside the command's work, imported only when this command runs (`gym -h` stays quick).
    more_flags: Callable[[], tuple[Flag, ...]] | None = None

    @property
    def all_flags(self) -> tuple[Flag, ...]:
        return (*self.flags, *(self.more_flags() if self.more_flags else ()))

    def parser(self, args: Sequence[str] = (), detailed: bool = False) -> argparse.ArgumentParser:
        """`detailed`: with the settings table of the command in the epilog (imports its settings model)."""
        details = self.details(args) if detailed and self.details else ""
        epilog = "\n\n".join(part for part in (details, OVERRIDES_EPILOG) if part)
        parser = _Parser(
            prog=f"gym {self.name}",
            description=self.summary,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
        )
        if self.positional is not None:
            nargs = self.positional[2] if len(self.positional) > 2 else "?"
            parser.add_argument(self.positional[0], nargs=nargs, help=self.positional[1])
        for flag in (*self.all_flags, VERBOSE):
            flag.add_to(parser)
        return parser

    def help_text(self, args: Sequence[str] = ()) -> str:
        return self.parser(args, detailed=True).format_help()

    def parse(self, args: Sequence[str]) -> Invocation:
        """The flags turned into overrides (before the user's own, so those win), other options apart."""
        parser = self.parser(args)
        namespace, extras = parser.parse_known_args(list(args))
        user_overrides = [self._checked_extra(arg, parser) for arg in extras]
        parsed = vars(namespace)
        if self.positional is not None and str(parsed.get(self.positional[0]) or "").startswith("+"):
            user_overrides.insert(0, parsed.pop(self.positional[0]))  # an override, not the argument
        overrides: list[str] = []
        for flag in (*self.all_flags, VERBOSE):
            given = parsed.get(flag.dest)
            if not flag.keys:
                continue
            if flag.kind == "switch":
                overrides += [f"++{key}=true" for key in flag.keys] if given else []
            elif given is not None:
                token = override_value(given, always_quote=True) if flag.text else _as_override_value(given)
                overrides += [f"++{key}={token}" for key in flag.keys]
        selectors = [flag for flag in self.all_flags if flag in SELECTOR_KINDS]
        config_paths = [*(parsed.get("config") or []), *_selected_configs(selectors, parsed)]
        return Invocation(with_config_paths(user_overrides, config_paths, before=overrides), parsed)

    def _checked_extra(self, arg: str, parser: argparse.ArgumentParser) -> str:
        if arg.startswith("+"):
            return arg
        if arg.startswith("-"):
            flag = arg.partition("=")[0]
            known = [name for action in parser._actions for name in action.option_strings]
            close = difflib.get_close_matches(flag, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; see gym {self.name} -h"
            raise UsageError(f"gym {self.name}: unknown option {flag}{hint}")
        if "=" in arg:
            from nemo_gym.config.overrides import displayed_override

            shown = displayed_override(arg)  # a secret value is never echoed
            raise UsageError(
                f"gym {self.name}: '{shown}' is not an override; write +{shown} (add) or ++{shown} (add or replace)"
            )
        hint = f"; to load it as a config write --config {arg}" if arg.endswith((".yaml", ".yml")) else ""
        raise UsageError(f"gym {self.name}: unexpected argument '{arg}'{hint} (see gym {self.name} -h)")


def _as_override_value(given: Any) -> str:
    if isinstance(given, list):
        return "[" + ",".join(override_value(str(item)) for item in given) + "]"
    return override_value(str(given))


def _selected_configs(selectors: list[Flag], parsed: dict[str, Any]) -> list[str]:
    from nemo_gym.cli.selectors import selected_config

    paths: list[str] = []
    for flag in selectors:
        given = parsed.get(flag.dest)
        for spec in given if isinstance(given, list) else [given] if given else []:
            paths.append(str(selected_config(SELECTOR_KINDS[flag], spec, parsed.get("search_dir") or [])))
    return paths


def with_config_paths(overrides: list[str], paths: list[str], before: Sequence[str] = ()) -> list[str]:
    """`overrides` with one `+config_paths=[...]` token first: the user's own entries, then `paths`;
    `before` goes between it and the rest (flags first, so the user's own overrides win)."""
    merged = list(dict.fromkeys([*_user_config_paths(overrides), *paths]))
    token = ["+config_paths=[" + ",".join(override_value(path) for path in merged) + "]"] if merged else []
    return [*token, *before, *(arg for arg in overrides if not CONFIG_PATHS_OVERRIDE.match(arg))]


def _user_config_paths(overrides: list[str]) -> list[str]:
    tokens = [token for token in overrides if CONFIG_PATHS_OVERRIDE.match(token)]
    if not tokens:
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    paths: list[str] = []
    parser = OverridesParser.create()
    for token in tokens:
        try:
            given = parser.parse_override(token).value()
        except HydraException as error:
            raise ConfigError(
                f"Cannot parse override '{token}': {str(error).strip().splitlines()[0]}"
            ) from error
        if not isinstance(given, list) or not all(isinstance(entry, str) for entry in given):
            raise ConfigError(
                f"config_paths must be a list of file paths, e.g. +config_paths=[a.yaml]; got {token}"
            )
        paths += given
    return paths


def help_requested(overrides: Sequence[str]) -> bool:
    """-h / --help, or NeMo Gym's legacy spelling of it: `+h=true` or `+help=true`."""
    return any(HELP_OVERRIDE.match(token) for token in overrides)
