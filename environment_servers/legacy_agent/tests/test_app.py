"""legacy_agent over HTTP: the relay in front of simple_agent, over the session-counter environment and
openai_model with the scripted upstream playing the model; every server a real process. What comes
through the relay must be what the agent answers directly."""

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest

from nemo_gym.http.client import request
from nemo_gym.testing import StartedServer, instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

DATA = Path(__file__).resolve().parents[3] / "resources_servers" / "example_session_state_mgmt" / "data"
COUNTER_TOOLS = orjson.loads((DATA / "example.jsonl").read_bytes().splitlines()[0])[
    "responses_create_params"
]["tools"]
AGENT_COOKIE = "SimpleAgent___counter_agent"


@dataclass
class Stack:
    agent_url: str
    relay_url: str
    relay: StartedServer
    model: str
    upstream: ScriptedUpstream

    def script(self, *turns: dict) -> None:
        self.upstream.clear(self.model)
        self.upstream.script(self.model, list(turns))


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("legacy_agent")
    model = fresh_model("relay")
    config = {
        "counter_rs": instance_config("resources_servers", "example_session_state_mgmt", domain="agent"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-relay-test",
            openai_model=model,
        ),
    }
    with ExitStack() as servers:
        for name, server_type, implementation in (
            ("counter_rs", "resources_servers", "example_session_state_mgmt"),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][implementation]["port"] = started.port
        config["counter_agent"] = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server={"type": "resources_servers", "name": "counter_rs"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
        )
        agent = servers.enter_context(run_instance(config, "counter_agent", workdir))
        config["counter_agent"]["responses_api_agents"]["simple_agent"]["port"] = agent.port
        config["counter_environment_server"] = instance_config(
            "environment_servers",
            "legacy_agent",
            agent_server={"type": "responses_api_agents", "name": "counter_agent"},
            max_concurrent_episodes=4,  # accepted, and said to have no effect
        )
        relay = servers.enter_context(run_instance(config, "counter_environment_server", workdir))
        yield Stack(agent.url, relay.url, relay, model, scripted_upstream)


def counter_row(expected: int) -> dict:
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": "add 1 then add 2"}],
            "tools": COUNTER_TOOLS,
        },
        "initial_count": 3,
        "expected_count": expected,
    }


def counting_turns() -> list[dict]:
    return [
        {"output": [function_call("increment_counter", {"count": 1}, call_id="c1")]},
        {"output": [function_call("increment_counter", {"count": 2}, call_id="c2")]},
        {"output": [assistant_message("6")]},
    ]


async def post(url: str, body: object) -> aiohttp.ClientResponse:
    return await request("POST", url, json=body)


def without_ids(result: dict) -> dict:
    """A result without the ids the upstream makes fresh on each call."""
    output = [
        {key: value for key, value in item.items() if key != "id"} for item in result["response"]["output"]
    ]
    return {**result, "response": {"output": output, "usage": result["response"]["usage"]}}


async def test_a_run_through_the_relay_is_the_run_of_the_agent(stack: Stack) -> None:
    stack.script(*counting_turns())
    direct = await post(stack.agent_url + "/run", counter_row(expected=6))
    stack.script(*counting_turns())
    relayed = await post(stack.relay_url + "/run", counter_row(expected=6))
    assert (direct.status, relayed.status) == (200, 200)
    direct_body, relayed_body = orjson.loads(await direct.read()), orjson.loads(await relayed.read())
    assert relayed_body["reward"] == direct_body["reward"] == 1.0
    assert without_ids(relayed_body) == without_ids(direct_body)
    assert AGENT_COOKIE in relayed.cookies  # the agent's Set-Cookie came through
    assert relayed.headers["Content-Type"] == direct.headers["Content-Type"]


async def test_an_agent_error_comes_through_with_its_status_and_body(stack: Stack) -> None:
    stack.script({"status": 400, "body": {"error": {"message": "bad request: max_tokens"}}})
    relayed = await post(stack.relay_url + "/run", counter_row(expected=6))
    body = orjson.loads(await relayed.read())
    assert relayed.status == 400, body
    assert body["error"]["server"] == AGENT_COOKIE
    assert "max_tokens" in orjson.dumps(body).decode()


async def test_a_bad_row_is_the_agents_422(stack: Stack) -> None:
    relayed = await post(stack.relay_url + "/run", {"initial_count": 1})
    body = orjson.loads(await relayed.read())
    assert relayed.status == 422
    assert body["detail"][0]["loc"] == ["body", "responses_create_params"]


async def test_aggregate_metrics_is_the_agents(stack: Stack) -> None:
    body = {
        "verify_responses": [
            {"_ng_task_index": 0, "_ng_rollout_index": index, "reward": reward}
            for index, reward in enumerate([1.0, 0.0])
        ]
    }
    relayed = await post(stack.relay_url + "/aggregate_metrics", body)
    direct = await post(stack.agent_url + "/aggregate_metrics", body)
    assert relayed.status == 200
    assert orjson.loads(await relayed.read()) == orjson.loads(await direct.read())


def test_an_episode_setting_is_accepted_and_said_to_have_no_effect(stack: Stack) -> None:
    assert "max_concurrent_episodes has no effect on a legacy_agent relay" in stack.relay.log()
