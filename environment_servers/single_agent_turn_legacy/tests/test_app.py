"""single_agent_turn_legacy over HTTP: flat rows in, flat results and failure rows out, over the tally
resources server and recording simple_agent of tests/fixtures and openai_model with the
scripted upstream; every server a real process."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config, run_instance
from tests.helpers import run_fixture_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
RS = {"type": "resources_servers", "name": "tally"}
AGENT = {"type": "responses_api_agents", "name": "tally_agent"}
ADD_TOOL = {
    "type": "function",
    "name": "add",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
}


def run_fixture(fixture: str, config: dict, instance: str, workdir: Path) -> Any:
    return run_fixture_instance(FIXTURES / fixture, config, instance, workdir)


@pytest.fixture(scope="module")
def servers(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    workdir = tmp_path_factory.mktemp("single_agent_turn_legacy")
    model = fresh_model("flat")
    config: dict[str, Any] = {
        "tally": instance_config("resources_servers", "tally", domain="other"),
        "policy_model": instance_config(
            "responses_api_models",
            "openai_model",
            openai_base_url=scripted_upstream.base_url,
            openai_api_key="sk-flat-test",
            openai_model=model,
        ),
        "tally_agent": instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server=RS,
            model_server={"type": "responses_api_models", "name": "policy_model"},
        ),
        "flat": instance_config(
            "environment_servers",
            "single_agent_turn_legacy",
            resources_server=RS,
            agent_server=AGENT,
            resources_tool_transports=["direct_http"],
            cleanup_timeout_seconds=30,
        ),
    }

    def bound(instance: str, port: int) -> None:
        next(iter(next(iter(config[instance].values())).values()))["port"] = port

    with ExitStack() as stack:
        bound(
            "tally",
            stack.enter_context(run_fixture("tally_resources_server.py", config, "tally", workdir)).port,
        )
        bound("policy_model", stack.enter_context(run_instance(config, "policy_model", workdir)).port)
        bound(
            "tally_agent",
            stack.enter_context(run_fixture("recording_agent.py", config, "tally_agent", workdir)).port,
        )
        flat = stack.enter_context(run_instance(config, "flat", workdir))
        yield {"url": flat.url, "model": model, "upstream": scripted_upstream}


def flat_row(**extra: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "add 3"}], "tools": [ADD_TOOL]},
        "expected_total": 3,
        "_ng_task_index": 2,
        "_ng_rollout_index": 0,
        **extra,
    }


async def run(servers: dict, body: dict, *turns: dict) -> tuple[int, Any]:
    servers["upstream"].clear(servers["model"])
    servers["upstream"].script(servers["model"], list(turns))
    response = await request("POST", servers["url"] + "/run", json=body)
    return response.status, await get_response_json(response)


ADDING = ({"output": [function_call("add", {"n": 3})]}, {"output": [assistant_message("3")]})


async def test_a_flat_row_earns_its_reward_and_names_the_agent(servers: dict) -> None:
    status, result = await run(
        servers, flat_row(agent_ref={"type": "responses_api_agents", "name": "tally_agent"}), *ADDING
    )
    assert status == 200, result
    assert result["reward"] == 1.0 and result["agent_ref"] == {"name": "tally_agent"}
    assert "_ng_failure_class" not in result


async def test_a_failed_episode_is_a_flat_failure_row(servers: dict) -> None:
    status, failure = await run(servers, flat_row(fail_at="verify"), *ADDING)
    assert status == 200, failure
    assert failure["_ng_failure_class"] == "environment_server_failed"
    assert (failure["_ng_failure_stage"], failure["_ng_failure_terminal"]) == ("verification", True)
    assert failure["agent_ref"] == {"name": "tally_agent"}
    assert failure["_ng_failure_partial_response"]["output"][-1]["type"] == "message"
    assert "reward" not in failure


async def test_an_episode_body_is_taken_too(servers: dict) -> None:
    row = flat_row()
    episode = {
        "episode_id": {"rollout_id": "2-0"},
        "task": {
            "task_id": {"taskset": "tally", "task_id": "2"},
            "task_input": {
                "responses_create_params": row["responses_create_params"],
                "task_data": {"expected_total": 3},
            },
        },
    }
    status, result = await run(servers, episode, *ADDING)
    assert status == 200 and result["reward"] == 1.0, result


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"task_source": "someone_else"}, "task_source"),
        ({"agent_ref": {"name": "other_agent"}}, "agent_ref"),
        ({"_ng_attempt_index": -1}, "_ng_attempt_index"),
        ({"_ng_rollout_id": "no spaces allowed"}, "rollout_id"),
    ],
)
async def test_a_row_that_cannot_be_an_episode_is_a_422_naming_the_key(
    servers: dict, extra: dict, named: str
) -> None:
    status, answer = await run(servers, flat_row(**extra))
    assert status == 422, answer
    assert named in orjson.dumps(answer).decode()
