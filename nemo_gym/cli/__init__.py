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
    "GlobalConfigDictParserConfig": ("nemo_gym.global_config", "GlobalConfigDictParserConfig"),
    "run": ("nemo_gym.cli.main", "ng_run"),
    "test": ("nemo_gym.cli.main", "ng_test"),
    "test_all": ("nemo_gym.cli.main", "ng_test_all"),
    "init_resources_server": ("nemo_gym.cli.main", "ng_init_resources_server"),
    "dump_config": ("nemo_gym.cli.main", "ng_dump_config"),
    "status": ("nemo_gym.cli.main", "ng_status"),
    "version": ("nemo_gym.cli.main", "ng_version"),
    "e2e_rollout_collection": ("nemo_gym.cli.main", "ng_e2e_collect_rollouts"),
}


def __getattr__(name: str) -> Any:
    if name not in _MOVED_NAMES:
        raise AttributeError(f"module 'nemo_gym.cli' has no attribute {name!r}")
    module, attribute = _MOVED_NAMES[name]
    warnings.warn(
        f"'from nemo_gym.cli import {name}' is deprecated (as in NeMo Gym 0.7); use {module}.{attribute}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), attribute)
