"""HaystackAgent over HTTP: the real Haystack Agent of the shipped pipeline runs a rollout of the shipped
aviary environment (its calculator and submit_answer tools called on the resources server), with
openai_model and the scripted upstream, each a real server process; the upstream plays the model's turns."""

import asyncio
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import read_jsonl
from responses_api_agents.haystack_agent.app import FOLDER, HaystackAgentConfig
from tests.helpers import RoleStack, instance_config, run_role_models, run_with_port
from tests.upstream_script import (
    ScriptedUpstream,
    assistant_message,
    function_call,
)

AVIARY = Path(__file__).resolve().parents[3] / "resources_servers" / "aviary"
ROWS = read_jsonl(AVIARY / "data" / "example.jsonl")  # row 0: 14 trays of 12 muffins, 97 sold -> 71
ROLLOUT_DEADLINE_S = 4.0


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("haystack_agent")
    with ExitStack() as servers:
        config, models = run_role_models(servers, scripted_upstream, ["policy"], workdir)
        config["aviary_env"] = instance_config("resources_servers", "aviary", domain="math")
        run_with_port(servers, config, "aviary_env", workdir)
        config["agent"] = instance_config(
            "responses_api_agents",
            "haystack_agent",
            resources_server={"type": "resources_servers", "name": "aviary_env"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            rollout_deadline_s=ROLLOUT_DEADLINE_S,
        )
        yield RoleStack(
            scripted_upstream, models, urls={"agent": run_with_port(servers, config, "agent", workdir).url}
        )


def kinds(output: list[dict]) -> list[str]:
    return [item["type"] for item in output]


async def test_the_haystack_agent_calls_the_environments_tools_and_earns_the_reward(stack):
    tokens = {
        "prompt_token_ids": [1, 2],
        "generation_token_ids": [3, 4],
        "generation_log_probs": [-0.5, -0.1],
    }
    calculate = {**function_call("calculator", {"expr": "14*12-97"}), **tokens}
    submit = function_call("submit_answer", {"answer": "71"})
    stack.script(
        "policy",
        {"output": [calculate], "usage": {"input_tokens": 30}},
        {"output": [submit], "usage": {"input_tokens": 40}},
        {"output": [assistant_message("The answer is 71.")], "usage": {"input_tokens": 50}},
    )
    status, result = await stack.run(
        "agent",
        {**ROWS[0], "responses_create_params": {**ROWS[0]["responses_create_params"], "temperature": 0.25}},
    )
    assert status == 200, result
    assert (result["reward"], result["episode_done"], result["steps"]) == (1.0, True, 2)
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output"] * 2 + ["message"]
    assert [orjson.loads(item["output"])["output"] for item in output[1:4:2]] == ["71", "Correct."]
    assert output[1]["call_id"] == calculate["call_id"] and output[3]["call_id"] == submit["call_id"]
    # The model's own items come back as the model sent them, token ids included.
    assert {key: output[0][key] for key in tokens} == tokens
    assert result["response"]["usage"]["input_tokens"] == 120
    # Three model calls, in order, each seeing the prompt and everything before it, with the row's tools
    # and its sampling settings.
    requests = stack.requests("policy")
    assert [len(body["input"]) for body in requests] == [2, 4, 6]
    assert requests[1]["input"][2]["call_id"] == calculate["call_id"]
    assert requests[2]["input"][2]["generation_token_ids"] == [3, 4]
    assert {tool["name"] for tool in requests[0]["tools"]} == {"calculator", "submit_answer"}
    assert all(body["temperature"] == 0.25 for body in requests)


async def test_a_wrong_answer_earns_nothing(stack):
    stack.script(
        "policy",
        {"output": [function_call("submit_answer", {"answer": "70"})]},
        {"output": [assistant_message("70")]},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 0.0


async def test_a_task_without_tools_is_a_plain_chat(stack):
    stack.script("policy", {"output": [assistant_message("Hello.")]})
    response = await request("POST", stack.urls["agent"] + "/v1/responses", json={"input": "Say hello."})
    answer = await get_response_json(response)
    assert response.status == 200, answer
    assert kinds(answer["output"]) == ["message"]
    assert not stack.requests("policy")[-1].get("tools")


async def test_a_refused_tool_call_is_the_tools_output_and_the_rollout_goes_on(stack):
    stack.script(
        "policy",
        {"output": [function_call("calculator", {"expression": "1+1"})]},
        {"output": [function_call("submit_answer", {"answer": "71"})]},
        {"output": [assistant_message("71")]},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 1.0
    assert (
        "unknown argument 'expression'" in orjson.loads(result["response"]["output"][1]["output"])["detail"]
    )


async def test_a_model_error_mid_rollout_fails_it_and_names_the_model_server(stack):
    stack.script(
        "policy",
        {"output": [function_call("calculator", {"expr": "2+2"})]},
        {"status": 400, "body": {"error": {"message": "context too long", "type": "invalid_request_error"}}},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 400, result
    assert "policy_model" in result["error"]["cause"]["server"]
    assert "context too long" in orjson.dumps(result["error"]["cause"]).decode()


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", {"hang": True})
    status, result = await stack.run("agent", ROWS[0])
    assert status == 504 and result["error"]["type"] == "timeout"


@pytest.mark.parametrize(
    ("params", "named"),
    [
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:,"}]}]},
            "input[0]",
        ),
        ({"input": "q", "tools": [{"type": "function", "name": "verify", "parameters": {}}]}, "verify"),
        (
            {"input": "q", "tools": [{"type": "function", "name": "f", "parameters": {"type": 7}}]},
            "JSON schema",
        ),
    ],
)
async def test_what_haystack_cannot_carry_is_refused_before_any_model_call(stack, params, named):
    stack.script(
        "policy",
    )
    status, result = await stack.run("agent", {**ROWS[0], "responses_create_params": params})
    assert status == 422 and named in result["error"]["message"]
    assert stack.requests("policy") == []


async def test_a_call_of_an_undeclared_tool_is_answered_by_haystack_and_the_rollout_goes_on(stack):
    stack.script(
        "policy",
        {"output": [function_call("launch_rockets", {})]},
        {"output": [function_call("submit_answer", {"answer": "71"})]},
        {"output": [assistant_message("71")]},
    )
    status, result = await stack.run("agent", ROWS[0])
    assert status == 200 and result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert kinds(output) == ["function_call", "function_call_output"] * 2 + ["message"]
    assert "launch_rockets" in output[1]["output"]


async def test_concurrent_rollouts_through_one_pipeline_keep_their_own_sessions_and_turns(stack):
    """The pipeline is shared; each rollout's model turns and environment session stay its own."""
    stack.script(
        "policy",
        {"match": "function_call_output", "output": [assistant_message("done")]},
        {"match": "14 trays", "output": [function_call("submit_answer", {"answer": "71"})]},
        {"match": "Tickets cost", "output": [function_call("submit_answer", {"answer": "44"})]},
    )
    results = await asyncio.gather(stack.run("agent", ROWS[0]), stack.run("agent", ROWS[1]))
    assert [(status, result["reward"]) for status, result in results] == [(200, 1.0), (200, 1.0)]
    for _, result in results:
        assert kinds(result["response"]["output"]) == ["function_call", "function_call_output", "message"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"user_prompt": "{{ question }}"}, "user_prompt to null"),
        (
            {
                "chat_generator": {
                    "type": "haystack.components.generators.chat.openai.OpenAIChatGenerator",
                    "init_parameters": {},
                }
            },
            "NeMoGymResponsesChatGenerator",
        ),  # fmt: skip
    ],
)
def test_a_pipeline_that_cannot_run_here_is_refused_at_start(tmp_path, change, named):
    pipeline = yaml.safe_load((FOLDER / "pipelines" / "pipeline.yaml").read_text())
    pipeline["components"]["agent"]["init_parameters"] |= change
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(pipeline))
    config = {
        "name": "agent",
        "host": "127.0.0.1",
        "port": 0,
        "entrypoint": "app.py",
        "resources_server": {"type": "resources_servers", "name": "aviary_env"},
        "model_server": {"type": "responses_api_models", "name": "policy_model"},
        "pipeline_yaml": str(tmp_path / "pipeline.yaml"),
    }
    with pytest.raises(ValidationError, match=named):
        HaystackAgentConfig.model_validate(config)
    assert HaystackAgentConfig.model_validate({**config, "pipeline_yaml": "pipelines/pipeline.yaml"})
