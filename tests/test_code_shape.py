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
