"""`gym test`: run the tests of one server folder, or of every folder, and check environments' example data.

Each folder's tests run in their own pytest process with the current interpreter (its `requirements.txt`
must be installed; `make test` does that), from the folder's project root so the project's pytest settings
apply. A resources server must also ship its example data: `data/example.jsonl` with exactly 5 rows,
`data/example_metrics.json` saying so, `data/example_rollouts.jsonl` with 5 rollouts, and no leftover
`*conflict*` file from `gym dataset collate`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import orjson
from pydantic import Field

from nemo_gym.cli.flags import switch, value
from nemo_gym.config import server_kinds
from nemo_gym.config.cli_models import BaseNeMoGymCLIConfig
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.server_kinds import SERVER_TYPES
from nemo_gym.config.settings import command_settings
from nemo_gym.config.sources import install_root
from nemo_gym.envkit.testing import implementation_folder
from nemo_gym.text.tables import format_table

EXAMPLE_ROWS = 5
PYTEST_OUTCOMES = {0: "passed", 1: "failed", 2: "interrupted", 5: "no tests"}
TEST_FLAGS = (
    value("--resources-server", key="resources_server", metavar="NAME", help="test resources_servers/NAME"),
    value("--entrypoint", key="entrypoint", metavar="TYPE/FOLDER", help="test that server folder"),
    switch("--all", key="all", help="test every server folder (what no selection also does)"),
    switch("--skip-data-checks", key="skip_data_checks", help="do not check the example data files"),
    value("--parallel", key="parallel", metavar="N", help="test up to N folders at once"),
)


class EnvTestSettings(BaseNeMoGymCLIConfig):
    """Run the tests of one server folder (`+entrypoint=resources_servers/<name>`) or of all of them."""

    entrypoint: str | list[str] | None = Field(
        default=None, description="<server type>/<folder>, or a list of them; all folders if unset"
    )
    resources_server: str | None = Field(default=None, description="shorthand for resources_servers/<name>")
    all: bool = Field(default=False, description="test every folder, as NeMo Gym 0.7 asks (also the default)")
    skip_data_checks: bool = Field(default=False, description="do not check the example data files")
    num_shards: int = Field(default=1, ge=1, description="split the folders round-robin into this many")
    shard_index: int = Field(default=0, ge=0, description="which shard this run takes")
    timeout_s: float = Field(default=900.0, gt=0, description="longest one folder's tests may run")
    parallel: int = Field(
        default_factory=lambda: os.cpu_count() or 1,
        ge=1,
        description="folders tested at once (default: one per CPU); above 1, each folder's output is "
        "printed whole when it finishes",
    )


@dataclass
class FolderResult:
    folder: Path
    outcome: str
    data_problems: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return self.outcome in ("passed", "no tests") and not self.data_problems


def run_env_tests(overrides: list[str]) -> int:
    settings = command_settings(EnvTestSettings, parse_global_config_dict(overrides))
    folders = selected_folders(settings)
    with ThreadPoolExecutor(max_workers=min(settings.parallel, len(folders) or 1)) as pool:
        results = list(pool.map(lambda folder: _test_folder(folder, settings), folders))
    print(summary_table(results))
    failed = [result for result in results if not result.ok]
    print(f"{len(results) - len(failed)} of {len(results)} folder(s) passed.")
    return 1 if failed else 0


def selected_folders(settings: EnvTestSettings) -> list[Path]:
    if settings.shard_index >= settings.num_shards:
        raise ConfigError(
            f"shard_index {settings.shard_index} must be below num_shards {settings.num_shards}"
        )
    entrypoint = settings.entrypoint or (
        f"resources_servers/{settings.resources_server}" if settings.resources_server else None
    )
    if entrypoint is not None and settings.all:
        raise ConfigError(f"--all tests every folder; drop it or the selection of {entrypoint}")
    if entrypoint is not None:
        return [_one_folder(one) for one in ([entrypoint] if isinstance(entrypoint, str) else entrypoint)]
    found: dict[Path, Path] = {}
    for root in dict.fromkeys([Path.cwd(), install_root()]):
        for server_type in SERVER_TYPES:
            for readme in sorted((root / server_type).glob("*/README.md")):
                found.setdefault(readme.parent.resolve(), readme.parent)
    folders = list(found.values())
    return folders[settings.shard_index :: settings.num_shards]


def _one_folder(entrypoint: str) -> Path:
    parts = Path(entrypoint).parts
    if len(parts) != 2 or parts[0] not in SERVER_TYPES:
        raise ConfigError(f"entrypoint '{entrypoint}': expected <{'|'.join(SERVER_TYPES)}>/<folder>")
    folder = implementation_folder(*parts)
    if folder.is_dir():
        return folder
    raise ConfigError(f"entrypoint '{entrypoint}': no such folder under {Path.cwd()} or {install_root()}")


def example_data_problems(folder: Path) -> list[str]:
    """What is wrong with a resources server's example data (empty when all is well)."""
    data = folder / "data"
    problems = [
        f"{path.relative_to(folder)}: leftover metrics conflict; resolve it with gym dataset collate"
        for path in sorted(data.glob("*conflict*"))
    ]
    for name in ("example.jsonl", "example_rollouts.jsonl"):
        path = data / name
        if not path.is_file():
            problems.append(f"data/{name} is missing")
        elif (rows := _row_count(path)) != EXAMPLE_ROWS:
            problems.append(f"data/{name} has {rows} rows; {EXAMPLE_ROWS} expected")
    metrics = data / "example_metrics.json"
    if not metrics.is_file():
        problems.append("data/example_metrics.json is missing; write it with gym dataset collate")
    else:
        try:
            examples = orjson.loads(metrics.read_bytes()).get("Number of examples")
        except (orjson.JSONDecodeError, AttributeError):
            examples = None
        if examples != EXAMPLE_ROWS:
            problems.append(
                f"data/example_metrics.json: 'Number of examples' is {examples}, not {EXAMPLE_ROWS}"
            )
    return problems


def _row_count(path: Path) -> int:
    with path.open("rb") as lines:
        return sum(1 for line in lines if line.strip())


def _test_folder(folder: Path, settings: EnvTestSettings) -> FolderResult:
    check_data = folder.parent.name == server_kinds.RESOURCES.key and not settings.skip_data_checks
    problems = example_data_problems(folder) if check_data else []
    project_root = folder.parent.parent
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), str(project_root), env.get("PYTHONPATH")]))
    header = f"== {folder.parent.name}/{folder.name}"
    streamed = settings.parallel == 1
    if streamed:
        print(header, flush=True)
    started = time.monotonic()
    try:
        finished = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", str(folder)],
            cwd=project_root,
            env=env,
            timeout=settings.timeout_s,
            stdout=None if streamed else subprocess.PIPE,
            stderr=None if streamed else subprocess.STDOUT,
        )
        outcome = PYTEST_OUTCOMES.get(finished.returncode, f"pytest exit {finished.returncode}")
        output = finished.stdout
    except subprocess.TimeoutExpired as timeout:
        outcome = f"timed out after {settings.timeout_s:.0f} s"
        output = timeout.output
    if not streamed:
        _print_whole(header, output or b"")
    return FolderResult(folder, outcome, problems, time.monotonic() - started)


_PRINT_LOCK = threading.Lock()


def _print_whole(header: str, output: bytes) -> None:
    """One folder's header and pytest output together, never interleaved with another folder's."""
    with _PRINT_LOCK:
        print(header, flush=True)
        sys.stdout.write(output.decode(errors="replace"))
        sys.stdout.flush()


def summary_table(results: list[FolderResult]) -> str:
    return format_table(
        [("server", "tests", "seconds", "data")]
        + [
            (
                f"{result.folder.parent.name}/{result.folder.name}",
                result.outcome,
                f"{result.seconds:.1f}",
                "; ".join(result.data_problems) or "ok",
            )
            for result in results
        ]
    )
