"""nemo_gym.agents.single_agent_turn when a peer cannot be reached: every server a real process (the tally
resources server of tests/fixtures, environment servers in front of it), the unreachable peers a closed
port. A step that fails is its stage's retryable failure and the resources session is still closed; the
metrics are the resources server's, or a 502 when it cannot be reached. (Episodes that run to the end:
environment_servers/single_agent_turn/tests/test_app.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.envkit.testing import instance_config, post_json, response_with, run_instance
from nemo_gym.http.client import get_response_json, request
from tests.helpers import run_fixture_instance
from tests.shared_fixtures import closed_port

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TALLY = {"type": "resources_servers", "name": "tally"}
PARAMS = {"input": [{"role": "user", "content": "add 1, then add 2"}]}


@dataclass
class Stack:
    tally: str
    agent_unreachable: str
    resources_unreachable: str


def episode_server(resources: str, agent: str) -> dict[str, Any]:
    return instance_config(
        "environment_servers",
        "single_agent_turn",
        resources_server={"type": "resources_servers", "name": resources},
        agent_server={"type": "responses_api_agents", "name": agent},
        resources_tool_transports=["direct_http"],
        cleanup_timeout_seconds=30,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("single_agent_turn_core")
    config: dict[str, Any] = {
        "tally": instance_config("resources_servers", "tally", domain="other"),
        "gone_resources": instance_config("resources_servers", "tally", domain="other", port=closed_port()),
        "gone_agent": instance_config(
            "responses_api_agents",
            "simple_agent",
            port=closed_port(),
            resources_server=TALLY,
            model_server={"type": "responses_api_models", "name": "gone_model"},
        ),
        "gone_model": instance_config("responses_api_models", "openai_model", port=closed_port()),
    }
    with ExitStack() as servers:
        tally = servers.enter_context(
            run_fixture_instance(FIXTURES / "tally_resources_server.py", config, "tally", workdir)
        )
        config["tally"]["resources_servers"]["tally"]["port"] = tally.port
        config["agent_unreachable"] = episode_server("tally", "gone_agent")
        config["resources_unreachable"] = episode_server("gone_resources", "gone_agent")
        urls = {
            name: servers.enter_context(run_instance(config, name, workdir)).url
            for name in ("agent_unreachable", "resources_unreachable")
        }
        yield Stack(tally.url, urls["agent_unreachable"], urls["resources_unreachable"])


def episode(rollout_id: str) -> dict[str, Any]:
    task_input = {"responses_create_params": PARAMS, "task_data": {"expected_total": 3}}
    return {
        "episode_id": {"rollout_id": rollout_id},
        "task": {"task_id": {"taskset": "tally", "task_id": rollout_id}, "task_input": task_input},
    }


async def tally_sessions(stack: Stack) -> dict[str, list[str]]:
    return await get_response_json(await request("GET", f"{stack.tally}/_sessions"))


async def test_an_unreachable_agent_is_a_retryable_agent_failure_and_the_resources_session_is_closed(
    stack: Stack,
) -> None:
    before = await tally_sessions(stack)
    status, answer = await post_json(f"{stack.agent_unreachable}/run", episode("no-agent"))
    assert status == 200, answer
    assert answer["result"] is None and answer["episode_id"] == {"rollout_id": "no-agent", "attempt": 0}
    failure = answer["failure"]
    assert (failure["stage"], failure["terminal"]) == ("agent", False), failure
    assert failure["failure_reason"].startswith("agent failed: ")
    after = await tally_sessions(stack)
    (seeded,) = after["seeded"][len(before["seeded"]) :]
    assert seeded in after["closed"][len(before["closed"]) :]


async def test_an_unreachable_resources_server_is_a_retryable_seed_failure(stack: Stack) -> None:
    status, answer = await post_json(f"{stack.resources_unreachable}/run", episode("no-resources"))
    assert status == 200, answer
    failure = answer["failure"]
    assert (failure["stage"], failure["terminal"]) == ("seed", False), failure
    assert failure["failure_reason"].startswith("seed failed: ")
    assert failure.get("partial_response") is None


async def test_the_metrics_are_the_resources_servers_own(stack: Stack) -> None:
    verified = {"responses_create_params": PARAMS, "response": response_with(), "_ng_rollout_index": 0}
    rollouts = [
        {**verified, "_ng_task_index": task, "reward": reward} for task, reward in enumerate((1.0, 0.0, 1.0))
    ]
    body = {"verify_responses": rollouts}
    status, own = await post_json(f"{stack.tally}/aggregate_metrics", body)
    assert status == 200, own
    assert await post_json(f"{stack.agent_unreachable}/aggregate_metrics", body) == (200, own)
    status, answer = await post_json(f"{stack.resources_unreachable}/aggregate_metrics", body)
    assert (status, answer["error"]["type"]) == (502, "connection")
