"""`/mcp` (a resources server with `expose_tools_over_mcp`) under malformed requests: never a 5xx, and the
server keeps serving. The route is not in the OpenAPI document, so the corpus of test_bad_input does not
reach it; this one does."""

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from nemo_gym.testing import StartedServer
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[1] / "fixtures" / "notes_resources_server.py"
JSON_RPC = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_note", "arguments": {}}}
PROBES = [
    ("not JSON", b"{", JSON_RPC),
    ("JSON, not JSON-RPC", b'{"hello": 1}', JSON_RPC),
    ("a list", b"[1, 2, 3]", JSON_RPC),
    ("an unknown method", b'{"jsonrpc": "2.0", "id": 1, "method": "nope"}', JSON_RPC),
    ("a call without params", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', JSON_RPC),
    (
        "no Accept header",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        {"Content-Type": "application/json"},
    ),
    ("a forged token", str(CALL).replace("'", '"').encode(), {**JSON_RPC, "X-NeMo-Gym-Session-Token": "x.y"}),
    ("deep nesting", b"[" * 5000 + b"]" * 5000, JSON_RPC),
    ("not UTF-8", b'{"jsonrpc": "2.0", "id": 1, "method": "\xff"}', JSON_RPC),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(
        FIXTURE, "notes_mcp", "notes", tmp_path_factory.mktemp("mcp_bad_input"), expose_tools_over_mcp=True
    ) as started:
        yield started


@pytest.mark.parametrize(("what", "body", "headers"), PROBES, ids=[probe[0] for probe in PROBES])
@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
def test_no_malformed_mcp_request_gets_a_5xx(
    server: StartedServer, what: str, body: bytes, headers: dict, method: str
) -> None:
    answer = requests.request(method, f"{server.url}/mcp", data=body, headers=headers, timeout=60)
    assert answer.status_code < 500, f"{method} /mcp with {what}: {answer.status_code} {answer.text[:300]}"
    if method != "POST":
        assert answer.status_code == 405 and answer.headers["Allow"] == "POST"
    assert requests.get(f"{server.url}/", timeout=30).status_code == 200
