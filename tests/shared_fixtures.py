import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml

from nemo_gym.http.client import close_global_aiohttp_client
from tests.helpers import StartedServer, run_server
from tests.upstream_script import ScriptedUpstream
from tests.vllm_script import VllmUpstream

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SECRET = "test-deployment-secret"
COOKIE_NAME = "CounterResourcesServer___counter"


def unique_key() -> str:
    return uuid.uuid4().hex


def closed_port() -> int:
    """A port nothing listens on (bound then released by this process)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
async def _close_pooled_http_client() -> AsyncIterator[None]:
    """Each test runs in its own event loop; close the pooled session made in it."""
    yield
    await close_global_aiohttp_client()


@pytest.fixture(scope="session")
def flaky_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """A real aiohttp server in a subprocess whose failures are scripted by URL (see fixtures/)."""
    with run_server([str(FIXTURES / "flaky_http_server.py")], tmp_path_factory.mktemp("flaky")) as server:
        yield server


def write_config(path: Path, flaky_server: StartedServer) -> Path:
    config = {
        "counter": {
            "resources_servers": {
                "counter": {"entrypoint": "app.py", "host": "127.0.0.1", "port": 0, "domain": "other"}
            }
        },
        "fake_upstream": {
            "responses_api_models": {
                "flaky": {"entrypoint": "app.py", "host": "127.0.0.1", "port": flaky_server.port}
            }
        },
        "dead_upstream": {
            "responses_api_models": {
                "flaky": {"entrypoint": "app.py", "host": "127.0.0.1", "port": closed_port()}
            }
        },
        "policy_api_key": "sk-very-secret",
        "global_http_max_attempts": 2,
        "global_http_deadline_s": 5,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="session")
def counter_server(tmp_path_factory, flaky_server) -> Iterator[StartedServer]:
    """The resources server of fixtures/counter_resources_server.py, as the launcher would start it."""
    workdir = tmp_path_factory.mktemp("counter")
    env = {
        "NEMO_GYM_CONFIG_FILE": str(write_config(workdir / "config.yaml", flaky_server)),
        "NEMO_GYM_CONFIG_PATH": "counter",
        "NEMO_GYM_SESSION_SECRET": SECRET,
    }
    with run_server([str(FIXTURES / "counter_resources_server.py")], workdir, env) as server:
        yield server


@pytest.fixture(scope="session")
def head_server(tmp_path_factory, flaky_server) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("head")
    env = {"NEMO_GYM_CONFIG_FILE": str(write_config(workdir / "config.yaml", flaky_server))}
    with run_server([str(FIXTURES / "head_server_main.py")], workdir, env) as server:
        yield server


@pytest.fixture(scope="session")
def scripted_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScriptedUpstream]:
    """The scripted OpenAI-compatible upstream (tests/scripted_upstream.py); script it per model name."""
    server_file = FIXTURES.parent / "scripted_upstream.py"
    with run_server([str(server_file)], tmp_path_factory.mktemp("scripted_upstream")) as server:
        yield ScriptedUpstream(server.host, server.port)


@pytest.fixture(scope="session")
def vllm_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmUpstream]:
    """The vLLM-compatible upstream (tests/vllm_upstream.py): scripted text, real BPE token ids."""
    server_file = FIXTURES.parent / "vllm_upstream.py"
    with run_server([str(server_file)], tmp_path_factory.mktemp("vllm_upstream")) as server:
        yield VllmUpstream(server.host, server.port)
