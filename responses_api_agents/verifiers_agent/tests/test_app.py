"""VerifiersAgent over HTTP: the real `verifiers` library runs the locally defined letter_count environment
(its loop, its tool, its rubric) against openai_model and the scripted upstream, each a real server process;
the upstream plays the model's chat turns."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import read_jsonl
from responses_api_agents.verifiers_agent.app import VerifiersAgentConfig
from tests.helpers import RoleStack, instance_config, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, chat_tool_call, fresh_model
from tests.vllm_script import VllmUpstream, scripted_call

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")  # row 0: 'r' in 'strawberry' -> "3"
ROLLOUT_DEADLINE_S = 4.0
# The agent under test, in front of the model server `policy_model`.
AGENT = {
    "model_server": {"type": "responses_api_models", "name": "policy_model"},
    "vf_env_id": "responses_api_agents.verifiers_agent.letter_count_env",
    "rollout_deadline_s": ROLLOUT_DEADLINE_S,
}
# What every agent config holds besides this agent's own keys.
CONFIG_BASE = {
    "name": "agent",
    "host": "127.0.0.1",
    "port": 0,
    "entrypoint": "app.py",
    "model_server": {"type": "responses_api_models", "name": "m"},
}


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("verifiers_agent")
    with ExitStack() as servers:
        config, models = run_role_models(servers, scripted_upstream, ["policy"], workdir)
        config["agent"] = instance_config("responses_api_agents", "verifiers_agent", **AGENT, max_tokens=64)
        yield RoleStack(
            scripted_upstream, models, urls={"agent": run_with_port(servers, config, "agent", workdir).url}
        )


def reply(text: str) -> dict:
    return {"message": {"role": "assistant", "content": text}}


async def test_the_environment_runs_its_tool_and_its_rubric_pays_the_reward(stack):
    call = chat_tool_call("count_letter", {"word": "strawberry", "letter": "r"})
    stack.script(
        "policy",
        {
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "usage": {"prompt_tokens": 50},
        },
        {**reply("3"), "usage": {"prompt_tokens": 70}},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200, result
    assert result["reward"] == 1.0 and result["response"]["reward"] == 1.0
    assert result["metrics"]["correct_count"] == 1.0
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    # Verifiers ran the tool itself; its result went back to the model under the call's id.
    assert (output[0]["name"], output[0]["call_id"], output[1]["call_id"]) == (
        "count_letter",
        call["id"],
        call["id"],
    )
    assert output[1]["output"] == "3"
    assert output[2]["content"][0]["text"] == "3"
    # Both model calls reached our model server in order, each with everything before it.
    first, second = stack.requests("policy")
    assert [message["role"] for message in first["messages"]] == ["system", "user"]
    assert [message["role"] for message in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3]["tool_call_id"] == call["id"]
    assert first["tools"][0]["function"]["name"] == "count_letter"
    assert result["response"]["usage"]["input_tokens"] == 120
    assert result["response"]["tools"][0]["name"] == "count_letter"


async def test_a_malformed_aggregate_metrics_body_is_a_422_naming_the_field(stack):
    response = await request(
        "POST", stack.urls["agent"] + "/aggregate_metrics", json={"verify_responses": [{}]}
    )
    answer = await get_response_json(response)
    assert response.status == 422, answer
    assert "reward" in orjson.dumps(answer).decode()


async def test_aggregate_metrics_are_summarised_by_the_agent_itself(stack):
    verify_responses = [
        {"_ng_task_index": 0, "_ng_rollout_index": index, "reward": reward}
        for index, reward in enumerate([1.0, 0.0])
    ]
    response = await request(
        "POST", stack.urls["agent"] + "/aggregate_metrics", json={"verify_responses": verify_responses}
    )
    metrics = await get_response_json(response)
    assert response.status == 200, metrics
    assert metrics["agent_metrics"]["mean/reward"] == 0.5


async def test_a_wrong_answer_gets_the_rubrics_zero(stack):
    stack.script("policy", reply("2"))
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 0.0
    assert [item["type"] for item in result["response"]["output"]] == ["message"]


async def test_a_model_error_mid_rollout_fails_it_and_names_the_model_server(stack):
    call = chat_tool_call("count_letter", {"word": "banana", "letter": "a"})
    stack.script(
        "policy",
        {"message": {"role": "assistant", "content": None, "tool_calls": [call]}},
        {"status": 400, "body": {"error": {"message": "context too long", "type": "invalid_request_error"}}},
    )
    status, result = await stack.run("agent", ROWS[2])
    assert status == 400, result
    assert (
        "policy_model" in result["error"]["message"] and "context too long" in orjson.dumps(result).decode()
    )
    assert len(stack.requests("policy")) == 2


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", {"hang": True})
    status, result = await stack.run("agent", ROWS[0])
    assert status == 504 and result["error"]["type"] == "timeout"


async def test_a_developer_message_goes_as_system_and_a_plain_string_prompt_as_user(stack):
    stack.script("policy", reply("3"), reply("3"))
    developer = {**ROWS[0], "responses_create_params": {"input": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "r in strawberry?"}]}}  # fmt: skip
    status, result = await stack.run("agent", developer)
    assert status == 200 and result["reward"] == 1.0, result
    status, result = await stack.run(
        "agent", {**ROWS[0], "responses_create_params": {"input": "r in strawberry?"}}
    )
    assert status == 200 and result["reward"] == 1.0, result
    first, second = stack.requests("policy")
    assert first["messages"][0] == {"role": "system", "content": "Be brief."}
    assert second["messages"] == [{"role": "user", "content": "r in strawberry?"}]


async def test_a_prompt_verifiers_cannot_carry_is_refused_before_any_model_call(stack):
    stack.script(
        "policy",
    )
    call = {"type": "function_call", "name": "count_letter", "arguments": "{}", "call_id": "c1"}
    status, result = await stack.run("agent", {**ROWS[0], "responses_create_params": {"input": [call]}})
    assert status == 422 and "input[0]" in result["error"]["message"]
    assert stack.requests("policy") == []


async def test_an_environment_that_is_not_installed_is_refused_per_row(stack):
    status, result = await stack.run("agent", {**ROWS[0], "vf_env_id": "acereason-math"})
    assert status == 422 and "Prime hub" in result["error"]["message"]


@pytest.mark.parametrize(
    "vf_env_id", ["primeintellect/acereason-math", "acereason-math", "no_such_package.env", ".."]
)
def test_hub_environments_are_refused_at_start_with_the_fix(vf_env_id):
    with pytest.raises(ValidationError, match="Prime hub") as refused:
        VerifiersAgentConfig.model_validate({**CONFIG_BASE, "vf_env_id": vf_env_id})
    assert [error["loc"] for error in refused.value.errors()] == [("vf_env_id",)]


@pytest.fixture(scope="module")
def training_stack(
    vllm_upstream: VllmUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    """The same agent in front of vllm_model, which returns each turn's token ids."""
    workdir = tmp_path_factory.mktemp("verifiers_agent_vllm")
    models = {"policy": fresh_model("verifiers-vllm")}
    vllm = {
        "base_url": vllm_upstream.base_url,
        "api_key": "k",
        "model": models["policy"],
        "uses_reasoning_parser": False,
    }
    config = {
        "policy_model": instance_config(
            "responses_api_models", "vllm_model", **vllm, return_token_id_information=True
        ),
        "agent": instance_config("responses_api_agents", "verifiers_agent", **AGENT),
    }
    with ExitStack() as servers:
        run_with_port(servers, config, "policy_model", workdir)
        yield RoleStack(
            vllm_upstream, models, urls={"agent": run_with_port(servers, config, "agent", workdir).url}
        )


async def test_each_turns_token_ids_go_on_its_last_item(training_stack, vllm_upstream):
    training_stack.script(
        "policy",
        {"tool_calls": [scripted_call("count_letter", {"word": "strawberry", "letter": "r"})]},
        {"text": "3"},
    )
    status, result = await training_stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    recorded = vllm_upstream.requests(training_stack.models["policy"])  # what the engine was given, per turn
    engine_prompts = [entry["prompt_token_ids"] for entry in recorded if "prompt_token_ids" in entry]
    assert [output[0]["prompt_token_ids"], output[2]["prompt_token_ids"]] == engine_prompts
    for turn in (output[0], output[2]):
        assert turn["generation_token_ids"] and len(turn["generation_log_probs"]) == len(
            turn["generation_token_ids"]
        )
    assert "generation_token_ids" not in output[1]


def test_max_concurrent_generation_caps_rollouts_at_once_unless_the_gym_cap_is_set():
    assert (
        VerifiersAgentConfig.model_validate(
            {**CONFIG_BASE, "max_concurrent_generation": 2}
        ).max_concurrent_rollouts
        == 2
    )
    both = {**CONFIG_BASE, "max_concurrent_generation": 2, "max_concurrent_rollouts": 5}
    assert VerifiersAgentConfig.model_validate(both).max_concurrent_rollouts == 5
    assert VerifiersAgentConfig.model_validate(CONFIG_BASE).max_concurrent_rollouts is None
    with pytest.raises(ValidationError, match="group_size"):
        VerifiersAgentConfig.model_validate({**CONFIG_BASE, "group_size": 4})
