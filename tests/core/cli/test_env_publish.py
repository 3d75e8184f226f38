"""`gym env publish [NAME]`: a server folder's publication checks, offline, and its catalog entry, through the
real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import one_line_error, run_gym

CHECKS = ["configs", "readme", "example rows", "example data", "tests", "config resolves", "catalog"]
CONFIG = "{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n      domain: other\n"
REQUEST_ROW = '{"responses_create_params": {"input": [{"role": "user", "content": "2+2?"}]}}\n'


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


def half_done_folder(root: Path, name: str = "halfdone") -> Path:
    """A resources server with a config and app.py, but no README, a row without a request and no tests."""
    folder = root / "resources_servers" / name
    (folder / "configs").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "configs" / f"{name}.yaml").write_text(CONFIG.format(name=name))
    (folder / "app.py").write_text("")
    (folder / "data" / "example.jsonl").write_text(REQUEST_ROW + '{"question": "no request here"}\n')
    return folder


def check_lines(stdout: str) -> dict[str, str]:
    """Each check's line by its name: `PASS  name: detail` / `FAIL  name: detail`."""
    lines = [line for line in stdout.splitlines() if line.startswith(("PASS  ", "FAIL  "))]
    return {line[6:].split(":", 1)[0]: line for line in lines}


def test_a_shipped_resources_server_passes_and_shows_its_catalog_entry(workdir):
    result = run_gym("env", "publish", "mcqa", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = check_lines(result.stdout)
    assert list(lines) == CHECKS
    assert all(line.startswith("PASS") for line in lines.values()), result.stdout
    assert "from the default roots" in lines["catalog"]
    assert "gym list resources-servers shows:" in result.stdout
    assert any(row.split()[:2] == ["mcqa", "mcqa"] for row in result.stdout.splitlines())
    assert result.stdout.rstrip().endswith("Ready to publish.")


def test_an_unfinished_folder_fails_naming_each_file_and_its_fix(workdir):
    half_done_folder(workdir / "more")
    result = run_gym("env", "publish", "halfdone", "--search-dir", str(workdir / "more"), cwd=workdir)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = check_lines(result.stdout)
    shown = "resources_servers/halfdone"
    for check, file in [
        ("readme", f"{shown}/README.md"),
        ("example rows", f"{shown}/data/example.jsonl: line(s) 2"),
        ("example data", f"{shown}/data/example_rollouts.jsonl is missing"),
        ("tests", f"{shown}/tests/"),
    ]:
        line = lines[check]
        assert line.startswith("FAIL") and file in line and "; fix: " in line, line
    assert "responses_create_params" in lines["example rows"].split("; fix: ")[1]
    assert lines["configs"].startswith("PASS") and lines["config resolves"].startswith("PASS")
    assert lines["catalog"].startswith("PASS") and "only with --search-dir" in lines["catalog"]
    assert "Not ready: 4 check(s) failed." in result.stdout

    every = run_gym("env", "publish", "--search-dir", str(workdir / "more"), cwd=workdir)
    assert every.returncode == 1 and check_lines(every.stdout) == lines


def test_json_before_the_command_is_one_document(workdir):
    folder = half_done_folder(workdir / "more")
    (folder / "README.md").write_text("# halfdone\n\nAdds two numbers; " + "the reward is exact match. " * 5)
    (folder / "data" / "example.jsonl").write_text(REQUEST_ROW)
    result = run_gym(
        "--json", "env", "publish", "halfdone", "--search-dir", str(workdir / "more"), cwd=workdir
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"name", "kind", "path", "checks", "catalog_entry", "discoverable_by_default"}
    assert (document["name"], document["kind"], document["path"]) == ("halfdone", "resources-server", str(folder.resolve()))  # fmt: skip
    assert [check["name"] for check in document["checks"]] == CHECKS
    assert all(set(check) == {"name", "ok", "detail"} for check in document["checks"])
    failed = {check["name"] for check in document["checks"] if not check["ok"]}
    assert failed == {"example data", "tests"}
    assert document["catalog_entry"]["name"] == "halfdone"
    assert document["catalog_entry"]["description"].startswith("Adds two numbers")
    assert document["discoverable_by_default"] is False

    agent = run_gym("env", "publish", "simple_agent", "--kind", "agent", "--json", cwd=workdir)
    shipped = json.loads(agent.stdout)
    assert shipped["kind"] == "agent" and shipped["discoverable_by_default"] is True
    assert all(check["ok"] for check in shipped["checks"]), shipped["checks"]


def test_bad_names_are_one_line(workdir):
    unknown = run_gym("env", "publish", "mcqq", cwd=workdir)
    assert unknown.returncode == 1 and "did you mean mcqa?" in one_line_error(unknown)

    nothing = run_gym("env", "publish", cwd=workdir)
    assert nothing.returncode == 2 and "--search-dir DIR" in one_line_error(nothing)

    search = workdir / "more"
    half_done_folder(search, "twice")
    (search / "responses_api_agents" / "twice").mkdir(parents=True)
    both = one_line_error(run_gym("env", "publish", "twice", "--search-dir", str(search), cwd=workdir))
    assert "--kind resources-server" in both and "--kind agent" in both

    wrong_kind = run_gym("env", "publish", "mcqa", "--kind", "agent", cwd=workdir)
    assert wrong_kind.returncode == 1 and "no responses_api_agents/mcqa" in one_line_error(wrong_kind)
