"""What `gym run` and `gym validate` check before any server starts (nemo_gym.launch.preflight): each
problem is one line naming the setting, from both commands."""

import pytest

from tests.helpers import run_gym, write_config
from tests.launch_projects import check_settings_in_one_line, counter_instance


@pytest.mark.parametrize(("command", "value"), [("run", "abc"), ("run", "-1"), ("validate", "0")])
def test_readiness_deadline_must_be_a_positive_number(workdir, command, value):
    result = run_gym(
        command,
        write_config(workdir, {"x": counter_instance()}),
        f"+readiness_deadline_s={value}",
        "++head_server.port=0",
        cwd=workdir,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "readiness_deadline_s must be a positive number" in lines[0], result.stderr
    assert repr(value) in lines[0] or value in lines[0]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"colocate": "yes"}, "colocate must be true or false, got 'yes'"),
        ({"colocate": True, "colocate_num_workers": 0}, "colocate_num_workers must be a whole number"),
        (
            {"colocate": True, "second": counter_instance("noisy")},
            "instances 'first' and 'second' both have a module named 'grading'",
        ),
        (
            {"colocate": True, "first": counter_instance(num_workers=2)},
            "'first': num_workers has no effect with colocate: true",
        ),
    ],
)
def test_colocation_settings_are_checked_in_one_line(workdir, setting, expected):
    check_settings_in_one_line(workdir, setting, expected)


def referring_to(name: str) -> dict:
    return counter_instance(peer={"type": "resources_servers", "name": name})


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ({"shards": 5}, "shards must map shard names to {servers, replicas, num_cpus, placement_strategy}"),
        ({"shards": {"s": {"servers": ["nope"]}}}, "shards.s.servers: 'nope' is not a server instance"),
        ({"shards": {"s": {"servers": ["first"], "replicas": 0}}}, "shards.s: replicas"),
        ({"shards": {"s": {"servers": ["first"], "placement_strategy": "EVERYWHERE"}}}, "placement_strategy"),
        ({"shards": {"s": {"servers": ["first"], "gpus": 1}}}, "shards.s: gpus"),
        (
            {
                "second": counter_instance(),
                "shards": {"a": {"servers": ["first"]}, "b": {"servers": ["first", "second"]}},
            },
            "'first' is in shards 'a' and 'b'",
        ),
        (
            {"second": referring_to("first"), "shards": {"a": {"servers": ["first"]}}},
            "'second' (in no shard) refers to 'first' of shard 'a'",
        ),
        (
            {"second": counter_instance("noisy"), "shards": {"a": {"servers": ["first", "second"]}}},
            "instances 'first' and 'second' both have a module named 'grading'",
        ),
    ],
)
def test_shard_settings_are_checked_in_one_line_before_ray_is_needed(workdir, setting, expected):
    check_settings_in_one_line(workdir, setting, expected)


def test_a_server_that_never_finishes_its_config_check_is_named(workdir):
    config = write_config(workdir, {"quick": counter_instance(), "stuck": counter_instance("slow")})
    result = run_gym("validate", config, "+readiness_deadline_s=2", "++head_server.port=0", cwd=workdir)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "Server instance 'stuck' did not finish checking its config within 2s" in lines[0]
    )


def test_a_crash_in_the_config_check_is_reported_with_its_last_line(workdir):
    folder = workdir / "resources_servers" / "crashing"
    folder.mkdir()
    (folder / "app.py").write_text("raise RuntimeError('the model file is corrupt')\n")
    config = write_config(workdir, {"broken": counter_instance("crashing")})
    result = run_gym("validate", config, "++head_server.port=0", cwd=workdir)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].endswith(
        "Server instance 'broken' failed its config check (exit code 1): "
        "RuntimeError: the model file is corrupt"
    )
