"""`gym init <name>` scaffolds a resources server whose own tests and example data checks pass at once; it
takes the name in each NeMo Gym spelling and refuses a bad or ambiguous one."""

import pytest

from tests.helpers import GYM_TEST_TIMEOUT_S, one_line_error, run_gym


def test_init_then_test_passes_and_reports_a_table(tmp_path):
    created = run_gym("init", "my_env", cwd=tmp_path)
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

    again = run_gym("init", "my_env", cwd=tmp_path)
    assert "already exists" in one_line_error(again)


def test_a_bad_name_is_a_one_line_error(tmp_path):
    assert "lowercase letters" in one_line_error(run_gym("init", "My-Env", cwd=tmp_path))


@pytest.mark.parametrize(
    "how",
    [
        ("ng_init_resources_server", "+entrypoint=resources_servers/my_env"),
        ("gym", "env", "init", "--resources-server", "my_env"),
        ("gym", "env", "init", "my_env"),
        ("gym", "init", "+resources_server=my_env"),
    ],
)
def test_init_takes_the_name_in_each_nemo_gym_spelling(how, tmp_path):
    executable, *args = how
    result = run_gym(*args, cwd=tmp_path, command=executable)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "resources_servers/my_env/configs/my_env.yaml").is_file()


def test_init_refuses_two_different_names(tmp_path):
    line = one_line_error(run_gym("env", "init", "foo", "--resources-server", "bar", cwd=tmp_path))
    assert "usage: gym env init <name>" in line
    assert not (tmp_path / "resources_servers").exists()


def test_an_entrypoint_outside_resources_servers_is_refused(tmp_path):
    line = one_line_error(run_gym("init", "+entrypoint=responses_api_agents/my_agent", cwd=tmp_path))
    assert "creates resources_servers/<name> only" in line
    assert list(tmp_path.iterdir()) == []
