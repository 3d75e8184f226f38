"""Every name NeMo Gym's folders and trainers import from the modules of the trainer and folder API is
importable here, at NeMo Gym's path. The names come from the compatibility reference
(shared/reference/nemo-gym-0.7.md §1.1, the table of the most imported names, and §1.4, what NeMo RL
imports), read as it stands, so a name added there is checked at once."""

from __future__ import annotations

import importlib
import re
import warnings
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

REFERENCE = REPO_ROOT.parent / "shared" / "reference" / "nemo-gym-0.7.md"
# The modules of the trainer and folder API (issue 26). The others of the table (sandbox, judge,
# observability, episode protocol, ...) come with the issues that bring their behaviour.
MODULES = (
    "nemo_gym",
    "nemo_gym.cli",
    "nemo_gym.server_utils",
    "nemo_gym.global_config",
    "nemo_gym.config_types",
    "nemo_gym.base_resources_server",
    "nemo_gym.base_responses_api_agent",
    "nemo_gym.base_responses_api_model",
    "nemo_gym.reward_profile",
    "nemo_gym.prompt",
    "nemo_gym.rollout_collection",
    "nemo_gym.openai_utils",
)
# What NeMo RL imports (reference §1.4), checked even if the table should change.
TRAINER_IMPORTS = (
    ("nemo_gym.cli", "GlobalConfigDictParserConfig"),
    ("nemo_gym.cli", "RunHelper"),
    ("nemo_gym.rollout_collection", "RolloutCollectionHelper"),
    ("nemo_gym.server_utils", "HEAD_SERVER_KEY_NAME"),
    ("nemo_gym.server_utils", "BaseServerConfig"),
)
_ROW = re.compile(r"^\| `(nemo_gym[\w.]*)` \| (.+?) \|")
_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


def reference_names() -> list[tuple[str, str]]:
    """(module, name) for every row of the §1.1 table whose module is in MODULES."""
    section = REFERENCE.read_text().split("### 1.1", 1)[1].split("### 1.2", 1)[0]
    pairs = []
    for line in section.splitlines():
        row = _ROW.match(line)
        if row and row[1] in MODULES:
            pairs += [(row[1], name) for name in _NAME.findall(row[2])]
    return pairs


@pytest.fixture(scope="module")
def table() -> list[tuple[str, str]]:
    if not REFERENCE.is_file():
        pytest.fail(f"The compatibility reference is missing: {REFERENCE}")
    return reference_names()


def test_the_table_is_read(table: list[tuple[str, str]]) -> None:
    assert ("nemo_gym.server_utils", "SESSION_ID_KEY") in table
    assert ("nemo_gym.reward_profile", "compute_pass_majority_metrics") in table
    assert len(table) > 60


def test_every_name_of_the_table_is_importable_from_its_nemo_gym_module(table: list[tuple[str, str]]) -> None:
    missing = []
    for module, name in [*table, *TRAINER_IMPORTS]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # nemo_gym.cli's moved names warn, as in 0.7
            if not hasattr(importlib.import_module(module), name):
                missing.append(f"{module}.{name}")
    assert not missing, f"not importable at NeMo Gym's path: {missing}"


def test_the_package_root_has_nemo_gyms_paths() -> None:
    import nemo_gym

    assert nemo_gym.PARENT_DIR == Path(nemo_gym.__file__).resolve().parents[1]
    assert (nemo_gym.PARENT_DIR / "resources_servers").is_dir()
    assert nemo_gym.CACHE_DIR == nemo_gym.WORKING_DIR / "cache"
    assert (
        nemo_gym.SimpleResourcesServer
        is importlib.import_module("nemo_gym.base_resources_server").SimpleResourcesServer
    )
