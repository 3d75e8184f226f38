"""No process outlives its server: a server's CPU-pool workers and multiprocessing resource tracker end with
it, whether the server is stopped, killed outright, or loses its launcher, in every deployment layout."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from nemo_gym.testing import StartedServer, message_item, response_with, run_resources_server
from tests.helpers import (
    RunningDeployment,
    all_output,
    cpu_seconds,
    running_deployment,
    wait_until_gone,
    write_config,
)


def mcqa_instance(**inner: object) -> dict:
    return {"resources_servers": {"mcqa": {"entrypoint": "app.py", "domain": "knowledge", **inner}}}


LAYOUTS = {
    "own_process": {"mcqa": mcqa_instance()},
    "forked_workers": {"mcqa": mcqa_instance(num_workers=2)},
    "colocated_workers": {"mcqa": mcqa_instance(), "colocate": True, "colocate_num_workers": 2},
}
POOL_WORKER_FLAG = b"--multiprocessing-fork"
RESOURCE_TRACKER = b"multiprocessing.resource_tracker"
LEAK_WARNING = "leaked semaphore"
GONE_DEADLINE_S = 20.0
POOL_START_DEADLINE_S = 60.0
BUSY_CPU_S = 1.0
CATASTROPHIC_REGEX = "^(a+)+$"
NUL = b"\0"


def verify_body(text: str, **row: object) -> dict:
    return {
        "responses_create_params": {"input": "Which letter?"},
        "response": response_with(message_item(text)),
        "options": [{"A": "yes"}, {"B": "no"}],
        "expected_answer": "A",
        **row,
    }


def verify_on_a_new_connection(url: str, body: dict, timeout_s: float = 30) -> None:
    """POST /verify on a connection of its own, so that forked workers (SO_REUSEPORT) each get some."""
    response = requests.post(f"{url}/verify", json=body, timeout=timeout_s, headers={"Connection": "close"})
    response.raise_for_status()


def children_of(pid: int) -> list[int]:
    """The processes `pid` started, from any of its threads."""
    children = []
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            children += [int(child) for child in listing.read_text().split()]
    return children


def process_tree(root: int) -> list[int]:
    """`root` and every process below it."""
    tree, pending = [], [root]
    while pending:
        pid = pending.pop()
        tree.append(pid)
        pending += children_of(pid)
    return tree


def command_line(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def is_pool_worker(pid: int) -> bool:
    return POOL_WORKER_FLAG in command_line(pid)


def serving_processes(deployment: RunningDeployment) -> list[int]:
    """The processes that serve HTTP: below the launcher, neither pool workers nor resource trackers."""
    below = process_tree(deployment.process.pid)[1:]
    return [pid for pid in below if not is_pool_worker(pid) and RESOURCE_TRACKER not in command_line(pid)]


def tree_with_every_pool_started(deployment: RunningDeployment) -> list[int]:
    """Verify (through the CPU pool) on new connections until every serving process has pool workers;
    then the whole process tree of the deployment, launcher included."""
    deadline = time.monotonic() + POOL_START_DEADLINE_S
    while True:
        verify_on_a_new_connection(deployment.url("mcqa"), verify_body("\\boxed{A}"))
        servers = serving_processes(deployment)
        if all(any(is_pool_worker(child) for child in children_of(pid)) for pid in servers):
            return process_tree(deployment.process.pid)
        assert time.monotonic() < deadline, f"the pool did not start in every one of {servers}"


def described(pids: list[int]) -> str:
    return "; ".join(f"{pid}: {command_line(pid).replace(NUL, b' ').decode()}" for pid in pids)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_killing_the_launcher_ends_every_process_of_the_deployment(tmp_path, layout):
    with running_deployment([write_config(tmp_path, LAYOUTS[layout])], tmp_path) as deployment:
        pids = tree_with_every_pool_started(deployment)
        deployment.process.kill()
        deployment.process.wait(10)
        left = wait_until_gone(pids, GONE_DEADLINE_S)
        assert left == [], f"still running after the launcher was killed: {described(left)}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_stopping_the_launcher_ends_every_process_and_leaks_no_semaphore(tmp_path, layout):
    with running_deployment([write_config(tmp_path, LAYOUTS[layout])], tmp_path) as deployment:
        pids = tree_with_every_pool_started(deployment)
        deployment.process.send_signal(signal.SIGTERM)
        assert deployment.process.wait(GONE_DEADLINE_S) == 0
        left = wait_until_gone(pids, GONE_DEADLINE_S)
        assert left == [], f"still running after the deployment stopped: {described(left)}"
        output = "\n".join(all_output(deployment.output))
    assert LEAK_WARNING not in output


@pytest.fixture
def one_worker_server(tmp_path: Path) -> Iterator[StartedServer]:
    """A lone mcqa server (as a test or an operator starts one) with a pool of one worker and a long
    grading deadline, so a catastrophic regex keeps that worker busy."""
    with run_resources_server(
        "mcqa", tmp_path, domain="knowledge", grading_timeout_seconds=120, env={"NEMO_GYM_CPU_WORKERS": "1"}
    ) as server:
        verify_on_a_new_connection(server.url, verify_body("\\boxed{A}"))
        yield server


def keep_the_worker_busy(server: StartedServer) -> threading.Thread:
    """Start a verify whose answer extraction backtracks for minutes; return once the worker is at it."""
    (worker,) = [pid for pid in children_of(server.process.pid) if is_pool_worker(pid)]
    idle_cpu = cpu_seconds(worker)
    body = verify_body("a" * 60 + "!", template_metadata={"output_regex": CATASTROPHIC_REGEX})
    caller = threading.Thread(target=_verify_ignoring_the_outcome, args=(server.url, body), daemon=True)
    caller.start()
    deadline = time.monotonic() + POOL_START_DEADLINE_S
    while cpu_seconds(worker) - idle_cpu < BUSY_CPU_S:
        assert time.monotonic() < deadline, "the worker never got busy"
        time.sleep(0.05)
    return caller


def _verify_ignoring_the_outcome(url: str, body: dict) -> None:
    """The call is cut short by the server's stop; only that the worker was busy matters."""
    with contextlib.suppress(requests.RequestException):
        verify_on_a_new_connection(url, body, timeout_s=GONE_DEADLINE_S)


def test_a_stopped_server_kills_its_busy_worker_at_once_and_leaks_no_semaphore(one_worker_server):
    server = one_worker_server
    caller = keep_the_worker_busy(server)
    pids = process_tree(server.process.pid)
    server.process.terminate()
    # It stops by itself (not SIGKILLed by the fixture), without waiting for the busy call.
    assert server.process.wait(GONE_DEADLINE_S) == -signal.SIGTERM
    left = wait_until_gone(pids, GONE_DEADLINE_S)
    assert left == [], f"still running after the server stopped: {described(left)}"
    caller.join(GONE_DEADLINE_S)
    assert LEAK_WARNING not in server.log()


def test_a_server_killed_outright_takes_its_busy_worker_and_tracker_along(one_worker_server):
    server = one_worker_server
    caller = keep_the_worker_busy(server)
    pids = process_tree(server.process.pid)
    server.process.kill()
    server.process.wait(10)
    left = wait_until_gone(pids, GONE_DEADLINE_S)
    assert left == [], f"still running after the server was killed: {described(left)}"
    caller.join(GONE_DEADLINE_S)
