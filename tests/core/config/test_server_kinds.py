"""The server kinds are declared once (nemo_gym/config/server_kinds.py) and every consumer agrees with it.

The registry is closed (a new kind also needs its config classes), so instead of registering a plugin kind
this checks, kind by kind, what config discovery, `gym list` and the reference types make of it. Servers take
their metrics and tracing label from `server_kinds.server_type_of`.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.config import server_kinds, server_refs
from nemo_gym.config.server_kinds import SERVER_KINDS, SERVER_TYPES, ServerKind
from nemo_gym.config_types import SERVER_TYPES as COMPAT_SERVER_TYPES
from nemo_gym.global_config import find_server_instances
from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "nemo_gym"
# Where a kind's name may still be written out. The registry itself, and server_refs, whose `Literal[...]`
# reference types must spell the name for type checkers (test_reference_types_match_the_registry keeps them
# in step).
ALLOWED = {PACKAGE / "config" / "server_kinds.py", PACKAGE / "config" / "server_refs.py"}


def spelled_out_kinds(path: Path) -> list[str]:
    """`path:line 'kind'` for each string constant in the module that is exactly a kind's name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.name}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in SERVER_TYPES
    ]


def test_kind_names_are_written_only_in_the_registry() -> None:
    found = [
        f"{path.parent.relative_to(REPO_ROOT)}/{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in ALLOWED
        for hit in spelled_out_kinds(path)
    ]
    assert found == [], "use nemo_gym.config.server_kinds instead of spelling a kind out:\n" + "\n".join(
        found
    )


def test_the_scan_sees_a_spelled_out_kind(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(f"KIND = {SERVER_TYPES[0]!r}\nPATH = f'{SERVER_TYPES[0]}/{{name}}'\n")
    assert spelled_out_kinds(module) == [f"module.py:1 {SERVER_TYPES[0]!r}"]


def test_server_types_stays_importable_from_its_nemo_gym_paths() -> None:
    assert COMPAT_SERVER_TYPES == server_refs.SERVER_TYPES == tuple(kind.key for kind in SERVER_KINDS)
    assert len({kind.key for kind in SERVER_KINDS}) == len({kind.listing for kind in SERVER_KINDS}) == 4


def test_reference_types_match_the_registry() -> None:
    literal_types = (
        server_refs.ModelServerType,
        server_refs.ResourcesServerType,
        server_refs.AgentServerType,
        server_refs.EnvironmentServerType,
    )
    assert tuple(typing.get_args(literal)[0] for literal in literal_types) == SERVER_TYPES


def test_discovery_and_the_registry_give_each_instance_its_kind() -> None:
    names = [f"{kind.key}_instance" for kind in SERVER_KINDS]
    # `domain` is required of resources servers only; the other kinds accept and ignore it
    blocks = [{kind.key: {"impl": {"entrypoint": "app.py", "domain": "other"}}} for kind in SERVER_KINDS]
    cfg = OmegaConf.create(dict(zip(names, blocks, strict=True)))
    instances = find_server_instances(cfg)
    assert [(instance.name, instance.SERVER_TYPE) for instance in instances] == list(
        zip(names, SERVER_TYPES, strict=True)
    )
    assert [server_kinds.server_type_of(cfg[name]) for name in names] == list(SERVER_TYPES)


@pytest.mark.parametrize("kind", SERVER_KINDS, ids=lambda kind: kind.key)
def test_gym_list_names_every_folder_of_the_kind(kind: ServerKind, tmp_path: Path) -> None:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "gym"), "list", kind.listing],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()}
    folders = {folder.name for folder in (REPO_ROOT / kind.key).iterdir() if (folder / "configs").is_dir()}
    assert folders and folders <= listed
