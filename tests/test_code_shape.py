"""The size limits issue 19 set, kept: small core modules, and environments whose app.py is mostly their own
logic because the kit (docs/architecture.md) carries the rest."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_CORE_MODULE_LINES = 500
MAX_APP_LINES = 80
# The environments shipped before the catalog grew; each app.py was 49-199 lines before the kit.
FIRST_ENVIRONMENTS = (
    "example_single_tool_call",
    "equivalence_rule",
    "example_session_state_mgmt",
    "reasoning_gym",
    "xlam_fc",
    "example_multi_step",
    "mcqa",
    "example_tool_call_multireward",
    "workplace_assistant",
    "math_advanced_calculations",
    "math_with_judge",
)


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_core_module_is_over_500_lines():
    too_long = {
        str(path.relative_to(ROOT)): line_count(path)
        for path in (ROOT / "nemo_gym").rglob("*.py")
        if line_count(path) > MAX_CORE_MODULE_LINES
    }
    assert too_long == {}


def test_the_first_environments_app_py_stay_short():
    too_long = {
        name: lines
        for name in FIRST_ENVIRONMENTS
        if (lines := line_count(ROOT / "resources_servers" / name / "app.py")) >= MAX_APP_LINES
    }
    assert too_long == {}
