"""`gym init` scaffolds a resources server whose tests pass at once; `gym test` runs a folder's tests and
checks its example data. Both run as the CLI in a scratch project folder."""

import json
import re

from tests.helpers import one_line_error, run_gym

# `gym test` runs a folder's whole test suite, slower than one command.
GYM_TEST_TIMEOUT_S = 300


def test_init_then_test_passes_and_reports_a_table(tmp_path):
    created = run_gym("init", "my_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    assert created.returncode == 0, created.stderr
    folder = tmp_path / "resources_servers" / "my_env"
    assert {path.name for path in folder.iterdir()} >= {"app.py", "configs", "data", "tests", "README.md"}

    result = run_gym("test", "+entrypoint=resources_servers/my_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    [row] = [
        line.split() for line in result.stdout.splitlines() if line.startswith("resources_servers/my_env ")
    ]
    assert row[1] == "passed" and row[-1] == "ok"

    again = run_gym("init", "my_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    assert "already exists" in one_line_error(again)


def test_a_failing_test_and_broken_example_data_fail_the_run(tmp_path):
    assert run_gym("init", "broken_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S).returncode == 0
    folder = tmp_path / "resources_servers" / "broken_env"
    app = folder / "app.py"
    app.write_text(app.read_text().replace("reward=1.0", "reward=0.0"))
    example = folder / "data" / "example.jsonl"
    example.write_text("".join(example.read_text().splitlines(keepends=True)[:4]))
    (folder / "data" / "example_metrics_conflict.json").write_text(json.dumps({}))

    result = run_gym("test", "--resources-server", "broken_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    assert result.returncode == 1
    [row] = [line for line in result.stdout.splitlines() if line.startswith("resources_servers/broken_env ")]
    assert " failed " in row
    assert "data/example.jsonl has 4 rows; 5 expected" in row
    assert "data/example_metrics_conflict.json: leftover metrics conflict" in row


def test_bad_names_and_unknown_folders_are_one_line_errors(tmp_path):
    assert "lowercase letters" in one_line_error(
        run_gym("init", "My-Env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )
    assert "no such folder" in one_line_error(
        run_gym("test", "+entrypoint=resources_servers/nowhere", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )
    assert "expected <" in one_line_error(
        run_gym("test", "+entrypoint=nowhere", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )


def test_folders_run_at_once_and_their_outputs_do_not_interleave(tmp_path):
    """Each of two folders' tests waits until the other has started: only a parallel run can pass both."""
    for name, other in (("first_env", "second_env"), ("second_env", "first_env")):
        assert run_gym("init", name, cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S).returncode == 0
        (tmp_path / "resources_servers" / name / "tests" / "test_meet.py").write_text(
            "import time\nfrom pathlib import Path\n\n"
            "def test_meets_the_other_folder():\n"
            f"    Path('{tmp_path}/{name}.started').touch()\n"
            "    deadline = time.monotonic() + 60\n"
            f"    while not Path('{tmp_path}/{other}.started').exists():\n"
            "        assert time.monotonic() < deadline, 'the other folder never started'\n"
            "        time.sleep(0.05)\n"
        )
    folders = "[resources_servers/first_env,resources_servers/second_env]"
    result = run_gym(
        "test", f"+entrypoint={folders}", "--parallel", "2", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 of 2 folder(s) passed." in result.stdout
    for name in ("first_env", "second_env"):
        section = result.stdout.split(f"== resources_servers/{name}\n", 1)[1].split("\n== ", 1)[0]
        # pytest's summary line ends the section: "2 passed in 1.2s", or "2 passed, 1 warning in 1.2s"
        assert re.search(r"\b\d+ passed\b[^\n]* in [\d.]+s", section), (
            "a folder's whole pytest output follows its own header"
        )
