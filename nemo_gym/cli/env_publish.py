"""`gym env publish [NAME]`: whether a server folder is ready for the catalog, checked offline and without
starting anything, and the entry `gym list` would show for it.

A folder is self-contained (app.py, configs/, README.md, tests/, and for a resources server data/), so
every check reads only the folder; where a check exists elsewhere (example rows, example data, the config
loader, the listing) it is called from here, never written twice. Each check is one line: PASS, or FAIL
with the file and the fix. Exit code 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from nemo_gym.cli.flags import Invocation, UsageError, value
from nemo_gym.cli.selectors import Asset, default_roots, discover, readme_description, search_roots
from nemo_gym.config.errors import ConfigError, first_line
from nemo_gym.config.server_kinds import AGENT, ENVIRONMENT, MODEL, RESOURCES
from nemo_gym.config.sources import install_root, load_yaml_file

# --kind -> (folder of that kind, what `gym list` calls it)
KINDS: dict[str, tuple[str, str]] = {
    kind.publish_kind: (kind.key, kind.listing) for kind in (RESOURCES, AGENT, MODEL, ENVIRONMENT)
}
PUBLISH_FLAGS = (
    value(
        "--kind",
        choices=tuple(KINDS),
        help=f"{', '.join(KINDS)} (default: the one kind with a folder of that name)",
    ),
)
MIN_README_WORDS = 20
SERVER_FOLDER_MARKS = ("app.py", "configs", "README.md")  # a folder with none of them is no server folder
# Shipped folders that complete a folder's config so that it resolves alone: the offline model plays the
# policy, a small environment (with its agent) gives an agent or an environment server something to serve.
REPLAY_MODEL = "responses_api_models/replay_model/configs/replay_model.yaml"
SMALL_ENVIRONMENT = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
COMPANION_CONFIGS: dict[str, tuple[str, ...]] = {
    "resources-server": (REPLAY_MODEL,),
    "agent": (SMALL_ENVIRONMENT, REPLAY_MODEL),
    "model": (),
    "environment-server": (SMALL_ENVIRONMENT, REPLAY_MODEL),
}
# What the policy_* keys of env.yaml would hold (and remote_agent_base_url, remote_agent's service); env.yaml
# itself is not read, so the result is the same on every machine.
PLACEHOLDER_OVERRIDES = (
    "++policy_base_url=http://127.0.0.1:1/v1",
    "++policy_api_key=placeholder",
    "++policy_model_name=placeholder",
    "++remote_agent_base_url=http://127.0.0.1:1",
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def _failed(name: str, problem: str, fix: str) -> Check:
    return Check(name, False, f"{problem.rstrip('.')}; fix: {fix}")


@dataclass
class Report:
    """One folder's checks and its catalog entry."""

    name: str
    kind: str
    folder: Path
    checks: list[Check] = field(default_factory=list)
    catalog_entry: Asset | None = None
    discoverable_by_default: bool = False

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": str(self.folder),
            "checks": [check.as_json() for check in self.checks],
            "catalog_entry": self.catalog_entry.as_json() if self.catalog_entry else None,
            "discoverable_by_default": self.discoverable_by_default,
        }


def run_publish(invocation: Invocation) -> int:
    search_dirs: list[str] = invocation.options.get("search_dir") or []
    kind: str | None = invocation.options.get("kind")
    name: str | None = invocation.options.get("name")
    folders = [located(name, kind, search_dirs)] if name else every_folder(kind, search_dirs)
    reports = [publication_report(folder_kind, folder, search_dirs) for folder_kind, folder in folders]
    if invocation.options.get("json"):
        documents = [report.as_json() for report in reports]
        print(json.dumps(documents[0] if name else documents, indent=2))
    else:
        print("\n\n".join(_as_text(report) for report in reports))
    return 0 if all(report.ok for report in reports) else 1


def located(name: str, kind: str | None, search_dirs: Sequence[str]) -> tuple[str, Path]:
    """The folder NAME of `kind` (of any kind when None) in the usual roots, the first root winning."""
    kinds = [kind] if kind else list(KINDS)
    found: dict[str, Path] = {}
    for one in kinds:
        folder = next(
            (
                root / KINDS[one][0] / name
                for root in search_roots(search_dirs)
                if (root / KINDS[one][0] / name).is_dir()
            ),
            None,
        )
        if folder is not None:
            found[one] = folder
    if len(found) > 1:
        listed = ", ".join(f"{KINDS[one][0]}/{name} (--kind {one})" for one in found)
        raise ConfigError(f"'{name}' names folders of several kinds: {listed}; pick one with --kind")
    if found:
        return next(iter(found.items()))
    known = sorted({path.name for one in kinds for path in _folders_of(one, search_roots(search_dirs))})
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(close)}?" if close else "see gym list resources-servers|agents|models"
    places = "|".join(KINDS[one][0] for one in kinds)
    roots = ", ".join(map(str, search_roots(search_dirs)))
    raise ConfigError(f"no {places}/{name} in {roots}; {hint}")


def every_folder(kind: str | None, search_dirs: Sequence[str]) -> list[tuple[str, Path]]:
    """Without NAME: every server folder under the --search-dir roots (the shipped ones are not
    publications of the user's)."""
    if not search_dirs:
        raise UsageError(
            "gym env publish: name the folder (gym env publish NAME [--kind KIND]), or give --search-dir DIR "
            "to check every server folder under DIR"
        )
    roots = [Path(folder).expanduser() for folder in search_dirs]
    found = [(one, folder) for one in ([kind] if kind else KINDS) for folder in _folders_of(one, roots)]
    if not found:
        expected = "|".join(KINDS[one][0] for one in ([kind] if kind else KINDS))
        raise ConfigError(f"no server folders in {', '.join(search_dirs)} (expected DIR/{expected}/<name>/)")
    return found


def _folders_of(kind: str, roots: Sequence[Path]) -> list[Path]:
    return [
        folder
        for root in roots
        for folder in sorted((root / KINDS[kind][0]).glob("*"))
        if folder.is_dir() and any((folder / part).exists() for part in SERVER_FOLDER_MARKS)
    ]


def publication_report(kind: str, folder: Path, search_dirs: Sequence[str]) -> Report:
    report = Report(folder.name, kind, folder.resolve())
    shown = f"{KINDS[kind][0]}/{folder.name}"
    config_check, declaring = _config_check(kind, folder, shown)
    report.checks += [config_check, _readme_check(folder, shown)]
    if kind == "resources-server":
        report.checks += [_example_rows_check(folder, shown), _example_data_check(folder, shown)]
    report.checks += [_tests_check(folder, shown), _resolve_check(kind, declaring, shown)]
    catalog_check = _catalog(report, search_dirs)
    report.checks.append(catalog_check)
    return report


def _config_check(kind: str, folder: Path, shown: str) -> tuple[Check, list[Path]]:
    """At least one configs/*.yaml that parses and declares an instance of this folder whose entrypoint
    exists; every YAML must parse. Returns the declaring files too, for the resolution check."""
    kind_folder, name = KINDS[kind][0], folder.name
    sample = f"<instance>: {{{kind_folder}: {{{name}: {{entrypoint: app.py}}}}}}"
    problems: list[str] = []
    declaring: list[Path] = []
    for path in sorted((folder / "configs").glob("*.yaml")):
        try:
            tree = OmegaConf.to_container(load_yaml_file(path), resolve=False)
        except ConfigError as error:
            problems.append(
                f"{shown}/configs/{path.name} does not parse ({first_line(error).split(': ', 1)[-1]})"
            )
            continue
        for instance, block in tree.items():
            inner = block.get(kind_folder, {}) if isinstance(block, dict) else {}
            server = inner.get(name) if isinstance(inner, dict) else None
            if not isinstance(server, dict):
                continue
            entrypoint = server.get("entrypoint")
            if not isinstance(entrypoint, str) or not (folder / entrypoint).is_file():
                problems.append(
                    f"{shown}/configs/{path.name}: instance '{instance}' has entrypoint {entrypoint!r}, which is not a file of {shown}"
                )
            elif path not in declaring:
                declaring.append(path)
    if problems:
        return _failed(
            "configs",
            "; ".join(problems),
            "correct the YAML, and point each entrypoint at the server's file (app.py)",
        ), declaring
    if not declaring:
        return _failed(
            "configs",
            f"{shown}/configs/ has no YAML declaring a {kind_folder}/{name} instance",
            f"add configs/{name}.yaml with {sample}",
        ), declaring
    return Check("configs", True, ", ".join(f"{shown}/configs/{path.name}" for path in declaring)), declaring


def _readme_check(folder: Path, shown: str) -> Check:
    """A README the catalog can describe the folder with: a first sentence, more than a stub, and not the
    placeholder `gym env init` writes."""
    from nemo_gym.cli.env_init import README_TEMPLATE

    readme = folder / "README.md"
    fix = f"write {shown}/README.md: a first sentence saying what the server does (the catalog shows it), then how to use it"
    if not readme.is_file():
        return _failed("readme", f"{shown}/README.md is missing", fix)
    text = readme.read_text(errors="replace")
    description = readme_description(text)
    words = len(text.split())
    if not description:
        return _failed("readme", f"{shown}/README.md has no sentence for the catalog (only headings)", fix)
    if description == readme_description(README_TEMPLATE.format(name=folder.name)):
        return _failed("readme", f"{shown}/README.md still has the placeholder of gym env init", fix)
    if words < MIN_README_WORDS:
        return _failed("readme", f"{shown}/README.md has {words} words, fewer than {MIN_README_WORDS}", fix)
    return Check("readme", True, f"{shown}/README.md ({words} words)")


def _example_rows_check(folder: Path, shown: str) -> Check:
    """Every row of data/example.jsonl is what `gym dataset collate --mode example_validation` accepts: a
    JSON object that is a run request, and a `task_data.TaskData` when the folder has one."""
    from nemo_gym.config.jsonl import iter_jsonl
    from nemo_gym.datasets.metrics import DatasetMetrics
    from nemo_gym.datasets.task_data import RowCheck, task_data_model

    path = folder / "data" / "example.jsonl"
    if not path.is_file():
        return _failed(
            "example rows",
            f"{shown}/data/example.jsonl is missing",
            "add five task rows, each with responses_create_params (as gym env init writes them)",
        )
    metrics = DatasetMetrics()
    try:
        model = task_data_model(folder)
        rows = RowCheck(model, True, path) if model else None
        for line in iter_jsonl(path):
            metrics.add(line.row, line.number, 1)
            if rows is not None:
                rows.check(line.row, line.number)
    except ConfigError as error:
        return _failed("example rows", str(error), f"correct {shown}/data/example.jsonl (or task_data.py)")
    except Exception as error:  # task_data.py that does not import: its own error, in one line
        return _failed(
            "example rows",
            f"{shown}/task_data.py: {type(error).__name__}: {first_line(error)}",
            "make task_data.py importable",
        )
    if metrics.offending_lines:
        lines = ", ".join(map(str, metrics.offending_lines))
        return _failed(
            "example rows",
            f"{shown}/data/example.jsonl: line(s) {lines} are not run requests",
            'give each row a valid responses_create_params ({"input": [...]})',
        )
    return Check("example rows", True, f"{shown}/data/example.jsonl: {metrics.examples} run request(s)")


def _example_data_check(folder: Path, shown: str) -> Check:
    """The example data `gym env test` requires (row counts, example_metrics.json, recorded rollouts)."""
    from nemo_gym.cli.env_test import example_data_problems

    problems = example_data_problems(folder)
    if problems:
        fix = (
            f"record the rollouts with gym eval run --resources-server {folder.name} --dataset example -o "
            f"{shown}/data/example_rollouts.jsonl and refresh the metrics with gym dataset collate --mode "
            "example_validation"
        )
        return _failed("example data", "; ".join(f"{shown}/{problem}" for problem in problems), fix)
    return Check("example data", True, f"{shown}/data: example rows, metrics and rollouts")


def _tests_check(folder: Path, shown: str) -> Check:
    tests = sorted((folder / "tests").glob("test_*.py"))
    if not tests:
        return _failed(
            "tests",
            f"{shown}/tests/ has no test_*.py",
            f"add {shown}/tests/test_app.py (as gym env init writes it: start the server, call /verify)",
        )
    return Check("tests", True, ", ".join(f"{shown}/tests/{path.name}" for path in tests))


def _resolve_check(kind: str, declaring: list[Path], shown: str) -> Check:
    """Each declaring config through the config loader and the static checks of `gym env validate`,
    completed with the companion folders and placeholder policy keys; no server is started."""
    if not declaring:
        return _failed(
            "config resolves", f"{shown}/configs/: nothing to resolve", "fix the configs check first"
        )
    resolved = []
    for path in declaring:
        try:
            resolved.append(f"{path.name}: {_resolved_instances(kind, path)} instance(s)")
        except ConfigError as error:
            return _failed(
                "config resolves",
                f"{shown}/configs/{path.name}: {first_line(error)}",
                "correct the key it names; gym env validate --config FILE shows the same",
            )
    companions = [file.split("/")[1] for file in COMPANION_CONFIGS[kind]]
    return Check(
        "config resolves",
        True,
        f"{'; '.join(resolved)} (offline, with {', '.join(companions) or 'nothing else'})",
    )


def _resolved_instances(kind: str, path: Path) -> int:
    """The number of server instances `path` resolves to. A template's `{type: T, name: ???}` slots are
    filled with the companions' first instance of type T; any other `???` stays an error."""
    from nemo_gym.config.directives import find_missing_value_paths
    from nemo_gym.config.discovery import require_server_instances
    from nemo_gym.config.global_config import parse_global_config_dict
    from nemo_gym.config.server_kinds import SERVER_TYPES
    from nemo_gym.launch.preflight import check_startable

    companions = [install_root() / file for file in COMPANION_CONFIGS[kind]]
    first_of_type: dict[str, str] = {}
    for companion in companions:
        for instance, block in load_yaml_file(companion).items():
            for server_type in block.keys() & set(SERVER_TYPES) if isinstance(block, Mapping) else ():
                first_of_type.setdefault(server_type, str(instance))
    tree = OmegaConf.to_container(load_yaml_file(path), resolve=False)
    fills = []
    for missing in find_missing_value_paths(tree):
        *parent, leaf = missing.split(".")
        reference: Any = tree
        for key in parent:
            reference = reference.get(key) if isinstance(reference, dict) else None
        if leaf == "name" and isinstance(reference, dict) and reference.get("type") in first_of_type:
            fills.append(f"++{missing}={first_of_type[reference['type']]}")
    config_paths = ",".join(map(str, [*companions, path]))
    cfg = parse_global_config_dict(
        [f"+config_paths=[{config_paths}]", *PLACEHOLDER_OVERRIDES, *fills], skip_env_yaml=True
    )
    instances = require_server_instances(cfg)
    check_startable(cfg, instances, Path.cwd())
    return len(instances)


def _catalog(report: Report, search_dirs: Sequence[str]) -> Check:
    """The entry `gym list <kind>` shows for the folder, and whether the default roots reach it."""
    kind_folder, listing = KINDS[report.kind]
    entry = next((asset for asset in discover(kind_folder, search_dirs) if asset.name == report.name), None)
    shown = f"{kind_folder}/{report.name}"
    if entry is None:
        return _failed(
            "catalog",
            f"gym list {listing} does not list {shown}",
            "give it a configs/*.yaml (see the configs check)",
        )
    if Path(entry.path).resolve() != report.folder:
        return _failed(
            "catalog",
            f"gym list {listing} lists {entry.path} under the name {report.name}, which hides {report.folder}",
            "rename the folder",
        )
    report.catalog_entry = entry
    report.discoverable_by_default = report.folder.parent.parent in {
        root.resolve() for root in default_roots()
    }
    where = (
        "from the default roots"
        if report.discoverable_by_default
        else "only with --search-dir (or NEMO_GYM_EXTRA_ROOTS)"
    )
    return Check("catalog", True, f"gym list {listing} lists it {where}")


def _as_text(report: Report) -> str:
    from nemo_gym.cli.commands import asset_table

    lines = [f"{KINDS[report.kind][0]}/{report.name} ({report.folder})"]
    lines += [f"{'PASS' if check.ok else 'FAIL'}  {check.name}: {check.detail}" for check in report.checks]
    if report.catalog_entry is not None:
        lines += ["", f"gym list {KINDS[report.kind][1]} shows:", asset_table([report.catalog_entry])]
    failed = sum(not check.ok for check in report.checks)
    lines += ["", "Ready to publish." if not failed else f"Not ready: {failed} check(s) failed."]
    return "\n".join(lines)
