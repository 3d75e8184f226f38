"""`gym status`: the instances a running deployment's head server lists, whether each answers and the
headline figures of its `/metrics`; one line saying what to check when no head server answers."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nemo_gym.cli.status import FIGURE_COLUMNS, status_rows
from tests.helpers import RunningDeployment, one_line_error, run_gym, running_deployment
from tests.shared_fixtures import closed_port


@dataclass
class StatusTarget:
    deployment: RunningDeployment
    port: str
    cwd: Path


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StatusTarget]:
    """The demo deployment, run from a folder whose env.yaml is empty (a developer's own never leaks in)."""
    cwd = tmp_path_factory.mktemp("status")
    (cwd / "env.yaml").write_text("{}\n")
    with running_deployment(["--config", "configs/demo.yaml"], cwd=cwd) as deployment:
        yield StatusTarget(deployment, deployment.head_url.rsplit(":", 1)[1], cwd)


def test_env_status_json_lists_a_running_deployment(demo):
    result = run_gym("env", "status", "--json", f"++head_server.port={demo.port}", cwd=demo.cwd)
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout)
    assert {entry["process_name"]: entry["status"] for entry in listed} == {
        "mcqa": "success", "mcqa_simple_agent": "success", "policy_model": "success",
    }  # fmt: skip


def test_the_table_has_a_row_per_instance_with_its_figures(demo):
    result = run_gym("status", f"++head_server.port={demo.port}", cwd=demo.cwd)
    assert result.returncode == 0, result.stderr
    header, *rows = [line.split() for line in result.stdout.splitlines()]
    assert header == [
        "INSTANCE",
        "TYPE",
        "IMPLEMENTATION",
        "URL",
        "PID",
        "STATUS",
        "UPTIME_S",
        *FIGURE_COLUMNS,
    ]
    by_name = {row[0]: row for row in rows}
    assert by_name.keys() == demo.deployment.instances.keys()
    for name, instance in demo.deployment.instances.items():
        assert by_name[name][3:6] == [instance["url"], str(instance["pid"]), "success"]
        assert by_name[name][7].isdigit(), "a server that answers shows its request count"


class NotAGymServer(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a 404 and a multi-line HTML page, as many web servers do."""

    def do_GET(self) -> None:
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_status_of_a_server_that_is_not_a_head_server_is_one_line(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotAGymServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = run_gym("status", f"++head_server.port={server.server_address[1]}", cwd=tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a Gym head server" in lines[0] and "404" in lines[0], result.stderr
    assert "<" not in lines[0]


def test_no_head_server_is_one_line_saying_what_to_check(tmp_path):
    port = closed_port()
    line = one_line_error(run_gym("status", f"++head_server.port={port}", cwd=tmp_path))
    assert f"no head server answers at http://127.0.0.1:{port}" in line
    assert "is `gym run` running, and does head_server.port match it?" in line


def instance(name: str, **more) -> dict:
    return {
        "process_name": name, "server_type": "resources_servers", "name": "impl", "url": f"http://h/{name}",
        "pid": 7, "status": "success", "uptime_seconds": 1.5, **more,
    }  # fmt: skip


def test_a_sharded_deployment_shows_each_replica_and_node_and_dashes_for_missing_figures():
    figures = {
        "requests": 12, "errors_5xx": 1, "latency_p50_s": 0.01234, "latency_p95_s": None, "in_flight": 0,
        "retries": 2,
    }  # fmt: skip
    header, replica, plain = status_rows(
        [
            instance("rs", shard="rs_shard", replica=1, node_id="0123456789abcdef", metrics=figures),
            instance("other", status="connection_error"),
        ]
    )
    assert header[-2:] == ("SHARD", "NODE")
    assert replica[5:] == ("success", "1.5", "12", "1", "0.0123", "-", "0", "2", "rs_shard#1", "0123456789ab")
    assert plain[5:] == ("connection_error", "1.5", *("-",) * len(FIGURE_COLUMNS), "-", "-")
    assert len(status_rows([instance("one")])[0]) == len(header) - 2, "no shard columns without shards"
