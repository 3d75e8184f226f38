"""The size limits issue 19 set, kept: small core modules, and environments that are mostly their own logic
because the kit (docs/architecture.md) carries the rest. An environment's size is its folder's code (every
Python file outside tests/), so moving code from app.py into a sibling file does not make it smaller."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_CORE_MODULE_LINES = 500
# The environments shipped before the catalog grew, and the most lines each folder's code may have: its
# size on 2026-11-28, rounded up to ten. A folder that needs more is a sign the kit lacks something.
FIRST_ENVIRONMENTS = {
    "example_single_tool_call": 50,
    "equivalence_rule": 120,
    "example_session_state_mgmt": 80,
    "reasoning_gym": 350,  # 170 of them its data generator (scripts/generate_data.py)
    "xlam_fc": 110,
    "example_multi_step": 130,
    "mcqa": 210,
    "example_tool_call_multireward": 150,
    "workplace_assistant": 840,  # 700 of them the simulated workplace (workspace.py)
    "math_advanced_calculations": 170,
    "math_with_judge": 280,
}


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_core_module_is_over_500_lines():
    too_long = {
        str(path.relative_to(ROOT)): line_count(path)
        for path in (ROOT / "nemo_gym").rglob("*.py")
        if line_count(path) > MAX_CORE_MODULE_LINES
    }
    assert too_long == {}


def folder_code_lines(folder: Path) -> int:
    return sum(
        line_count(path) for path in folder.rglob("*.py") if "tests" not in path.relative_to(folder).parts
    )


def test_the_first_environments_stay_small():
    too_big = {
        name: lines
        for name, most in FIRST_ENVIRONMENTS.items()
        if (lines := folder_code_lines(ROOT / "resources_servers" / name)) > most
    }
    assert too_big == {}


def core_packages(root: Path) -> dict[str, set[str]]:
    """Each package of nemo_gym/ and the names of its modules and subpackages."""
    return {
        package.name: {path.stem for path in package.glob("*.py") if path.stem != "__init__"}
        | {path.name for path in package.iterdir() if (path / "__init__.py").is_file()}
        for package in sorted((root / "nemo_gym").iterdir())
        if (package / "__init__.py").is_file()
    }


def misplaced_tests(root: Path) -> list[str]:
    """Tests mirror the package layout: tests/core/<package>/test_<module>[_<aspect>].py for a module of
    nemo_gym/<package>/, and no test at the top of tests/ named after a module that lives in a package.
    (Under tests/core/, since a script run from tests/ would otherwise find tests/http/ for `import http`.)"""
    packages = core_packages(root)
    problems = []
    for package, modules in packages.items():
        for test in sorted((root / "tests" / "core" / package).glob("test_*.py")):
            name = test.stem.removeprefix("test_")
            if not any(name == module or name.startswith(f"{module}_") for module in modules):
                problems.append(
                    f"tests/core/{package}/{test.name}: nemo_gym/{package}/ has no module `{name}`"
                )
    for test in sorted((root / "tests").glob("test_*.py")):
        name = test.stem.removeprefix("test_")
        homes = [package for package, modules in packages.items() if name in modules]
        if homes:
            problems.append(
                f"tests/{test.name}: belongs in tests/core/{homes[0]}/ beside the module it tests"
            )
    return problems


def test_tests_mirror_the_package_layout():
    assert misplaced_tests(ROOT) == []


def test_the_layout_check_names_a_stray_test(tmp_path: Path):
    for folder in ("nemo_gym/http", "tests/core/http"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "nemo_gym" / "http" / "__init__.py").write_text("")
    (tmp_path / "nemo_gym" / "http" / "client.py").write_text("")
    for test in ("test_client.py", "test_client_pool.py", "test_cli.py"):
        (tmp_path / "tests" / "core" / "http" / test).write_text("")
    (tmp_path / "tests" / "test_client.py").write_text("")
    assert misplaced_tests(tmp_path) == [
        "tests/core/http/test_cli.py: nemo_gym/http/ has no module `cli`",
        "tests/test_client.py: belongs in tests/core/http/ beside the module it tests",
    ]
