"""`gym run` as a user runs it: a real launcher process starting real server processes."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import (
    REPO_ROOT,
    OutputReader,
    all_output,
    established_connections,
    gym_command,
    process_alive,
    run_gym,
    running_deployment,
    wait_until_gone,
    worker_pids,
    write_config,
)

COUNTER_APP = "from tests.fixtures.counter_resources_server import CounterResourcesServer\n\n" + (
    'if __name__ == "__main__":\n    CounterResourcesServer.run_webserver()\n'
)
SLEEPY_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.sleepy_server', run_name='__main__')\n"
NOISY_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.noisy_server', run_name='__main__')\n"
GRANDCHILD_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.grandchild_server', run_name='__main__')\n"
SLOW_APP = (
    "import os\nimport time\n\n"
    "print(f'pid {os.getpid()} loading a very large model...', flush=True)\ntime.sleep(3600)\n"
)
PEEKING_APP = (
    "import urllib.request\n\n"
    "from nemo_gym.global_config import get_global_config_dict\n"
    "from nemo_gym.server_utils import head_server_config_from\n"
    "from tests.fixtures.counter_resources_server import CounterResourcesServer\n\n"
    "head = head_server_config_from(get_global_config_dict())\n"
    "with urllib.request.urlopen(f'http://{head.host}:{head.port}/server_instances', timeout=10) as answer:\n"
    "    print('listed while starting:', answer.read().decode(), flush=True)\n"
    "CounterResourcesServer.run_webserver()\n"
)


def counter_instance(implementation: str = "counter", **inner) -> dict:
    return {"resources_servers": {implementation: {"entrypoint": "app.py", "domain": "other", **inner}}}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A project folder with its own server implementations, as a user's checkout would have."""
    sources = {
        "counter": COUNTER_APP,
        "sleepy": SLEEPY_APP,
        "noisy": NOISY_APP,
        "grandchild": GRANDCHILD_APP,
        "slow": SLOW_APP,
        "peeking": PEEKING_APP,
    }
    for implementation, source in sources.items():
        folder = tmp_path / "resources_servers" / implementation
        folder.mkdir(parents=True)
        (folder / "app.py").write_text(source)
    return tmp_path


@pytest.fixture
def private_tmp(tmp_path: Path) -> Path:
    """The launcher's temporary folder (TMPDIR), so a test sees every run folder it leaves behind."""
    folder = tmp_path / "private_tmp"
    folder.mkdir()
    return folder


def run_dirs(temporary_folder: Path) -> list[Path]:
    return sorted(temporary_folder.glob("gym-run-*"))


def get_status(url: str) -> int:
    with urllib.request.urlopen(url + "/", timeout=5) as answer:
        return answer.status


def test_run_starts_every_instance_and_prints_the_table(workdir):
    config = {"first": counter_instance(), "second": counter_instance()}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        assert set(deployment.instances) == {"first", "second"}
        for name in ("first", "second"):
            assert get_status(deployment.url(name)) == 200
            assert process_alive(deployment.instances[name]["pid"])
        header = deployment.wait_for_output("INSTANCE")
        assert header.split() == ["INSTANCE", "TYPE", "IMPLEMENTATION", "URL", "PID"]
        row = next(line.split() for line in deployment.output.lines if line.startswith("first "))
        pid = str(deployment.instances["first"]["pid"])
        assert row == ["first", "resources_servers", "counter", deployment.url("first"), pid]
        status = run_gym("status", f"++head_server.port={deployment.head_url.rsplit(':', 1)[1]}", timeout=30)
        assert status.returncode == 0, status.stderr
        assert status.stdout.count("success") == 2
        as_json = run_gym(
            "status", "--json", f"++head_server.port={deployment.head_url.rsplit(':', 1)[1]}", timeout=30
        )
        assert as_json.returncode == 0, as_json.stderr
        listed = json.loads(as_json.stdout)
        assert {entry["process_name"]: entry["status"] for entry in listed} == {
            "first": "success",
            "second": "success",
        }


def test_the_head_server_lists_each_instance_as_soon_as_it_is_spawned(workdir):
    """`second` reads the list before it starts serving, so the deployment is still starting then; `first`,
    spawned before it, must already be listed with its process and address."""
    config = {"first": counter_instance(), "second": counter_instance("peeking")}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        line = deployment.wait_for_output("listed while starting:")
        listed = {
            entry["process_name"]: entry for entry in json.loads(line.split("listed while starting:")[1])
        }
        first = deployment.instances["first"]
        assert listed["first"] == first
        assert first["pid"] > 0 and first["start_time"] > 0 and first["url"] == deployment.url("first")
        assert set(deployment.instances) == {"first", "second"}


def test_child_output_is_prefixed_with_its_instance_name(workdir):
    config = {"first": counter_instance()}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        line = deployment.wait_for_output("listening on")
        assert line.startswith("(first) ")


def test_a_dying_child_is_named_and_stops_the_deployment(workdir):
    config = {"victim": counter_instance(), "bystander": counter_instance()}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        pids = deployment.pids()
        os.kill(deployment.instances["victim"]["pid"], signal.SIGKILL)
        line = deployment.wait_for_output("exited with code")
        assert "'victim'" in line and "-9" in line
        assert deployment.process.wait(15) != 0
        assert wait_until_gone(pids) == []


def test_ctrl_c_stops_every_child(workdir):
    config = {"a": counter_instance(), "b": counter_instance()}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        pids = deployment.pids()
        deployment.process.send_signal(signal.SIGINT)
        assert deployment.process.wait(60) == 0
        assert wait_until_gone(pids, 60) == []


def test_killing_the_launcher_leaves_no_orphan_and_no_config_on_disk(workdir, private_tmp):
    config = {"a": counter_instance(), "policy_api_key": "sk-kept-off-disk"}
    env = {"TMPDIR": str(private_tmp)}
    with running_deployment([write_config(workdir, config)], workdir, env) as deployment:
        pids = deployment.pids()
        deployment.process.kill()
        deployment.process.wait(10)
        assert wait_until_gone(pids) == []
    assert run_dirs(private_tmp) == []
    on_disk = [path for path in private_tmp.rglob("*") if path.is_file()]
    assert not [path for path in on_disk if b"sk-kept-off-disk" in path.read_bytes()]


def test_two_deployments_run_side_by_side(workdir):
    config_arg = write_config(workdir, {"counter": counter_instance()})
    with (
        running_deployment([config_arg], workdir) as first,
        running_deployment([config_arg], workdir) as second,
    ):
        assert first.head_url != second.head_url and first.url("counter") != second.url("counter")
        assert get_status(first.url("counter")) == get_status(second.url("counter")) == 200


def test_a_server_that_never_comes_up_is_named_with_its_last_output(workdir):
    config = {"quick": counter_instance(), "slow": counter_instance("sleepy")}
    result = run_gym(
        "run", write_config(workdir, config), "+readiness_deadline_s=2", "++head_server.port=0", cwd=workdir
    )
    assert result.returncode == 1
    assert "did not come up within 2s" in result.stderr
    assert "slow" in result.stderr and "loading a very large model..." in result.stderr
    assert "Traceback" not in result.stderr


def test_config_is_handed_over_in_a_file_not_the_environment(workdir):
    config = {"counter": counter_instance(), "policy_api_key": "sk-never-in-environ"}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        environ = Path(f"/proc/{deployment.instances['counter']['pid']}/environ").read_bytes()
        assert b"sk-never-in-environ" not in environ
        assert b"NEMO_GYM_CONFIG_FILE=" in environ
        with urllib.request.urlopen(deployment.head_url + "/global_config_dict_yaml", timeout=5) as answer:
            assert b"sk-never-in-environ" not in answer.read()


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("unknown implementation", "implementation folder resources_servers/nope not found"),
        ("explicit port taken", "cannot listen on 127.0.0.1:"),
        ("missing file", "not found"),
    ],
)
def test_start_problems_are_one_line(workdir, problem, expected):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        if problem == "unknown implementation":
            args = [write_config(workdir, {"x": counter_instance("nope")})]
        elif problem == "explicit port taken":
            args = [write_config(workdir, {"x": counter_instance(port=busy.getsockname()[1])})]
        else:
            args = ["+config_paths=[absent.yaml]"]
        result = run_gym("run", *args, "++head_server.port=0", cwd=workdir)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.stderr


@pytest.mark.parametrize("ending", ["server killed", "ctrl-c"])
def test_an_overlong_output_line_stops_neither_the_output_nor_the_supervision(workdir, ending):
    config = {"noisy": counter_instance("noisy"), "quiet": counter_instance()}
    args = [write_config(workdir, config), "+readiness_deadline_s=20"]
    with running_deployment(args, workdir) as deployment:
        deployment.wait_for_output("(noisy) after the long line")
        long_line = deployment.wait_for_output("(noisy) xxxxxxxxxx")
        assert "[line truncated" in long_line and len(long_line) < 20_000
        assert deployment.wait_for_output("(noisy) filler line 2999")
        pids = deployment.pids()
        if ending == "server killed":
            os.kill(deployment.instances["noisy"]["pid"], signal.SIGKILL)
            line = deployment.wait_for_output("exited with code")
            assert "'noisy'" in line and "-9" in line
            assert deployment.process.wait(15) == 1
        else:
            deployment.process.send_signal(signal.SIGINT)
            assert deployment.process.wait(15) == 0
        assert wait_until_gone(pids) == []
        assert not [line for line in all_output(deployment.output) if "Traceback" in line]


def test_stopping_finishes_while_a_server_helper_holds_its_output_open(workdir, private_tmp):
    config = {"parent": counter_instance("grandchild")}
    env = {"TMPDIR": str(private_tmp)}
    with running_deployment([write_config(workdir, config)], workdir, env) as deployment:
        helper_pid = int(deployment.wait_for_output("(parent) helper pid").split()[-1])
        try:
            pids = deployment.pids()
            deployment.process.send_signal(signal.SIGINT)
            assert deployment.process.wait(15) == 0
            assert wait_until_gone(pids) == []
            assert not [line for line in all_output(deployment.output) if "Traceback" in line]
            assert run_dirs(private_tmp) == []
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(helper_pid, signal.SIGKILL)


def test_ctrl_c_while_starting_exits_130_and_stops_every_child(workdir):
    config = {"slow": counter_instance("slow"), "quick": counter_instance()}
    process = subprocess.Popen(
        gym_command("run", write_config(workdir, config), "++head_server.port=0"),
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = OutputReader(process)
        slow_pid = int(output.wait_for("(slow) pid ", 60).split()[2])
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 130
        assert wait_until_gone([slow_pid], 5) == []
        lines = all_output(output)
        assert not [line for line in lines if "Traceback" in line]
        assert lines[-1].startswith("Interrupted while starting"), lines[-5:]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


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


def test_a_taken_head_server_port_suggests_any_free_port(workdir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run_gym(
            "run",
            write_config(workdir, {"x": counter_instance()}),
            f"++head_server.port={busy.getsockname()[1]}",
            cwd=workdir,
        )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "++head_server.port=0" in lines[0], result.stderr
    assert "leave the port unset" not in lines[0]


def test_colocated_servers_share_one_process_and_each_keeps_its_port(workdir):
    # Two instances of one implementation share its modules: that is no name clash.
    (workdir / "resources_servers" / "counter" / "helpers.py").write_text("")
    config = {"first": counter_instance(), "second": counter_instance(), "colocate": True}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        assert deployment.instances["first"]["pid"] == deployment.instances["second"]["pid"]
        assert deployment.url("first") != deployment.url("second")
        for name in ("first", "second"):
            assert get_status(deployment.url(name)) == 200
        assert deployment.wait_for_output("listening on").startswith("(colocated) ")


@pytest.mark.parametrize(
    "placement",
    [{"colocate": True, "colocate_num_workers": 2}, {"num_workers": 2}],
    ids=["colocated_workers", "num_workers_of_one_server"],
)
def test_a_dying_worker_stops_the_deployment(workdir, placement):
    instance = counter_instance(num_workers=placement.pop("num_workers", None))
    config = {"first": instance, **placement}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        leader = deployment.instances["first"]["pid"]
        workers = worker_pids(leader)
        assert len(workers) == 1 and get_status(deployment.url("first")) == 200
        os.kill(workers[0], signal.SIGKILL)
        line = deployment.wait_for_output("exited with code")
        assert "'first'" in line
        assert deployment.process.wait(15) != 0
        assert wait_until_gone([leader, *workers], 5) == []


def test_workers_share_the_connections_of_a_burst(workdir):
    """Sixteen connections opened at once reach both workers (one shared socket gave them all to one)."""
    config = {"first": counter_instance(), "colocate": True, "colocate_num_workers": 2}
    with running_deployment([write_config(workdir, config)], workdir) as deployment:
        leader = deployment.instances["first"]["pid"]
        workers = [leader, *worker_pids(leader)]
        port = int(deployment.url("first").rsplit(":", 1)[1])
        connections = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(16)]
        try:
            for connection in connections:
                connection.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                assert connection.recv(4096).startswith(b"HTTP/1.1 200")
            ours = [connection.getsockname()[1] for connection in connections]  # not the launcher's own
            accepted = [established_connections({worker}, [port], ours) for worker in workers]
        finally:
            for connection in connections:
                connection.close()
        assert sum(accepted) == 16 and min(accepted) > 0, accepted


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


def check_settings_in_one_line(workdir: Path, setting: dict, expected: str) -> None:
    for implementation in ("counter", "noisy"):
        folder = workdir / "resources_servers" / implementation
        (folder / "grading.py").write_text("")
        (folder / "scoring.py").write_text("import grading\nimport resources_servers.x.scoring\n")
    args = [write_config(workdir, {"first": counter_instance(), **setting}), "++head_server.port=0"]
    for command in ("run", "validate"):
        result = run_gym(command, *args, cwd=workdir)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.stderr


def test_same_named_modules_imported_by_package_can_be_co_hosted(workdir):
    """Only bare imports share one `sys.modules` entry; `resources_servers.<folder>.grading` do not clash."""
    for implementation in ("counter", "noisy"):
        folder = workdir / "resources_servers" / implementation
        (folder / "grading.py").write_text("")
        (folder / "scoring.py").write_text(f"from resources_servers.{implementation}.grading import *\n")
    config = {"first": counter_instance(), "second": counter_instance("noisy"), "colocate": True}
    result = run_gym("validate", write_config(workdir, config), "++head_server.port=0", cwd=workdir)
    assert result.returncode == 0, result.stderr


def loaded_ray(pid: int) -> bool:
    """Whether process `pid` has Ray's native core mapped, which importing `ray` always loads."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return any(line.rstrip().endswith("_raylet.so") for line in maps.splitlines())


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


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps (Linux)")
def test_a_single_host_deployment_neither_imports_nor_starts_ray(scripted_upstream):
    args = [
        "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,"
        "configs/policy_model.yaml]",
        f"+policy_base_url={scripted_upstream.base_url}",
        "+policy_api_key=sk-no-ray",
        "+policy_model_name=no-ray",
    ]
    with running_deployment(args, REPO_ROOT) as deployment:
        processes = [deployment.process.pid, *deployment.pids()]
        assert len(processes) >= 4  # the launcher, the resources server, the agent, the model server
        assert [pid for pid in processes if loaded_ray(pid)] == []
        assert not {"raylet", "gcs_server"} & set(child_names(processes))


def child_names(parents: list[int]) -> list[str]:
    """The command names of the processes whose parent is one of `parents`."""
    names = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name, rest = (entry / "stat").read_text().rsplit(")", 1)
        except OSError:
            continue  # the process ended while /proc was read
        if int(rest.split()[1]) in parents:
            names.append(name.split("(", 1)[1])
    return names
