"""single_agent_turn over HTTP, every server a real process: a tally resources server (this folder's
tests/fixtures), simple_agent (recording its agent sessions, tests/fixtures), openai_model in front of the scripted upstream, and
environment servers in front of them (typed, flat, and with an admission limit and a short deadline).

Each test checks the outcome and that cleanup closed both sessions of every episode it ran.
"""

import asyncio
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, instance_config, run_instance
from tests.helpers import run_fixture_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
ADD_TOOL = {
    "type": "function",
    "name": "add",
    "description": "add n to the tally",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "strict": True,
}
RS = {"type": "resources_servers", "name": "tally"}
AGENT = {"type": "responses_api_agents", "name": "tally_agent"}
POLL_DEADLINE_S = 30.0


@dataclass
class Stack:
    urls: dict[str, str]
    model: str
    upstream: ScriptedUpstream

    def script(self, *turns: dict) -> None:
        self.upstream.clear(self.model)
        self.upstream.script(self.model, list(turns))


def run_fixture(fixture: str, config: dict, instance: str, workdir: Path) -> Any:
    return run_fixture_instance(FIXTURES / fixture, config, instance, workdir)


def environment_server(implementation: str, **settings: Any) -> dict:
    """An environment server over the tally server and its agent; `settings` override the defaults."""
    defaults = {
        "resources_server": RS,
        "agent_server": AGENT,
        "resources_tool_transports": ["direct_http"],
        "cleanup_timeout_seconds": 30,
    }
    return instance_config("environment_servers", implementation, **{**defaults, **settings})


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("single_agent_turn")
    model = fresh_model("episode")
    config: dict[str, Any] = {
        "tally": instance_config("resources_servers", "tally", domain="other"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-episode-test",
            openai_model=model,
        ),
    }
    urls: dict[str, str] = {}

    def started(server: StartedServer, instance: str) -> None:
        block = next(iter(next(iter(config[instance].values())).values()))
        block["port"] = server.port
        urls[instance] = server.url

    config["tally_mcp"] = instance_config(
        "resources_servers", "tally", domain="other", expose_tools_over_mcp=True
    )
    with ExitStack() as servers:
        for name in ("tally", "tally_mcp"):
            started(
                servers.enter_context(run_fixture("tally_resources_server.py", config, name, workdir)), name
            )
        started(servers.enter_context(run_instance(config, "policy_model", workdir)), "policy_model")
        for agent, resources in (("tally_agent", "tally"), ("tally_mcp_agent", "tally_mcp")):
            config[agent] = instance_config(
                "responses_api_agents",
                "simple_agent",
                resources_server={**RS, "name": resources},
                model_server={"type": "responses_api_models", "name": "policy_model"},
                max_steps=6,
            )
            started(servers.enter_context(run_fixture("recording_agent.py", config, agent, workdir)), agent)
        config["key_model"] = instance_config("responses_api_models", "key_model")
        started(
            servers.enter_context(run_fixture("rollout_key_model_server.py", config, "key_model", workdir)),
            "key_model",
        )
        config["key_agent"] = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server=RS,
            model_server={"type": "responses_api_models", "name": "key_model"},
        )
        started(servers.enter_context(run_instance(config, "key_agent", workdir)), "key_agent")
        config["keyed"] = environment_server("single_agent_turn", agent_server={**AGENT, "name": "key_agent"})
        config["episodes"] = environment_server("single_agent_turn", default_episode_timeout_seconds=60)
        config["short"] = environment_server("single_agent_turn", default_episode_timeout_seconds=2)
        config["one_at_a_time"] = environment_server(
            "single_agent_turn",
            max_concurrent_episodes=1,
            queue_timeout_seconds=0.5,
            default_episode_timeout_seconds=60,
        )
        config["flat"] = environment_server("single_agent_turn_legacy", default_episode_timeout_seconds=60)
        config["episodes_mcp"] = instance_config(
            "environment_servers",
            "single_agent_turn",
            resources_server={**RS, "name": "tally_mcp"},
            agent_server={**AGENT, "name": "tally_mcp_agent"},
            resources_tool_transports=["mcp"],
            cleanup_timeout_seconds=30,
        )
        config["mcp_without_endpoint"] = environment_server(
            "single_agent_turn", resources_tool_transports=["mcp"]
        )
        names = (
            "episodes",
            "short",
            "one_at_a_time",
            "flat",
            "episodes_mcp",
            "mcp_without_endpoint",
            "keyed",
        )
        for name in names:
            started(servers.enter_context(run_instance(config, name, workdir)), name)
        yield Stack(urls, model, scripted_upstream)


def task_input(expected_total: int = 3, **task_data: Any) -> dict:
    return {
        "responses_create_params": {
            "input": [{"role": "user", "content": "add 1, then add 2"}],
            "tools": [ADD_TOOL],
        },
        "task_data": {"expected_total": expected_total, **task_data},
    }


def episode(rollout_id: str, **task_data: Any) -> dict:
    return {
        "episode_id": {"rollout_id": rollout_id, "attempt": 0},
        "task": {
            "task_id": {"taskset": "tally", "task_id": rollout_id},
            "task_input": task_input(**task_data),
        },
    }


def adding_turns() -> list[dict]:
    return [
        {"output": [function_call("add", {"n": 1})]},
        {"output": [function_call("add", {"n": 2})]},
        {"output": [assistant_message("The tally is 3.")]},
    ]


async def post(url: str, body: Any) -> tuple[int, Any]:
    response = await request("POST", url, json=body)
    return response.status, await get_response_json(response)


async def get(url: str) -> Any:
    return await get_response_json(await request("GET", url))


class Sessions:
    """What the resources server and the agent report about sessions, before and after some episodes."""

    def __init__(self, stack: Stack, resources: str = "tally", agent: str = "tally_agent") -> None:
        self.stack = stack
        self.resources = resources
        self.agent = agent

    async def snapshot(self) -> tuple[dict, dict]:
        return await get(self.stack.urls[self.resources] + "/_sessions"), await get(
            self.stack.urls[self.agent] + "/_agent_sessions"
        )

    async def __aenter__(self) -> "Sessions":
        self.before = await self.snapshot()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        pass

    async def assert_all_closed(self, episodes: int, agent_sessions: int | None = None) -> None:
        """`episodes` resources sessions were seeded since entry and each was closed; the agent sessions
        opened since entry (`agent_sessions`, default one per episode) were all closed."""
        (resources, agent) = await self.snapshot()
        seeded = resources["seeded"][len(self.before[0]["seeded"]) :]
        closed = resources["closed"][len(self.before[0]["closed"]) :]
        assert len(set(seeded)) == episodes and set(seeded) <= set(closed), resources
        opened = agent["opened"][len(self.before[1]["opened"]) :]
        assert len(opened) == (episodes if agent_sessions is None else agent_sessions), agent
        assert set(opened) <= set(agent["closed"]) and agent["open_now"] == 0, agent


async def test_an_episode_runs_one_turn_in_both_sessions_and_closes_them(stack: Stack) -> None:
    stack.script(*adding_turns())
    async with Sessions(stack) as sessions:
        status, answer = await post(stack.urls["episodes"] + "/run", episode("7-0"))
        assert status == 200, answer
        assert answer["failure"] is None
        assert answer["episode_id"] == {"rollout_id": "7-0", "attempt": 0}
        assert answer["task_id"] == {"taskset": "tally", "task_id": "7-0"}
        result = answer["result"]
        assert result["reward"] == 1.0
        outputs = [
            item["output"] for item in result["response"]["output"] if item["type"] == "function_call_output"
        ]
        assert outputs == ['{"total":1}', '{"total":3}']
        await sessions.assert_all_closed(episodes=1)


async def test_the_agents_model_calls_carry_the_episodes_rollout_key(stack: Stack) -> None:
    body = episode("keyed-3")
    body["episode_id"]["attempt"] = 2
    status, answer = await post(stack.urls["keyed"] + "/run", body)
    assert status == 200 and answer["failure"] is None, answer
    [message] = answer["result"]["response"]["output"]
    assert message["content"][0]["text"] == "keyed-3-a2"  # the capture key of attempt 2


async def test_tools_granted_over_mcp_earn_the_same_reward(stack: Stack) -> None:
    stack.script(*adding_turns())
    async with Sessions(stack, "tally_mcp", "tally_mcp_agent") as sessions:
        status, answer = await post(stack.urls["episodes_mcp"] + "/run", episode("mcp-0"))
        assert status == 200, answer
        assert answer["failure"] is None and answer["result"]["reward"] == 1.0, answer
        outputs = [
            item["output"]
            for item in answer["result"]["response"]["output"]
            if item["type"] == "function_call_output"
        ]
        assert outputs == ['{"total":1}', '{"total":3}']
        await sessions.assert_all_closed(episodes=1)


async def test_mcp_without_an_mcp_endpoint_is_a_terminal_seed_failure(stack: Stack) -> None:
    async with Sessions(stack) as sessions:
        status, answer = await post(stack.urls["mcp_without_endpoint"] + "/run", episode("no-mcp"))
        assert status == 200, answer
        failure = answer["failure"]
        assert (failure["stage"], failure["terminal"]) == ("seed", True)
        assert "expose_tools_over_mcp" in failure["failure_reason"]
        await sessions.assert_all_closed(episodes=1, agent_sessions=0)


async def test_the_same_task_earns_the_same_reward_through_0_4_run_and_the_flat_server(stack: Stack) -> None:
    row = {"responses_create_params": task_input()["responses_create_params"], "expected_total": 3}
    stack.script(*adding_turns())
    status, direct = await post(stack.urls["tally_agent"] + "/run", row)
    assert status == 200 and direct["reward"] == 1.0, direct

    stack.script(*adding_turns())
    async with Sessions(stack) as sessions:
        flat_row = {**row, "_ng_task_index": 4, "_ng_rollout_index": 1, "agent_ref": {"name": "tally_agent"}}
        status, flat = await post(stack.urls["flat"] + "/run", flat_row)
        assert status == 200, flat
        assert flat["reward"] == direct["reward"] == 1.0
        assert flat["agent_ref"] == {"name": "tally_agent"} and "ng_agent_observations" not in flat
        await sessions.assert_all_closed(episodes=1)


@pytest.mark.parametrize(
    ("fault", "turns", "stage", "terminal"),
    [
        ("seed", [], "seed", False),  # the seed answered 503: worth retrying
        (None, [{"status": 400, "body": {"error": {"message": "bad request"}}}], "agent", True),
        ("verify", None, "verification", True),
    ],
)
async def test_a_failed_step_is_a_failure_of_its_stage_and_cleanup_still_closes_both_sessions(
    stack: Stack, fault: str | None, turns: list | None, stage: str, terminal: bool
) -> None:
    stack.script(*(adding_turns() if turns is None else turns))
    task_data = {"fail_at": fault} if fault else {}
    async with Sessions(stack) as sessions:
        status, answer = await post(stack.urls["episodes"] + "/run", episode(f"fail-{stage}", **task_data))
        assert status == 200, answer
        assert answer["result"] is None
        failure = answer["failure"]
        assert (failure["stage"], failure["terminal"]) == (stage, terminal), failure
        if stage == "verification":
            assert failure["partial_response"]["output"][-1]["content"][0]["text"] == "The tally is 3."
        await sessions.assert_all_closed(episodes=1, agent_sessions=0 if stage == "seed" else 1)


async def test_a_failed_resources_close_is_logged_and_the_result_stands(stack: Stack) -> None:
    stack.script(*adding_turns())
    async with Sessions(stack) as sessions:
        status, answer = await post(stack.urls["episodes"] + "/run", episode("close-fails", fail_at="close"))
        assert status == 200 and answer["result"]["reward"] == 1.0, answer
        await sessions.assert_all_closed(episodes=1)


async def test_an_episode_past_its_deadline_fails_retryably_and_is_cleaned_up(stack: Stack) -> None:
    stack.script({"hang": True})
    async with Sessions(stack) as sessions:
        status, answer = await post(stack.urls["short"] + "/run", episode("slow"))
        assert status == 200, answer
        assert answer["failure"] == {"failure_reason": "Episode timed out", "terminal": False}
        await sessions.assert_all_closed(episodes=1)


async def test_an_episode_that_finds_no_slot_in_time_fails_at_admission(stack: Stack) -> None:
    stack.script({"hang": True})
    asked_before = len(stack.upstream.requests(stack.model))
    holder = asyncio.create_task(post(stack.urls["one_at_a_time"] + "/run", episode("holder")))
    try:
        deadline = time.monotonic() + POLL_DEADLINE_S
        while len(stack.upstream.requests(stack.model)) == asked_before:  # the holder's turn has begun
            assert time.monotonic() < deadline and not holder.done(), (
                "the first episode never reached the model"
            )
            await asyncio.sleep(0.05)
        status, answer = await post(stack.urls["one_at_a_time"] + "/run", episode("waiter"))
        assert status == 200, answer
        assert answer["failure"] == {
            "failure_reason": "Episode admission timed out",
            "terminal": False,
            "stage": "admission",
        }
    finally:
        holder.cancel()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"episode_id": {"rollout_id": "1-0"}, "task": {}},
        {"episode_id": {"rollout_id": "x-a2"}, "task": episode("x")["task"]},  # a retry's capture key
    ],
)
async def test_a_malformed_episode_is_a_422(stack: Stack, body: dict) -> None:
    status, answer = await post(stack.urls["episodes"] + "/run", body)
    assert status == 422, answer
