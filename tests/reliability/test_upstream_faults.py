"""Model servers and the agent in front of an upstream that breaks HTTP (tests/reliability/faulty_upstream.py).

Every server here is a real process. A reply that breaks off, is not HTTP, has broken framing or is not
JSON must reach the caller as a 502 in the Gym error envelope, and a body that stalls or drips past the
call's deadline as a 504: never a 500, and the server's log gets one classified line, no traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest

from nemo_gym.http.client import RetryPolicy, get_response_json, request
from tests.helpers import StartedServer, instance_config, run_instance, run_server
from tests.reliability import faulty_upstream
from tests.shared_fixtures import closed_port

# The servers' deadline per upstream call; the stalling faults take this long each.
UPSTREAM_DEADLINE_S = 1.0
CALLER_POLICY = RetryPolicy(max_attempts=1, deadline_s=15.0)


@dataclass(frozen=True)
class Fault:
    name: str
    status: int
    error_type: str
    reason: str


FAULTS = [
    Fault("closed_mid_body", 502, "connection", "connection closed mid-body"),
    Fault("not_http", 502, "bad_upstream_response", "not a valid HTTP answer"),
    Fault("bad_chunked", 502, "bad_upstream_response", "not a valid HTTP answer"),
    Fault("chunked_cut_short", 502, "connection", "connection closed mid-body"),
    Fault("not_json", 502, "bad_upstream_response", "invalid JSON"),
    Fault("stall", 504, "timeout", "body not complete within the deadline"),
    Fault("drip", 504, "timeout", "body not complete within the deadline"),
]
ROUTES = ["/v1/responses", "/v1/chat/completions"]
# One of each outcome: a broken connection, an unusable body, a deadline.
AGENT_FAULTS = ("closed_mid_body", "not_json", "drip")


@dataclass
class Servers:
    upstream: StartedServer
    by_name: dict[str, StartedServer]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    workdir = tmp_path_factory.mktemp("upstream_faults")
    with ExitStack() as stack:
        upstream = stack.enter_context(run_server([faulty_upstream.__file__], workdir))
        config = {
            "openai": instance_config(
                "responses_api_models",
                "openai_model",
                openai_base_url=f"{upstream.url}/v1",
                openai_api_key="sk-faults",
                openai_model="faulty",
            ),
            "vllm": instance_config(
                "responses_api_models",
                "vllm_model",
                base_url=f"{upstream.url}/v1",
                api_key="sk-faults",
                model="faulty",
                uses_reasoning_parser=False,
            ),
            # The agent calls the faulty upstream as its model server, to see how it takes a broken peer.
            "faulty_model": {
                "responses_api_models": {
                    "faulty": {"entrypoint": "app.py", "host": upstream.host, "port": upstream.port}
                }
            },
            "unused_resources": {
                "resources_servers": {
                    "unused": {"entrypoint": "app.py", "host": "127.0.0.1", "port": closed_port()}
                }
            },
            "agent": instance_config(
                "responses_api_agents",
                "simple_agent",
                resources_server={"type": "resources_servers", "name": "unused_resources"},
                model_server={"type": "responses_api_models", "name": "faulty_model"},
                rollout_deadline_s=10 * UPSTREAM_DEADLINE_S,
            ),
            "global_http_deadline_s": UPSTREAM_DEADLINE_S,
        }
        started = {
            name: stack.enter_context(run_instance(config, name, workdir))
            for name in ("openai", "vllm", "agent")
        }
        yield Servers(upstream, started)


def prompt(route: str, fault: Fault) -> dict:
    """A one-message request whose text names the fault the upstream must commit."""
    text = f"please fail with fault:{fault.name}"
    if route == "/v1/chat/completions":
        return {"messages": [{"role": "user", "content": text}]}
    return {"input": text}


async def call_and_read_log(server: StartedServer, route: str, body: dict) -> tuple[int, dict, str]:
    """The server's status and error body, and what it logged while answering."""
    logged_before = len(server.log())
    answer = await request("POST", server.url + route, json=body, retry_policy=CALLER_POLICY)
    return answer.status, await get_response_json(answer), server.log()[logged_before:]


def assert_answered_as(fault: Fault, status: int, body: dict, log: str) -> None:
    assert status == fault.status, body
    error = body["error"]
    assert (error["type"], error["status"]) == (fault.error_type, fault.status), error
    assert fault.reason in error["message"], error
    [line] = log.splitlines()  # one line: no traceback, no retry chatter, no warning from a library
    assert line.startswith("WARNING ") and fault.reason in line and line.endswith(f"({fault.status})"), line


@pytest.mark.parametrize("fault", FAULTS, ids=lambda fault: fault.name)
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("model_server", ["openai", "vllm"])
async def test_model_server_answers_a_broken_upstream_with_502_or_504(servers, model_server, route, fault):
    status, body, log = await call_and_read_log(servers.by_name[model_server], route, prompt(route, fault))
    assert_answered_as(fault, status, body, log)
    assert servers.upstream.url in body["error"]["message"]


@pytest.mark.parametrize(
    "fault", [fault for fault in FAULTS if fault.name in AGENT_FAULTS], ids=lambda fault: fault.name
)
async def test_agent_answers_a_broken_model_server_with_502_or_504(servers, fault):
    status, body, log = await call_and_read_log(servers.by_name["agent"], "/v1/responses", prompt("", fault))
    assert_answered_as(fault, status, body, log)
    assert f"{servers.upstream.url}/v1/responses" in body["error"]["message"]
