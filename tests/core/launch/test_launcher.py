"""`gym run` as a user runs it: a real launcher process starting real server processes."""

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
from tests.launch_projects import counter_instance, get_status, run_dirs


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


def loaded_ray(pid: int) -> bool:
    """Whether process `pid` has Ray's native core mapped, which importing `ray` always loads."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return any(line.rstrip().endswith("_raylet.so") for line in maps.splitlines())


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
