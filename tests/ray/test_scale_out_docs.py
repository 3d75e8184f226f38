"""The commands of docs/scale-out.md ("An existing cluster") work as written, on a head node started with
`ray start` on this machine (the one substitution: a free port for 6379, and `--block` so the test owns
the node's processes; the second node's `ray start` is the multi-machine step one machine cannot take)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import string
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO_ROOT, OutputReader, gym_command
from tests.ray.conftest import RAY_TEST_ENV
from tests.upstream_script import ScriptedUpstream, fresh_model

pytestmark = pytest.mark.timeout(300)
DOCS = REPO_ROOT / "docs" / "scale-out.md"
VERDICT_S = 240.0


def documented_commands() -> list[list[str]]:
    """The commands of the block under "### An existing cluster", continuation lines joined."""
    section = DOCS.read_text().split("### An existing cluster", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)[1]
    joined = re.sub(r"\\\n\s*", " ", block)
    return [shlex.split(line) for line in joined.splitlines() if line and not line.startswith("#")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_existing_cluster_commands_of_the_docs_run_a_sharded_collection(
    scripted_upstream: ScriptedUpstream, tmp_path: Path
):
    head, worker, start, collect = documented_commands()
    assert head[:3] == ["ray", "start", "--head"] and worker[:2] == ["ray", "start"]
    assert start[:3] == ["gym", "env", "start"] and collect[:2] == ["gym", "collect"]
    ray_port = free_port()
    env = {
        **os.environ,
        **RAY_TEST_ENV,
        "POLICY_BASE_URL": scripted_upstream.base_url,
        "POLICY_API_KEY": "sk-docs",
        "POLICY_MODEL": fresh_model("docs"),
    }
    ray_head = [str(Path(sys.executable).parent / "ray"), *head[1:], "--block", "--disable-usage-stats"]
    node = subprocess.Popen(
        [arg.replace("6379", str(ray_port)) for arg in ray_head],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    # What `ray start` prints once its node is up (without --block, it returns then).
    OutputReader(node).wait_for("Ray runtime started", VERDICT_S)
    head_port = f"++head_server.port={free_port()}"
    rows = [
        {"responses_create_params": {"input": f"Weather in {city}?"}} for city in ("Oslo", "Lima", "Pune")
    ]
    (tmp_path / "tasks.jsonl").write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    (tmp_path / "configs").symlink_to(REPO_ROOT / "configs")
    deployment = None
    try:
        deployment = subprocess.Popen(
            gym_command(*[string.Template(arg).substitute(env) for arg in start[1:]], head_port),
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        output = OutputReader(deployment)
        output.wait_for("server(s) are up", VERDICT_S)
        assert "Placed 2 shard replica(s) on 1 Ray node(s)" in "\n".join(output.lines)
        result = subprocess.run(
            gym_command(*collect[1:], head_port), cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=VERDICT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        results = (tmp_path / "results" / "tasks.jsonl").read_bytes().splitlines()
        assert len(results) == len(rows)
        assert {orjson.loads(line)["_ng_shard_replica"] for line in results} <= {"weather#0", "weather#1"}
    finally:
        if deployment is not None and deployment.poll() is None:
            deployment.send_signal(signal.SIGINT)
            deployment.wait(timeout=60)
        node.send_signal(signal.SIGTERM)  # `ray start --block` stops its node's processes, then exits
        node.wait(timeout=60)
