"""A request whose client goes away before the answer is cancelled on the server (NeMo Gym 0.7's
client-disconnect cancellation), and logged as a 499; a real server process, a real socket."""

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from nemo_gym.testing import StartedServer
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[2] / "fixtures" / "holding_resources_server.py"
POLL_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(FIXTURE, "holding", "holding", tmp_path_factory.mktemp("holding")) as started:
        yield started


def held(server: StartedServer) -> dict[str, int]:
    return requests.get(f"{server.url}/_held", timeout=10).json()


def wait_for(server: StartedServer, expected: dict[str, int]) -> None:
    deadline = time.monotonic() + POLL_DEADLINE_S
    while (now := held(server)) != expected:
        assert time.monotonic() < deadline, f"still {now}, never {expected}"
        time.sleep(0.02)


def test_a_client_that_goes_away_cancels_its_request(server: StartedServer) -> None:
    request = (
        b"POST /hold HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    with socket.create_connection((server.host, server.port), timeout=10) as client:
        client.sendall(request)
        wait_for(server, {"holding": 1, "cancelled": 0})
    wait_for(server, {"holding": 0, "cancelled": 1})
    assert '"POST /hold" 499 CLIENT DISCONNECTED (1 total' in server.log()
    assert "Exception in ASGI application" not in server.log()
