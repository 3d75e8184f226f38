"""A client cannot hold a server's connection forever or fill its memory: requests that arrive too slowly
get 408, bodies beyond the limit get 413, both before any handler runs, and the server keeps serving."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import requests

from nemo_gym.http.protocol import StartGate
from nemo_gym.testing import StartedServer, instance_config, run_instance
from tests.helpers import REPO_ROOT, gym_command, one_line_error

READ_TIMEOUT_S = 1.0
MAX_BODY_MB = 1
MAX_BODY_BYTES = MAX_BODY_MB * 1024 * 1024
# A refused config ends `gym run` before any server starts; the bound is for a machine busy starting the
# tier's hundred-server deployment on the other worker, where even importing the CLI is slow.
CLI_VERDICT_S = 300


@pytest.fixture(scope="module")
def limited_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    config = {
        "tools": instance_config("resources_servers", "example_single_tool_call"),
        "global_max_request_body_mb": MAX_BODY_MB,
        "global_request_read_timeout_s": READ_TIMEOUT_S,
    }
    with run_instance(config, "tools", tmp_path_factory.mktemp("limits")) as server:
        yield server


def raw_exchange(server: StartedServer, sent: bytes, timeout_s: float = 10.0) -> tuple[bytes, float]:
    """Send `sent` on a new connection and read until the server closes it: (everything read, seconds)."""
    with socket.create_connection((server.host, server.port), timeout=timeout_s) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received, time.monotonic() - started


def status_and_error(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), orjson.loads(body)["error"]


def assert_still_serving(server: StartedServer) -> None:
    assert requests.get(server.url + "/", timeout=5).json() == {"status": "ok"}


def test_headers_that_never_finish_get_408_after_the_read_timeout(limited_server: StartedServer) -> None:
    answer, waited = raw_exchange(limited_server, b"POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: app")
    status, error = status_and_error(answer)
    assert status == 408 and error["type"] == "request_timeout"
    assert "headers" in error["message"] and "global_request_read_timeout_s" in error["message"]
    assert READ_TIMEOUT_S * 0.9 <= waited < READ_TIMEOUT_S + 5
    assert_still_serving(limited_server)


def test_a_body_that_stops_halfway_gets_408_and_frees_the_handler(limited_server: StartedServer) -> None:
    sent = (
        b"POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"
    )
    answer, _ = raw_exchange(limited_server, sent)
    status, error = status_and_error(answer)
    assert status == 408 and "body" in error["message"]
    assert "Traceback" not in limited_server.log()
    assert_still_serving(limited_server)


def test_a_declared_body_over_the_limit_is_refused_before_it_is_sent(limited_server: StartedServer) -> None:
    sent = (
        b"POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
    )
    answer, waited = raw_exchange(limited_server, sent)
    status, error = status_and_error(answer)
    assert status == 413 and error["type"] == "request_too_large"
    assert "global_max_request_body_mb" in error["message"]
    assert waited < READ_TIMEOUT_S, "refused at once, not after waiting for the body"


def test_a_chunked_body_is_refused_once_it_passes_the_limit(limited_server: StartedServer) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(4 * MAX_BODY_MB * 10):
            yield b" " * 100_000

    answer = requests.post(
        limited_server.url + "/verify",
        data=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 413 and answer.json()["error"]["type"] == "request_too_large"
    assert_still_serving(limited_server)


def test_a_body_just_under_the_limit_is_read_and_validated(limited_server: StartedServer) -> None:
    body = orjson.dumps({"responses_create_params": {"input": "x" * (MAX_BODY_BYTES - 1000)}})
    answer = requests.post(limited_server.url + "/verify", data=body, timeout=10)
    assert answer.status_code == 422
    assert len(answer.content) < 10_000, "the echoed input is shortened"


def test_the_head_server_has_the_default_limit(head_server: StartedServer) -> None:
    sent = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (64 * 1024 * 1024 + 1)
    status, error = status_and_error(raw_exchange(head_server, sent)[0])
    assert status == 413 and "67108864 bytes" in error["message"]


@pytest.mark.timeout(CLI_VERDICT_S + 30)
def test_a_bad_limit_in_the_config_is_a_one_line_error(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_bytes(
        orjson.dumps(
            {"tools": instance_config("resources_servers", "example_single_tool_call", domain="agent")}
        )
    )
    result = subprocess.run(
        gym_command(
            "run", f"+config_paths=[{config}]", "++global_max_request_body_mb=-1", "++head_server.port=0"
        ),
        capture_output=True,
        text=True,
        timeout=CLI_VERDICT_S,
        cwd=REPO_ROOT,
    )
    assert "global_max_request_body_mb" in one_line_error(result)


def test_liveness_is_answered_on_a_kept_alive_connection_between_requests(
    limited_server: StartedServer,
) -> None:
    """`GET /` answered by the protocol keeps HTTP's order and keep-alive: three requests sent at once on
    one connection get three answers, in order, and the connection stays open."""
    pipelined = (
        b"POST /verify HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        b"GET /?probe=1 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    with socket.create_connection((limited_server.host, limited_server.port), timeout=10) as sock:
        sock.sendall(pipelined)
        received = b""
        while received.count(b"HTTP/1.1 ") < 3 or not received.endswith(b'{"status":"ok"}'):
            chunk = sock.recv(65536)
            assert chunk, f"closed early after {received!r}"
            received += chunk
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    statuses = [int(part.split(b" ", 1)[0]) for part in received.split(b"HTTP/1.1 ")[1:]]
    assert statuses == [422, 200, 200]


def test_liveness_over_http_1_0_closes_the_connection(limited_server: StartedServer) -> None:
    answer, _ = raw_exchange(limited_server, b"GET / HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b'{"status":"ok"}')


def test_a_get_with_a_body_goes_to_the_app(limited_server: StartedServer) -> None:
    answer = requests.get(limited_server.url + "/", data=b"{}", timeout=5)
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


async def test_the_start_gate_spreads_a_burst_over_loop_passes() -> None:
    loop = asyncio.get_running_loop()
    passes = 0
    ticking = True

    def tick() -> None:
        nonlocal passes
        passes += 1
        if ticking:
            loop.call_soon(tick)

    began_at: list[int] = []

    async def app(scope: dict, receive: object, send: object) -> None:
        began_at.append(passes)

    gate = StartGate(app, per_pass=4)
    tick()
    await asyncio.gather(*(gate({"type": "http"}, None, None) for _ in range(20)))
    ticking = False
    per_pass = [began_at.count(value) for value in set(began_at)]
    assert len(began_at) == 20 and max(per_pass) <= 2 * 4 and len(per_pass) >= 20 // 8
