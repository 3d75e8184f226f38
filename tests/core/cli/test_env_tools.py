"""NeMo Gym 0.7's environment commands on Gym's one virtual environment: `gym env schema`, `gym env
packages`, `gym env prefetch`, `gym dev test`, `gym env test --all`, and the legacy script names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, one_line_error, run_gym

MCQA_ROWS = [json.loads(line) for line in (REPO_ROOT / "resources_servers/mcqa/data/example.jsonl").read_text().splitlines()]  # fmt: skip


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def write_folder(root: Path, name: str, files: dict[str, str]) -> Path:
    folder = root / "resources_servers" / name
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


CONFIG = "{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n      domain: other\n"


def test_schema_is_what_verify_reads_from_a_row(workdir):
    result = run_gym("env", "schema", "--resources-server", "mcqa", cwd=workdir)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert {"responses_create_params", "expected_answer", "options"} <= set(schema["properties"])
    assert "response" not in schema["properties"], "a task row has no response: the rollout brings it"
    assert set(schema["required"]) == {"responses_create_params", "expected_answer"}
    assert all(set(schema["required"]) <= set(row) for row in MCQA_ROWS)


def test_schema_prefers_the_folders_task_data_model(workdir):
    search = workdir / "more"
    write_folder(search, "tasky", {
        "configs/tasky.yaml": CONFIG.format(name="tasky"),
        "app.py": "raise RuntimeError('the schema comes from task_data.py; app.py is not imported')\n",
        "task_data.py": "from pydantic import BaseModel\n\nclass TaskData(BaseModel):\n    board: list[int]\n    target: int = 0\n",
    })  # fmt: skip
    result = run_gym("env", "schema", "--resources-server", "tasky", "--search-dir", str(search), cwd=workdir)
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert (schema["title"], list(schema["properties"]), schema["required"]) == ("TaskData", ["board", "target"], ["board"])  # fmt: skip

    assert "--resources-server" in one_line_error(run_gym("env", "schema", cwd=workdir))


def test_prefetch_names_a_requirement_the_environment_lacks(workdir):
    search = workdir / "more"
    folder = write_folder(search, "needy", {
        "configs/needy.yaml": CONFIG.format(name="needy"),
        "app.py": "",
        "requirements.txt": "# what needy needs\npyyaml>=6\n",
    })  # fmt: skip
    args = ("env", "prefetch", "--resources-server", "needy", "--search-dir", str(search))
    ready = run_gym(*args, cwd=workdir)
    assert ready.returncode == 0, ready.stderr
    assert "Nothing to build" in ready.stdout

    (folder / "requirements.txt").write_text("pyyaml>=6\nno-such-package-for-gym>=1\n")
    message = one_line_error(run_gym(*args, cwd=workdir))
    assert "no-such-package-for-gym>=1 (for needy; installed: none)" in message
    assert "pyyaml" not in message


def test_packages_lists_the_one_environment(workdir):
    result = run_gym("env", "packages", "--json", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "nemo-gym" in {package["name"] for package in json.loads(result.stdout)}


def test_dev_test_and_env_test_all_exist(workdir):
    assert "usage: gym dev test" in run_gym("dev", "test", "-h", cwd=workdir).stdout
    refused = run_gym("env", "test", "--all", "--resources-server", "mcqa", cwd=workdir)
    assert "--all tests every folder" in one_line_error(refused)


@pytest.mark.parametrize("prefix", ["ng_", "nemo_gym_"])
def test_legacy_scripts_name_their_replacement_then_run_it(prefix, workdir):
    current = run_gym("--version", cwd=workdir)
    legacy = run_gym(cwd=workdir, command=f"{prefix}version")
    assert (legacy.returncode, legacy.stdout) == (0, current.stdout)
    assert legacy.stderr.strip() == f"{prefix}version is deprecated: it runs `gym --version`."
    migrate = run_gym("-h", cwd=workdir, command=f"{prefix}gitlab_to_hf_dataset")
    assert migrate.stdout.startswith("usage: gym dataset migrate")
    reinstall = run_gym(cwd=workdir, command=f"{prefix}reinstall")
    assert reinstall.returncode == 0 and "one virtual environment" in reinstall.stderr


def test_json_may_come_before_the_command_and_is_refused_where_no_json_is_printed(workdir):
    before = run_gym("--json", "list", "agents", cwd=workdir)
    after = run_gym("list", "agents", "--json", cwd=workdir)
    assert before.returncode == 0 and json.loads(before.stdout) == json.loads(after.stdout)
    assert "--json is not supported by this command" in one_line_error(
        run_gym("--json", "env", "start", cwd=workdir)
    )
