"""The `gym` command line (`nemo_gym.cli.main`).

NeMo Gym trainers import `RunHelper` and `GlobalConfigDictParserConfig` from here; NeMo Gym 0.7 keeps
those names, and its old console functions, importable from this package with a DeprecationWarning that
names their home. Importing them is lazy, so `gym -h` stays instant.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

# name -> (module, attribute): where each name NeMo Gym still serves from `nemo_gym.cli` lives here.
_MOVED_NAMES = {
    "RunHelper": ("nemo_gym.cli.env", "RunHelper"),
    "GlobalConfigDictParserConfig": ("nemo_gym.config.global_config", "GlobalConfigDictParserConfig"),
}
# name -> the `ng_<script>` whose console function it is.
_CONSOLE_FUNCTIONS = {
    "run": "run",
    "test": "test",
    "test_all": "test_all",
    "init_resources_server": "init_resources_server",
    "dump_config": "dump_config",
    "status": "status",
    "version": "version",
    "e2e_rollout_collection": "e2e_collect_rollouts",
}


def __getattr__(name: str) -> Any:
    if name in _CONSOLE_FUNCTIONS:
        main = importlib.import_module("nemo_gym.cli.main")
        command = " ".join(main.LEGACY_COMMANDS[_CONSOLE_FUNCTIONS[name]])
        _warn_moved(name, f"the `gym {command}` command")
        return main.legacy_entry(_CONSOLE_FUNCTIONS[name])
    if name not in _MOVED_NAMES:
        raise AttributeError(f"module 'nemo_gym.cli' has no attribute {name!r}")
    module, attribute = _MOVED_NAMES[name]
    _warn_moved(name, f"{module}.{attribute}")
    return getattr(importlib.import_module(module), attribute)


def _warn_moved(name: str, replacement: str) -> None:
    warnings.warn(
        f"'from nemo_gym.cli import {name}' is deprecated (as in NeMo Gym 0.7); use {replacement}",
        DeprecationWarning,
        stacklevel=3,
    )
