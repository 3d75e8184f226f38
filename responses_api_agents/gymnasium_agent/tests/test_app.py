"""GymnasiumAgent over HTTP: a plan-following reset/step environment (tests/fixtures/gymnasium_env.py), two
openai_model servers (the policy, and the model that plays the user) and two agents, each a real server
process; the scripted upstream plays both models. The user-simulator agent is the one that
example_multi_turn_gymnasium ships (its settings as shipped, wired to this test's environment and user
model)."""

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from pydantic import ValidationError

from nemo_gym.http.client import get_response_json, request
from responses_api_agents.gymnasium_agent.app import GymnasiumAgentConfig
from responses_api_agents.gymnasium_agent.user_simulator import DEFAULT_STOP_MARKER, OPENING_CUE
from tests.helpers import StartedServer, instance_config, run_instance, run_server
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call, reasoning

ROOT = Path(__file__).resolve().parents[3]
FIXTURE_ENV = ROOT / "tests" / "fixtures" / "gymnasium_env.py"
SHIPPED_USER_SIM = (
    ROOT / "resources_servers/example_multi_turn_gymnasium/configs/example_multi_turn_gymnasium_user_sim.yaml"
)
MAX_STEPS = 3
ROLLOUT_DEADLINE_S = 2.0
TASK_INPUT = [{"role": "user", "content": "Let us play.", "type": "message"}]


@dataclass
class Stack:
    agent_url: str
    user_sim_agent_url: str
    policy: str
    user: str
    upstream: ScriptedUpstream
    seen: dict[str, int] = field(default_factory=dict)

    def script(self, policy_turns: list[dict], user_turns: list[dict] = ()) -> None:
        """Replace both models' scripts; `requests` then shows only the requests made after this call."""
        for model, turns in ((self.policy, policy_turns), (self.user, list(user_turns))):
            self.upstream.clear(model)
            self.seen[model] = len(self.upstream.requests(model))
            self.upstream.script(model, turns)

    def requests(self, model: str) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(model)[self.seen.get(model, 0) :]]


def model_instance(upstream: ScriptedUpstream, model: str) -> dict:
    return instance_config(
        "responses_api_models",
        "openai_model",
        openai_base_url=upstream.base_url,
        openai_api_key="sk-gymnasium-agent-test",
        openai_model=model,
        timeout_s=ROLLOUT_DEADLINE_S + 0.5,  # a hung call ends soon after the agent gave up on it
    )


def agent_instance(**inner: Any) -> dict:
    return instance_config(
        "responses_api_agents",
        "gymnasium_agent",
        resources_server={"type": "resources_servers", "name": "planned_env"},
        model_server={"type": "responses_api_models", "name": "policy_model"},
        max_steps=MAX_STEPS,
        rollout_deadline_s=ROLLOUT_DEADLINE_S,
        **inner,
    )


def shipped_user_sim_agent() -> dict:
    shipped = yaml.safe_load(SHIPPED_USER_SIM.read_text())["example_multi_turn_gymnasium_user_sim_agent"]
    inner = shipped["responses_api_agents"]["gymnasium_agent"]
    del inner["datasets"]
    inner["resources_server"]["name"] = "planned_env"
    inner["user_model_server"]["name"] = "user_model"
    return instance_config(
        "responses_api_agents", "gymnasium_agent", **inner, rollout_deadline_s=ROLLOUT_DEADLINE_S
    )


def with_port(block: dict, port: int) -> dict:
    (inner,) = next(iter(block.values())).values()
    inner["port"] = port
    return block


def start_together(
    servers: ExitStack, *starting: AbstractContextManager[StartedServer]
) -> list[StartedServer]:
    """Enter the servers' contexts at once (each start is mostly the interpreter's import time); every one
    that started is stopped with `servers`, even when another failed."""
    with ThreadPoolExecutor(len(starting)) as pool:
        futures = [pool.submit(context.__enter__) for context in starting]
    for context, future in zip(starting, futures, strict=True):
        if future.exception() is None:
            servers.push(context.__exit__)
    return [future.result() for future in futures]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("gymnasium_agent")
    policy, user = fresh_model("policy"), fresh_model("user")
    config = {
        "planned_env": instance_config("resources_servers", "planned", domain="other"),
        "policy_model": model_instance(scripted_upstream, policy),
        "user_model": model_instance(scripted_upstream, user),
    }
    env_config = workdir / "env.yaml"
    env_config.write_bytes(orjson.dumps(config))
    env_variables = {"NEMO_GYM_CONFIG_FILE": str(env_config), "NEMO_GYM_CONFIG_PATH": "planned_env"}
    with ExitStack() as servers:
        peers = start_together(
            servers,
            run_server([str(FIXTURE_ENV)], workdir, env_variables),
            run_instance(config, "policy_model", workdir),
            run_instance(config, "user_model", workdir),
        )
        for name, peer in zip(("planned_env", "policy_model", "user_model"), peers, strict=True):
            with_port(config[name], peer.port)
        config["agent"] = agent_instance()
        config["user_sim_agent"] = shipped_user_sim_agent()
        agent, user_sim_agent = start_together(
            servers, run_instance(config, "agent", workdir), run_instance(config, "user_sim_agent", workdir)
        )
        yield Stack(agent.url, user_sim_agent.url, policy, user, scripted_upstream)


def task(
    *plan: dict, reset_observation: str | None = "The game begins.", task_input: list = TASK_INPUT
) -> dict:
    return {
        "responses_create_params": {"input": task_input},
        "reset_observation": reset_observation,
        "plan": list(plan),
    }


async def run(url: str, row: dict) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


def user_message(text: str) -> dict:
    return {"role": "user", "content": text, "type": "message"}


def without_nulls(value: Any) -> Any:
    """`value` with every null field left out, at any depth: items compare equal whether or not a hop
    dumped their unset fields."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def texts(items: list[dict]) -> list[str]:
    """Each message's text (user messages' string content, assistant messages' output text)."""
    return [
        item["content"] if isinstance(item["content"], str) else item["content"][0]["text"]
        for item in items
        if item.get("type", "message") == "message"
    ]


async def test_an_episode_that_ends_at_the_first_step(stack):
    stack.script([{"output": [assistant_message("I win.")]}])
    status, result = await run(stack.agent_url, task({"reward": 1.0, "terminated": True}))
    assert status == 200, result
    assert (result["reward"], result["terminated"], result["truncated"]) == (1.0, True, False)
    assert len(stack.requests(stack.policy)) == 1
    assert result["info"]["step"] == 0 and result["info"]["resets"] == 1, "one reset, one step"
    assert texts(result["response"]["output"]) == ["I win."]
    assert result["responses_create_params"]["input"] == [*TASK_INPUT, user_message("The game begins.")]
    assert stack.requests(stack.policy)[0]["input"] == result["responses_create_params"]["input"]


async def test_each_turn_sees_every_earlier_item_and_observation_and_rewards_add_up(stack):
    stack.script(
        [
            {"output": [reasoning("think"), assistant_message("A")]},
            {"output": [assistant_message("B")]},
            {"output": [assistant_message("C")]},
        ]
    )
    plan = [
        {"observation": "obs 1", "reward": 0.25},
        {"observation": "obs 2", "reward": 0.25},
        {"observation": "never shown", "reward": 0.5, "terminated": True},
    ]
    status, result = await run(stack.agent_url, task(*plan))
    assert status == 200, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == [
        "reasoning",
        "message",
        "message",
        "message",
        "message",
        "message",
    ]
    assert texts(output) == ["A", "obs 1", "B", "obs 2", "C"]
    assert result["reward"] == 1.0 and result["terminated"]
    prompt = [*TASK_INPUT, user_message("The game begins.")]
    inputs = [without_nulls(body["input"]) for body in stack.requests(stack.policy)]
    assert inputs == [prompt, prompt + without_nulls(output[:3]), prompt + without_nulls(output[:5])]


async def test_the_step_reply_is_what_the_env_acts_on_and_row_fields_reach_it(stack):
    stack.script([{"output": [assistant_message("hit")]}])
    status, result = await run(stack.agent_url, {**task({"terminated": True}), "level": 2})
    assert status == 200
    assert result["info"]["heard"] == "hit"
    assert result["info"]["metadata_keys"] == ["level", "plan", "reset_observation"]


async def test_an_episode_still_running_after_max_steps_is_truncated(stack):
    stack.script([{"output": [assistant_message("again")], "repeat": 10}])
    status, result = await run(stack.agent_url, task(reset_observation=None))
    assert status == 200, result
    assert (result["terminated"], result["truncated"], result["reward"]) == (False, True, 0.0)
    assert len(stack.requests(stack.policy)) == MAX_STEPS
    assert texts(result["response"]["output"]) == ["again", "(no plan left)"] * MAX_STEPS
    assert result["responses_create_params"]["input"] == TASK_INPUT, "no reset observation, nothing added"


async def test_an_env_that_truncates_ends_the_episode(stack):
    stack.script([{"output": [assistant_message("x")], "repeat": 10}])
    status, result = await run(stack.agent_url, task({}, {"truncated": True, "reward": -1.0}))
    assert status == 200
    assert (result["terminated"], result["truncated"], result["reward"]) == (False, True, -1.0)
    assert len(stack.requests(stack.policy)) == 2


async def test_usage_is_summed_over_the_turns(stack):
    stack.script(
        [
            {"output": [assistant_message("a")], "usage": {"input_tokens": 7, "output_tokens": 3}},
            {"output": [assistant_message("b")], "usage": {"input_tokens": 9, "output_tokens": 17}},
        ]
    )
    status, result = await run(stack.agent_url, task({}, {"terminated": True}))
    assert status == 200
    usage = result["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (16, 20, 36)


async def test_tool_outputs_of_a_step_are_fed_back_before_its_observation(stack):
    call = function_call("look", {"at": "table"}, "call_1")
    stack.script([{"output": [call]}, {"output": [assistant_message("I see it.")]}])
    status, result = await run(stack.agent_url, task({"observation": "Anything else?"}, {"terminated": True}))
    assert status == 200, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == [
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    tool_output = {"type": "function_call_output", "call_id": "call_1", "output": 'look {"at":"table"}'}
    assert without_nulls(output[1:3]) == [tool_output, user_message("Anything else?")]
    assert without_nulls(stack.requests(stack.policy)[1]["input"][-2:]) == [
        tool_output,
        user_message("Anything else?"),
    ]


async def test_malformed_tool_outputs_from_the_env_are_a_502_naming_it(stack):
    stack.script([{"output": [assistant_message("x")]}])
    status, result = await run(stack.agent_url, task({"tool_outputs": [{"call_id": 3}]}))
    assert status == 502 and result["error"]["type"] == "invalid_peer_response"
    assert "planned_env" in result["error"]["message"] and "tool_outputs" in result["error"]["message"]


async def test_an_env_refusing_the_row_keeps_its_status(stack):
    stack.script([])
    status, result = await run(stack.agent_url, {**task(), "plan": "not a list"})
    assert status == 422 and result["error"]["cause"]["type"] == "invalid_task"
    assert stack.requests(stack.policy) == [], "no model call for a task the env refused"


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script([{"hang": True}])
    started = time.monotonic()
    status, result = await run(stack.agent_url, task())
    assert status == 504 and result["error"]["type"] == "timeout"
    assert time.monotonic() - started >= ROLLOUT_DEADLINE_S, "the rollout waited for its deadline"


async def test_the_simulated_user_speaks_between_policy_turns_until_it_stops(stack):
    persona = "You want a table for two at 8pm."
    stack.script(
        [
            {"output": [assistant_message("What time?")]},
            {"output": [assistant_message("Booked: 8pm, window.")]},
        ],
        [
            {"output": [assistant_message("Hi, a table for two please.")]},
            {"output": [assistant_message("At 8pm, by the window if possible.")]},
            {"output": [assistant_message(f"Perfect, thanks! {DEFAULT_STOP_MARKER}")]},
        ],
    )
    system = {"role": "system", "content": "You take restaurant bookings.", "type": "message"}
    row = task(
        {"observation": "You would also like a window seat.", "reward": 0.5},
        {"reward": 0.5},
        reset_observation=persona,
        task_input=[system],
    )
    status, result = await run(stack.user_sim_agent_url, row)
    assert status == 200, result
    assert (result["terminated"], result["truncated"], result["info"]["user_stopped"]) == (True, False, True)
    assert result["reward"] == 1.0, "the rewards still come from the environment's steps"
    assert result["responses_create_params"]["input"] == [system, user_message("Hi, a table for two please.")]
    assert texts(result["response"]["output"]) == [
        "What time?",
        "At 8pm, by the window if possible.",
        "Booked: 8pm, window.",
        f"Perfect, thanks! {DEFAULT_STOP_MARKER}",
    ]
    policy_inputs = [body["input"] for body in stack.requests(stack.policy)]
    assert len(policy_inputs) == 2
    assert policy_inputs[1][-1] == user_message("At 8pm, by the window if possible.")
    assert persona not in orjson.dumps(policy_inputs).decode(), "observations are the user's private notes"
    user_inputs = [body["input"] for body in stack.requests(stack.user)]
    assert len(user_inputs) == 3 and all(body["temperature"] == 0.7 for body in stack.requests(stack.user))
    opening_system = user_inputs[0][0]["content"]
    assert persona in opening_system and DEFAULT_STOP_MARKER in opening_system
    assert user_inputs[0][1:] == [{"role": "user", "content": OPENING_CUE}]
    assert "window seat" in user_inputs[1][0]["content"]
    assert user_inputs[1][1:] == [
        {"role": "assistant", "content": "Hi, a table for two please."},
        {"role": "user", "content": "What time?"},
    ]
    recorded = result["user_model_calls"]
    assert [call["responses_create_params"]["input"] for call in recorded] == user_inputs
    assert [texts(call["response"]["output"]) for call in recorded] == [
        ["Hi, a table for two please."],
        ["At 8pm, by the window if possible."],
        [f"Perfect, thanks! {DEFAULT_STOP_MARKER}"],
    ]


async def test_the_simulated_user_waits_while_the_policy_uses_tools(stack):
    stack.script(
        [
            {"output": [function_call("search", {"q": "menu"}, "call_9")]},
            {"output": [assistant_message("Soup.")]},
        ],
        [{"output": [assistant_message(f"Thanks. {DEFAULT_STOP_MARKER}")]}],
    )
    status, result = await run(stack.user_sim_agent_url, task(reset_observation="You want the menu."))
    assert status == 200, result
    assert [item["type"] for item in result["response"]["output"]] == [
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    user_inputs = [body["input"] for body in stack.requests(stack.user)]
    assert len(user_inputs) == 1, "the task's prompt ends with a user message: the policy opens"
    assert user_inputs[0][1:] == [
        {"role": "assistant", "content": "Let us play."},
        {"role": "user", "content": "Soup."},
    ]


async def test_responses_is_one_model_call_passed_through(stack):
    stack.script([{"output": [function_call("look", {})]}])
    response = await request("POST", stack.agent_url + "/v1/responses", json={"input": "hello"})
    result = await get_response_json(response)
    assert response.status == 200, result
    assert [item["type"] for item in result["output"]] == ["function_call"]
    assert [body["input"] for body in stack.requests(stack.policy)] == ["hello"]


async def test_aggregate_metrics_is_answered_by_the_environment(stack):
    rollouts = [
        {"_ng_task_index": 0, "_ng_rollout_index": i, "reward": reward, "terminated": reward > 0}
        for i, reward in enumerate([1.0, 0.0])
    ]
    response = await request(
        "POST", stack.agent_url + "/aggregate_metrics", json={"verify_responses": rollouts}
    )
    body = await get_response_json(response)
    assert response.status == 200, body
    assert body["key_metrics"]["mean/reward"] == 0.5 and body["key_metrics"]["mean/terminated"] == 0.5


BASE_CONFIG = {
    "name": "agent",
    "host": "127.0.0.1",
    "port": 0,
    "entrypoint": "app.py",
    "resources_server": {"type": "resources_servers", "name": "env"},
    "model_server": {"type": "responses_api_models", "name": "policy_model"},
}


def test_max_steps_defaults_to_10_and_must_be_at_least_1():
    assert GymnasiumAgentConfig.model_validate(BASE_CONFIG).max_steps == 10
    with pytest.raises(ValidationError, match="max_steps"):
        GymnasiumAgentConfig.model_validate({**BASE_CONFIG, "max_steps": 0})


@pytest.mark.parametrize(
    "params",
    [{"input": "hi"}, {"temperature": "hot"}, {"seed": 3}],
    ids=["input", "bad value", "unknown key"],
)
def test_user_create_params_must_be_create_params_without_input(params):
    with pytest.raises(ValidationError, match="user_responses_create_params|temperature|seed"):
        GymnasiumAgentConfig.model_validate({**BASE_CONFIG, "user_responses_create_params": params})
