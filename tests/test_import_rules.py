"""Import boundaries, checked on the source (AST, no imports run) except where noted.

Inside the core, a module imports only from its own layer or the layers before it in the table of
docs/architecture.md (read from that page, so the page cannot go stale), and the type modules load no HTTP
layer (checked in a fresh interpreter). The core never imports a server folder, and a server folder imports only the standard library, third-party
packages, nemo_gym and its own modules, package-qualified: so any set of folders can be co-hosted in one
process (a bare `grading` of two folders would share one `sys.modules` entry) and each folder can be copied
alone. Test code of a folder may also use the repository's `tests` package (helpers, scripted upstream).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER_KINDS = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")
# Re-exports core names under the path environments written for NeMo Gym import them from.
SHARED_SHIM = "resources_servers.gymnasium"
# Folders that build on another folder, as their NeMo Gym namesakes do; each says so in its README.
BUILDS_ON: dict[str, str | tuple[str, ...]] = {
    "resources_servers.polymath": "resources_servers.math_with_judge",  # its server, with more metrics
    "resources_servers.circle_click": "resources_servers.circle_count",  # the same synthetic pictures
    "resources_servers.physics_judge": "resources_servers.math_with_judge",  # its server, another judge
    "resources_servers.ugphysics_judge": "resources_servers.math_with_judge",  # its server, another judge
    "resources_servers.imo_proofbench_judge": "resources_servers.math_with_judge",  # its symbolic check
    "resources_servers.math_with_autograder": "resources_servers.math_with_judge",  # its server, an autograder
    "resources_servers.bird_sql": "resources_servers.text_to_sql",  # its read-only, time-limited run_query
    "resources_servers.spider2_lite": "resources_servers.bird_sql",  # its database lookup and SQL runner
    "resources_servers.proof_verification": "resources_servers.proof_judge",  # its score reading, judge keys
    "resources_servers.code_fim": "resources_servers.evalplus",  # its code extraction
    "resources_servers.scicode": "resources_servers.scicodepile",  # its verdict reading and encodable()
    "resources_servers.arena_judge": "resources_servers.arena",  # its pairwise judging and win-rate fit
    "resources_servers.inverse_if": "resources_servers.multichallenge",  # its per-item rubric judging
    "resources_servers.verifif": "resources_servers.instruction_following",  # its words/sentences/paragraphs
    "resources_servers.ifbench": "resources_servers.instruction_following",  # its IFEval checkers, splitter
    "resources_servers.iheval": "resources_servers.ifbench",  # its instruction registry, strict/loose grading
    "resources_servers.gdp_pdf": "resources_servers.labbench2_vlm",  # its check of the prompt's images
    "responses_api_agents.image_tools_agent": "resources_servers.image_tools",  # its tool-call reader
    "responses_api_agents.gdp_pdf_agent": "responses_api_agents.simple_agent",  # its loop, as in NeMo Gym
    "responses_api_agents.toolsandbox_agent": "responses_api_agents.gymnasium_agent",  # its user-sim loop
    "responses_api_agents.conversational_tool_use": (
        "responses_api_agents.gymnasium_agent",  # its user-sim loop, for the simulation stage
        "resources_servers.conversational_tool_use_simulation",  # the row models and JSON reading it generates for
    ),
    "responses_api_agents.simple_agent_with_compaction": "responses_api_agents.simple_agent",  # its loop
    "responses_api_models.vllm_model_with_compaction": "responses_api_models.vllm_model",  # its server
    "responses_api_models.local_vllm_model": "responses_api_models.vllm_model",  # its server, before a vLLM it starts
    "responses_api_models.inference_provider": "responses_api_models.vllm_model",  # its chat conversion
    "responses_api_models.azure_openai_model": "responses_api_models.inference_provider",  # its server
    # its pass-through server, and vllm_model's conversion for a proxy that answers with a chat completion
    "responses_api_models.litellm_model": (
        "responses_api_models.openai_model",
        "responses_api_models.vllm_model",
    ),
    "responses_api_models.switchyard_model": "responses_api_models.openai_model",  # its pass-through server
    "responses_api_agents.aviary_agent": "responses_api_agents.simple_agent",  # its tool-call reader and refusals
    "responses_api_agents.haystack_agent": "responses_api_agents.simple_agent",  # its tool names and reserved routes
}
REPO_TESTS = "tests"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
LAYER_ROW = re.compile(r"^\s*\|\s*(\w+)\s*\|\s*([\w ]+?)\s*\|\s*$")
# Compatibility re-exports made lazily inside a function (module `__getattr__`), so that importing the
# lower module still loads nothing of the higher one: (importing module, imported module).
LAZY_REEXPORTS = {("nemo_gym.openai_utils", "nemo_gym.http.upstream")}
TYPE_PACKAGES = ("nemo_gym.wire", "nemo_gym.config")
TYPE_MODULES = (*TYPE_PACKAGES, "nemo_gym.openai_utils", "nemo_gym.config_types")
HTTP_LAYER = ("aiohttp", "fastapi", "starlette", "uvicorn", "nemo_gym.http")


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
                bases = BUILDS_ON.get(package, ())
                allowed = (package, SHARED_SHIM, *((bases,) if isinstance(bases, str) else bases))
                if not any(is_within(module, base) for base in allowed):
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
        "import nemo_gym.http.errors\n"
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


def architecture_layers(page: Path) -> list[tuple[str, list[str]]]:
    """The layer table between the markers of docs/architecture.md: (layer, module names) in order."""
    text = page.read_text()
    table = text.split("<!-- layers:", 1)[1].split("<!-- end layers -->", 1)[0]
    rows = [LAYER_ROW.match(line) for line in table.splitlines()]
    return [(row[1], row[2].split()) for row in rows if row and row[1] != "layer"]


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str, layers: list[tuple[str, list[str]]]) -> int | None:
    """The index of the layer listing `module` or a package above it (the longest such name wins)."""
    found, longest = None, 0
    for index, (_, names) in enumerate(layers):
        for name in names:
            dotted = f"nemo_gym.{name}"
            if is_within(module, dotted) and len(dotted) > longest:
                found, longest = index, len(dotted)
    return found


def layering_violations(root: Path, layers: list[tuple[str, list[str]]]) -> list[str]:
    problems = []
    for path in python_files(root / "nemo_gym"):
        module = module_name(root, path)
        if module == "nemo_gym":
            continue
        own = layer_of(module, layers)
        if own is None:
            problems.append(f"{path.relative_to(root)}: in no layer of docs/architecture.md; add it there")
            continue
        for line, imported, level in imported_modules(path):
            if level or not is_within(imported, "nemo_gym") or (module, imported) in LAZY_REEXPORTS:
                continue
            target = layer_of(imported, layers)
            if target is not None and target > own:
                problems.append(
                    f"{path.relative_to(root)}:{line}: a {layers[own][0]} module imports "
                    f"`{imported}` ({layers[target][0]})"
                )
    return problems


def test_every_core_module_sits_in_a_layer_and_imports_only_downwards():
    assert layering_violations(ROOT, architecture_layers(ARCHITECTURE)) == []


def test_the_layer_check_catches_an_upward_import_and_an_unplaced_module(tmp_path):
    (tmp_path / "nemo_gym" / "wire").mkdir(parents=True)
    (tmp_path / "nemo_gym" / "wire" / "responses.py").write_text(
        "import json\nfrom nemo_gym.text.tables import X\nfrom nemo_gym.http.client import request\n"
    )
    (tmp_path / "nemo_gym" / "stray.py").write_text("")
    layers = [("foundation", ["text"]), ("types", ["wire"]), ("transport", ["http"])]
    assert layering_violations(tmp_path, layers) == [
        "nemo_gym/stray.py: in no layer of docs/architecture.md; add it there",
        "nemo_gym/wire/responses.py:3: a types module imports `nemo_gym.http.client` (transport)",
    ]


def test_the_layer_table_is_read_from_the_page():
    layers = architecture_layers(ARCHITECTURE)
    assert [name for name, _ in layers] == [
        "foundation",
        "types",
        "transport",
        "servers",
        "orchestration",
        "cli",
        "compatibility",
    ]
    assert "wire" in dict(layers)["types"]


def is_reexport_statement(node: ast.stmt) -> bool:
    """An import, the docstring, `__all__`, an alias (`NG_KEY = KEY`), a literal, an `if TYPE_CHECKING:`
    block of imports, or the module `__getattr__` that hands out a name lazily."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Constant)
    if isinstance(node, ast.If):
        return ast.unparse(node.test) == "TYPE_CHECKING" and all(map(is_reexport_statement, node.body))
    if isinstance(node, ast.FunctionDef):
        return node.name == "__getattr__"
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        value = node.value
        if isinstance(value, ast.Call) and ast.unparse(value.func) == "frozenset":
            value = value.args[0] if value.args else None
        try:
            return isinstance(value, ast.Name) or ast.literal_eval(value) is not None
        except ValueError:
            return False
    return False


def compatibility_violations(root: Path, modules: list[str]) -> list[str]:
    """A compatibility module is NeMo Gym's path to names that live in a layer package: imports and
    re-export assignments only (a module `__getattr__` may hand out a name lazily), nothing of its own."""
    problems = []
    for name in modules:
        path = root / "nemo_gym" / f"{name}.py"
        for node in ast.parse(path.read_bytes()).body:
            if not is_reexport_statement(node):
                problems.append(f"{path.relative_to(root)}:{node.lineno}: more than a re-export")
    return problems


def test_nemo_gyms_module_names_are_thin_reexports_nothing_in_the_core_imports():
    """The compatibility row is last, so a core module importing one of them is an upward import; and
    each holds no code of its own, so every concept has one home."""
    layers = architecture_layers(ARCHITECTURE)
    name, modules = layers[-1]
    assert name == "compatibility" and "server_utils" in modules
    assert compatibility_violations(ROOT, modules) == []


def test_the_compatibility_check_catches_code_in_a_reexport_and_a_core_import_of_one(tmp_path):
    (tmp_path / "nemo_gym" / "serving").mkdir(parents=True)
    (tmp_path / "nemo_gym" / "serving" / "servers.py").write_text("from nemo_gym.server_utils import X\n")
    (tmp_path / "nemo_gym" / "server_utils.py").write_text(
        '"""Doc."""\nfrom nemo_gym.serving.servers import *\nKEY = X\ndef helper():\n    pass\n'
    )
    layers = [("servers", ["serving"]), ("compatibility", ["server_utils"])]
    assert compatibility_violations(tmp_path, ["server_utils"]) == [
        "nemo_gym/server_utils.py:4: more than a re-export"
    ]
    assert layering_violations(tmp_path, layers) == [
        "nemo_gym/serving/servers.py:1: a servers module imports `nemo_gym.server_utils` (compatibility)"
    ]


def test_the_type_modules_load_no_http_layer():
    """In a fresh interpreter, since an import made anywhere else in this process would hide one."""
    probe = (
        "import importlib, pkgutil, sys\n"
        f"for name in {TYPE_MODULES!r}: importlib.import_module(name)\n"
        f"for package in {TYPE_PACKAGES!r}:\n"
        "    for found in pkgutil.walk_packages(sys.modules[package].__path__, package + '.'):\n"
        "        importlib.import_module(found.name)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({HTTP_LAYER!r})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert loaded.stdout.strip() == "[]"
