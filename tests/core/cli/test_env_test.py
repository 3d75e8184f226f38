"""`gym test` runs a server folder's tests in a pytest process of its own and checks a resources server's
example data; folders run at once, each one's output printed whole. Runs as the CLI in a scratch project
folder, on folders `gym init` scaffolds."""

import json
import re

from tests.helpers import GYM_TEST_TIMEOUT_S, one_line_error, run_gym


def test_a_failing_test_and_broken_example_data_fail_the_run(tmp_path):
    assert run_gym("init", "broken_env", cwd=tmp_path).returncode == 0
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


def test_unknown_folders_are_one_line_errors(tmp_path):
    assert "no such folder" in one_line_error(
        run_gym("test", "+entrypoint=resources_servers/nowhere", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )
    assert "expected <" in one_line_error(
        run_gym("test", "+entrypoint=nowhere", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )


def test_folders_run_at_once_and_their_outputs_do_not_interleave(tmp_path):
    """Each of two folders' tests waits until the other has started: only a parallel run can pass both."""
    for name, other in (("first_env", "second_env"), ("second_env", "first_env")):
        assert run_gym("init", name, cwd=tmp_path).returncode == 0
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


def test_a_selection_with_all_and_a_shard_past_the_last_are_refused(tmp_path):
    both = one_line_error(
        run_gym("test", "--all", "--resources-server", "some_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )
    assert "--all tests every folder; drop it or the selection of resources_servers/some_env" in both
    shard = one_line_error(
        run_gym("test", "+num_shards=2", "+shard_index=2", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    )
    assert "shard_index 2 must be below num_shards 2" in shard


def test_missing_example_data_is_named_file_by_file(tmp_path):
    assert run_gym("init", "bare_env", cwd=tmp_path).returncode == 0
    data = tmp_path / "resources_servers" / "bare_env" / "data"
    for path in data.iterdir():
        path.unlink()
    result = run_gym("test", "--resources-server", "bare_env", cwd=tmp_path, timeout=GYM_TEST_TIMEOUT_S)
    assert result.returncode == 1
    [row] = [line for line in result.stdout.splitlines() if line.startswith("resources_servers/bare_env ")]
    for problem in (
        "data/example.jsonl is missing",
        "data/example_rollouts.jsonl is missing",
        "data/example_metrics.json is missing",
    ):
        assert problem in row
    assert "0 of 1 folder(s) passed." in result.stdout
