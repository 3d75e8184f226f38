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


# Modules still tested only through their package's other test files (2026-11-28). The list only shrinks:
# a new module comes with tests/core/<package>/test_<module>.py, and one that gets it leaves the list.
WITHOUT_OWN_TESTS = {
    "agents.cli_trajectories",
    "agents.sessions",
    "cli.collect",
    "cli.compare",
    "cli.health_check",
    "cli.stored_rollouts",
    "cli.view",
    "collection.aggregation",
    "collection.config",
    "collection.ledger",
    "collection.paths",
    "collection.pipeline",
    "collection.row_checks",
    "collection.shards",
    "collection.trainer",
    "comparison.report",
    "comparison.runs",
    "comparison.statistics",
    "config.defaults",
    "config.environment_servers",
    "config.errors",
    "config.global_agent_settings",
    "config.jsonl",
    "config.key_names",
    "config.legacy_names",
    "config.metrics_bodies",
    "config.old_keys",
    "config.overrides",
    "config.ports",
    "config.server_refs",
    "config.settings",
    "config.shards",
    "config.token_id_capture",
    "config.top_level_keys",
    "datasets.files",
    "datasets.metrics",
    "datasets.task_data",
    "envkit.multiple_choice_verify",
    "envkit.repeat_metrics",
    "exporters.base",
    "exporters.mlflow_exporter",
    "exporters.records",
    "exporters.wandb_exporter",
    "http.errors",
    "http.mcp_tool_calls",
    "http.request_bodies",
    "http.rollout_paths",
    "http.sessions",
    "launch.config_handoff",
    "launch.deployment",
    "launch.server_processes",
    "launch.shard_replica",
    "rollout_viewer.static_page",
    "rollout_viewer.terminal",
    "serving.agent_server",
    "serving.chat_streaming",
    "serving.cpu_pool_ray",
    "serving.environment_server",
    "serving.parent_death",
    "text.redaction",
    "text.tables",
    "wire.anthropic",
    "wire.atif_v1_7",
    "wire.base",
    "wire.episode_types",
    "wire.failure_kinds",
    "wire.rows",
    "wire.single_agent_turn_types",
    "wire.task_materialization",
    "wire.tool_access",
}


def modules_without_own_tests(root: Path) -> set[str]:
    """`<package>.<module>` for each module of a nemo_gym/ package with no tests/core/<package>/test_<module>[_<aspect>].py."""
    missing = set()
    for package, modules in core_packages(root).items():
        tests = [
            path.stem.removeprefix("test_") for path in (root / "tests" / "core" / package).glob("test_*.py")
        ]
        for module in modules:
            if not any(name == module or name.startswith(f"{module}_") for name in tests):
                missing.add(f"{package}.{module}")
    return missing


def test_a_new_module_comes_with_a_test_file_of_its_own():
    assert sorted(modules_without_own_tests(ROOT) - WITHOUT_OWN_TESTS) == []


def test_a_module_that_got_its_own_tests_leaves_the_list():
    assert sorted(WITHOUT_OWN_TESTS - modules_without_own_tests(ROOT)) == []
