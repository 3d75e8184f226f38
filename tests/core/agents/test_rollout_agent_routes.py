"""RolloutAgent's route helpers (`seeded_loop_verified` within `as_rollout`, `loop_responses`) through a real agent process
(tests/fixtures/one_turn_agent.py) in front of the shipped counter environment and openai_model, both real
servers; the scripted upstream plays the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config
from tests.helpers import run_fixture_instance, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, assistant_message

AGENT = Path(__file__).resolve().parents[2] / "fixtures" / "one_turn_agent.py"
ROLLOUT_DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def servers(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    workdir = tmp_path_factory.mktemp("rollout_agent_routes")
    with ExitStack() as stack:
        config, models = run_role_models(stack, scripted_upstream, ["policy"], workdir)
        config["counter_rs"] = instance_config(
            "resources_servers", "example_session_state_mgmt", domain="agent"
        )
        run_with_port(stack, config, "counter_rs", workdir)
        config["agent"] = instance_config(
            "responses_api_agents",
            "one_turn_agent",
            resources_server={"type": "resources_servers", "name": "counter_rs"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            rollout_deadline_s=ROLLOUT_DEADLINE_S,
        )
        agent = stack.enter_context(run_fixture_instance(AGENT, config, "agent", workdir))
        yield agent.url, models["policy"]


def row(initial: int, expected: int) -> dict:
    params = {"input": [{"role": "user", "content": "what is the count?"}]}
    return {"responses_create_params": params, "initial_count": initial, "expected_count": expected}


async def test_seeded_loop_verified_seeds_runs_the_loop_and_verifies_in_one_session(
    servers, scripted_upstream
):
    url, model = servers
    scripted_upstream.script(
        model, [{"output": [assistant_message("4")]}, {"output": [assistant_message("4")]}]
    )
    seeded_as_expected = await request("POST", url + "/run", json=row(initial=4, expected=4))
    other_count = await request("POST", url + "/run", json=row(initial=4, expected=5))
    answers = [await get_response_json(seeded_as_expected), await get_response_json(other_count)]
    assert [answer["reward"] for answer in answers] == [1.0, 0.0], "verify saw the session the seed made"
    assert answers[0]["response"]["output"][0]["content"][0]["text"] == "4"


async def test_the_run_keeps_the_rollout_deadline(servers, scripted_upstream):
    url, model = servers
    scripted_upstream.script(model, [{"hang": True}])
    answer = await request("POST", url + "/run", json=row(initial=0, expected=0))
    body = await get_response_json(answer)
    assert answer.status == 504 and body["error"]["type"] == "timeout", body


async def test_loop_responses_runs_the_loop_without_seeding_or_verifying(servers, scripted_upstream):
    url, model = servers
    scripted_upstream.script(model, [{"output": [assistant_message("hi")]}])
    answer = await request("POST", url + "/v1/responses", json={"input": "hello"}, cookies={"caller": "c1"})
    body = await get_response_json(answer)
    assert answer.status == 200 and body["output"][0]["content"][0]["text"] == "hi", body
    assert answer.cookies["caller"].value == "c1", "the caller's cookies come back with the rollout's"
    assert scripted_upstream.requests(model)[-1]["body"]["input"] == "hello", "the loop got the params"
