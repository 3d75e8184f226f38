"""Import boundaries, checked on the source (AST, no imports run).

The core never imports a server folder, and a server folder imports only the standard library, third-party
packages, nemo_gym and its own modules, package-qualified: so any set of folders can be co-hosted in one
process (a bare `grading` of two folders would share one `sys.modules` entry) and each folder can be copied
alone. Test code of a folder may also use the repository's `tests` package (helpers, scripted upstream).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER_KINDS = ("resources_servers", "responses_api_agents", "responses_api_models")
# Re-exports core names under the path environments written for NeMo Gym import them from.
SHARED_SHIM = "resources_servers.gymnasium"
REPO_TESTS = "tests"


def python_files(folder: Path) -> Iterator[Path]:
    return (path for path in sorted(folder.rglob("*.py")) if "__pycache__" not in path.parts)


def imported_modules(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, dotted module, relative level) of every import statement, wherever it sits in the file."""
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, 0
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and module in SERVER_KINDS:  # `from resources_servers import x`
                for alias in node.names:
                    yield node.lineno, f"{module}.{alias.name}", 0
            else:
                yield node.lineno, module, node.level


def local_module_names(directory: Path) -> set[str]:
    """What a bare import would find in `directory` if it were on sys.path (as when app.py runs there)."""
    modules = {path.stem for path in directory.glob("*.py") if path.stem != "__init__"}
    packages = {path.name for path in directory.iterdir() if (path / "__init__.py").is_file()}
    return modules | packages


def is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def server_folder_violations(root: Path, folder: Path) -> list[str]:
    package = ".".join(folder.relative_to(root).parts)
    problems = []
    for path in python_files(folder):
        inside = path.relative_to(folder)
        is_test_code = REPO_TESTS in inside.parts[:-1] or path.name == "conftest.py"
        bare_local = local_module_names(folder) | local_module_names(path.parent)
        for line, module, level in sorted(imported_modules(path)):
            top = module.split(".")[0]
            where = f"{path.relative_to(root)}:{line}: "
            if level:
                problems.append(f"{where}relative import `{'.' * level}{module}`; write it from `{package}`")
            elif top in SERVER_KINDS:
                if not (is_within(module, package) or is_within(module, SHARED_SHIM)):
                    problems.append(f"{where}`{module}` is another server folder")
            elif top == REPO_TESTS:
                if not is_test_code:
                    problems.append(f"{where}`{module}`: only test code may use the repository's tests")
            elif top in bare_local:
                problems.append(f"{where}bare `{module}`; write `{package}.{module}`")
    return problems


def core_violations(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}:{line}: the core imports `{module}`"
        for path in python_files(root / "nemo_gym")
        for line, module, level in imported_modules(path)
        if level == 0 and module.split(".")[0] in SERVER_KINDS
    ]


def server_folders(root: Path) -> list[Path]:
    return [
        folder
        for kind in SERVER_KINDS
        for folder in sorted((root / kind).iterdir())
        if folder.is_dir() and folder.name != "__pycache__"
    ]


def test_the_core_never_imports_a_server_folder():
    assert core_violations(ROOT) == []


@pytest.mark.parametrize(
    "folder", server_folders(ROOT), ids=lambda folder: f"{folder.parent.name}/{folder.name}"
)
def test_a_server_folder_imports_only_the_core_and_itself(folder):
    assert server_folder_violations(ROOT, folder) == []


def test_the_checks_catch_each_kind_of_violation(tmp_path):
    """Each rule reports what breaks it (and nothing else), so a passing run above means something."""
    env = tmp_path / "resources_servers" / "demo"
    (env / "tests").mkdir(parents=True)
    (tmp_path / "nemo_gym").mkdir()
    (tmp_path / "nemo_gym" / "core.py").write_text("import json\nfrom responses_api_agents.x.app import A\n")
    (env / "grading.py").write_text("")
    (env / "app.py").write_text(
        "import re\n"
        "import nemo_gym.errors\n"
        "from resources_servers.demo.grading import g\n"
        "from resources_servers.gymnasium import GymnasiumServer\n"
        "from grading import g\n"
        "from . import grading\n"
        "from responses_api_agents.simple_agent.app import SimpleAgent\n"
        "from resources_servers import other\n"
        "def late():\n"
        "    import tests.helpers\n"
    )
    (env / "tests" / "test_app.py").write_text("from tests.helpers import run_instance\nfrom app import x\n")
    assert core_violations(tmp_path) == ["nemo_gym/core.py:2: the core imports `responses_api_agents.x.app`"]
    assert server_folder_violations(tmp_path, env) == [
        "resources_servers/demo/app.py:5: bare `grading`; write `resources_servers.demo.grading`",
        "resources_servers/demo/app.py:6: relative import `.`; write it from `resources_servers.demo`",
        "resources_servers/demo/app.py:7: `responses_api_agents.simple_agent.app` is another server folder",
        "resources_servers/demo/app.py:8: `resources_servers.other` is another server folder",
        "resources_servers/demo/app.py:10: `tests.helpers`: only test code may use the repository's tests",
        "resources_servers/demo/tests/test_app.py:2: bare `app`; write `resources_servers.demo.app`",
    ]
