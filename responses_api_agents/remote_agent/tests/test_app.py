"""RemoteAgent over HTTP, every piece a real server process on 127.0.0.1: the shipped example_session_state_mgmt
environment (a per-rollout counter, so a reward of 1.0 proves Gym ran the tools in the seeded session), a
user's agent service (tests/agent_service.py, which asks an openai_model server for each step) and the
scripted upstream behind that model server (the one test double), playing the model."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import read_jsonl
from tests.helpers import instance_config, run_instance, run_server
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

HERE = Path(__file__).resolve().parent
ENVIRONMENT = "example_session_state_mgmt"
ROWS = read_jsonl(HERE.parents[2] / "resources_servers" / ENVIRONMENT / "data" / "example.jsonl")
ROW = ROWS[0]  # "add 1 then add 2 then get the count", from 3: expects 6
API_KEY = "sk-remote-service-0123456789"
HANG_TIMEOUT_S = 2.0
CONTROL_TIMEOUT_S = 10.0


@dataclass
class Stack:
    agent_url: str
    impatient_agent_url: str
    short_rollout_agent_url: str
    service_url: str
    model: str
    upstream: ScriptedUpstream

    def script(self, *turns: dict) -> None:
        self.upstream.clear(self.model)
        self.upstream.script(self.model, list(turns))
        self.control("POST", "/_reset", {})

    def faults(self, *faults: dict) -> None:
        self.control("POST", "/_faults", {"faults": list(faults)})

    def service_calls(self) -> list[dict[str, Any]]:
        return self.control("GET", "/_calls")

    def control(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else orjson.dumps(body)
        call = urllib.request.Request(self.service_url + path, data=data, method=method)
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            call, timeout=CONTROL_TIMEOUT_S
        ) as answer:
            return orjson.loads(answer.read())


def agent_settings(agent_base_url: str, **overrides: Any) -> dict:
    return instance_config(
        "responses_api_agents",
        "remote_agent",
        agent_base_url=agent_base_url,
        agent_api_key=API_KEY,
        resources_server={"type": "resources_servers", "name": ENVIRONMENT},
        **overrides,
    )


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("remote_agent")
    model = fresh_model("remote-agent")
    config = {
        ENVIRONMENT: instance_config("resources_servers", ENVIRONMENT, domain="agent"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-model",
            openai_model=model,
        ),
    }
    with ExitStack() as servers:
        for name, server_type, folder in (
            (ENVIRONMENT, "resources_servers", ENVIRONMENT),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        service = servers.enter_context(
            run_server(
                [str(HERE / "agent_service.py")],
                workdir,
                {"EXPECTED_API_KEY": API_KEY, "MODEL_SERVER_URL": f"http://127.0.0.1:{started.port}"},
            )
        )
        config["agent"] = agent_settings(service.url + "/")
        config["impatient_agent"] = agent_settings(service.url, remote_responses_timeout_secs=HANG_TIMEOUT_S)
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        config["short_rollout_agent"] = agent_settings(service.url, run_timeout_secs=HANG_TIMEOUT_S)
        impatient = servers.enter_context(run_instance(config, "impatient_agent", workdir))
        short = servers.enter_context(run_instance(config, "short_rollout_agent", workdir))
        yield Stack(agent.url, impatient.url, short.url, service.url, model, scripted_upstream)


async def run(url: str, row: dict) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


def summary(item: dict) -> tuple:
    return item["type"], item.get("call_id"), item.get("output")


def counting_turns() -> list[dict]:
    """The model's steps for ROW: two increments in one turn, a read, then the answer."""
    return [
        {
            "output": [
                function_call("increment_counter", {"count": 1}),
                function_call("increment_counter", {"count": 2}),
            ]
        },
        {
            "output": [function_call("get_counter_value", {})],
            "usage": {"input_tokens": 20, "output_tokens": 3},
        },
        {"output": [assistant_message("The count is 6.")]},
    ]


async def test_gym_runs_the_calls_the_service_leaves_and_verifies_the_whole_conversation(stack):
    stack.script(*counting_turns())
    status, result = await run(stack.agent_url, ROW)
    assert status == 200, result
    assert result["reward"] == 1.0, "the increments ran in the rollout's seeded session"
    output = result["response"]["output"]
    assert [item["type"] for item in output] == [
        "function_call", "function_call", "function_call_output", "function_call_output",
        "function_call", "function_call_output", "message",
    ]  # fmt: skip
    assert orjson.loads(output[5]["output"]) == {"count": 6}
    assert result["response"]["usage"]["input_tokens"] == 40  # 10 + 20 + 10

    first, second, third = stack.service_calls()
    assert first["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert first["body"]["input"] == ROW["responses_create_params"]["input"]
    assert first["body"]["tools"] == ROW["responses_create_params"]["tools"]
    sent_back = third["body"]["input"][len(ROW["responses_create_params"]["input"]) :]
    assert [summary(item) for item in sent_back] == [summary(item) for item in output[:6]]
    assert first["cookies"] == {}, "the resources server's session never reaches the service"
    assert set(second["cookies"]) == {"service_session"} and third["cookies"] == second["cookies"]
    assert "initial_count" not in first["body"] and "expected_count" not in first["body"]


async def test_the_services_own_tool_calls_pass_through_unrun(stack):
    stack.script(
        {"output": [function_call("service_clock", {}, call_id="own_1")]},
        {"output": [assistant_message("It is noon; the count is 3.")]},
    )
    row = {**ROW, "expected_count": ROW["initial_count"]}
    status, result = await run(stack.agent_url, row)
    assert status == 200, result
    assert result["reward"] == 1.0, "no increment ran"
    output = result["response"]["output"]
    assert [(item["type"], item.get("call_id")) for item in output] == [
        ("function_call", "own_1"), ("function_call_output", "own_1"), ("message", None),
    ]  # fmt: skip
    assert output[1]["output"] == "12:00", "the service's own answer, not a tool run by Gym"
    assert len(stack.service_calls()) == 1


async def test_a_call_that_may_not_run_goes_back_to_the_service_as_its_output(stack):
    stack.script(
        {
            "output": [
                function_call("verify", {}),
                {**function_call("increment_counter", {}), "arguments": "{oops"},
            ]
        },
        {"output": [assistant_message("Sorry.")]},
    )
    status, result = await run(stack.agent_url, ROW)
    assert status == 200, result
    errors = [
        orjson.loads(item["output"])["error"] for item in result["response"]["output"] if "output" in item
    ]
    assert errors[0].startswith("Unknown tool 'verify'") and errors[1].startswith(
        "Invalid tool call arguments"
    )
    assert result["reward"] == 0.0


async def test_unavailable_then_dropped_then_answered_is_retried_within_one_step(stack):
    stack.script(*counting_turns())
    stack.faults({"status": 503, "retry_after": 0}, {"disconnect": True})
    status, result = await run(stack.agent_url, ROW)
    assert status == 200, result
    assert result["reward"] == 1.0
    assert len(stack.service_calls()) == 2 + 3, "two failed attempts, then the three steps"


async def test_a_service_that_stays_unavailable_fails_the_rollout_after_its_attempts(stack):
    stack.script(*counting_turns())
    stack.faults(*[{"status": 503, "retry_after": 0}] * 3)
    status, result = await run(stack.agent_url, ROW)
    assert status == 502, result
    assert result["error"]["type"] == "remote_agent_unavailable"
    assert "HTTP 503 on every attempt" in result["error"]["message"]
    assert len(stack.service_calls()) == 3, "remote_max_attempts, no more"


async def test_a_refusal_is_terminal_at_once_with_the_services_reason_and_no_key(stack):
    stack.script(*counting_turns())
    stack.faults({"status": 400, "body": {"error": f"unsupported tool schema (key {API_KEY})"}})
    status, result = await run(stack.agent_url, ROW)
    assert status == 400, result
    error = result["error"]
    assert error["type"] == "remote_agent_refused" and "retrying will not help" in error["message"]
    assert "unsupported tool schema" in error["cause"]
    assert API_KEY not in orjson.dumps(result).decode()
    assert len(stack.service_calls()) == 1, "not retried"


async def test_a_hanging_service_fails_the_rollout_at_the_call_deadline(stack):
    stack.script(*counting_turns())
    stack.faults({"hang": True})
    status, result = await run(stack.impatient_agent_url, ROW)
    assert status == 504, result
    assert result["error"]["type"] == "remote_agent_timeout"
    assert f"remote_responses_timeout_secs={HANG_TIMEOUT_S:g}s" in result["error"]["message"]
    assert len(stack.service_calls()) == 1, "a call that timed out is not sent again"


async def test_a_hanging_service_is_cut_off_by_the_rollouts_deadline_when_that_comes_first(stack):
    stack.script(*counting_turns())
    stack.faults({"hang": True})
    status, result = await run(stack.short_rollout_agent_url, ROW)
    assert status == 504, result
    message = result["error"]["message"]
    assert "deadline" in message and "remote_responses_timeout_secs" not in message, (
        "the rollout's, not the call's"
    )


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ({"answer": {"id": "resp_1", "output": "not a list"}}, "invalid Responses API object"),
        ({"answer": [1, 2]}, "a JSON list, not a Response object"),
        ({"text": "<html>oops</html>"}, "not JSON"),
        ({"redirect": "http://127.0.0.1:9/elsewhere"}, "redirects are not followed"),
    ],
    ids=["wrong_shape", "not_an_object", "not_json", "redirect"],
)
async def test_an_unusable_answer_is_a_502_that_says_what_was_wrong(stack, fault, expected):
    stack.script(*counting_turns())
    stack.faults(fault)
    status, result = await run(stack.agent_url, ROW)
    assert status == 502, result
    assert expected in result["error"]["message"]
    assert len(stack.service_calls()) == 1


async def test_responses_route_runs_the_loop_and_keeps_the_services_cookies_to_itself(stack):
    """Also: a field set to null (a dumped request often has many) is not sent to the service."""
    stack.script({"output": [function_call("get_counter_value", {})]}, {"output": [assistant_message("0")]})
    response = await request(
        "POST",
        stack.agent_url + "/v1/responses",
        json={"input": "count?", "tools": ROW["responses_create_params"]["tools"], "model": None},
    )
    result = await get_response_json(response)
    assert response.status == 200, result
    assert [item["type"] for item in result["output"]] == ["function_call", "function_call_output", "message"]
    assert "service_session" not in response.cookies
    sent = stack.service_calls()[0]["body"]
    assert sent["input"] == [{"role": "user", "content": "count?", "type": "message"}]
    assert "model" not in sent


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:hunter2-secret@127.0.0.1:9", "must not hold credentials"),
        ("http://127.0.0.1:9/agent?token=abc", "must not carry a query string"),
        ("127.0.0.1:9", "must be an absolute http:// or https:// URL"),
    ],
    ids=["credentials", "query", "no_scheme"],
)
def test_an_unusable_agent_base_url_stops_the_server_at_start(tmp_path, url, expected):
    config = {"agent": agent_settings(url)}
    with pytest.raises(RuntimeError) as refused:
        with run_instance(config, "agent", tmp_path):
            pass
    assert "agent_base_url" in str(refused.value) and expected in str(refused.value)
    assert "hunter2-secret" not in str(refused.value) and API_KEY not in str(refused.value)
