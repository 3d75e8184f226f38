"""ToolSimulationAgent over HTTP: the shipped single_step_tool_use_with_argument_comparison environment and two
openai_model servers in front of the scripted upstream (the one test double), one playing the policy and
one the tool simulator (each under a model name of its own), each a real server process on 127.0.0.1."""

from __future__ import annotations

import copy
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
import yaml

from nemo_gym.collection.row_checks import prompt_key
from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import read_jsonl
from tests.helpers import LAUNCHER_VERDICT_S, REPO_ROOT, gym_command, instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

ENVIRONMENT = (
    Path(__file__).resolve().parents[3]
    / "resources_servers"
    / "single_step_tool_use_with_argument_comparison"
)
PAIRING = ENVIRONMENT / "configs" / "single_step_tool_use_with_argument_comparison_tool_simulation.yaml"
ROWS = {row["id"]: row for row in read_jsonl(ENVIRONMENT / "data" / "example.jsonl")}
REBOOKING = ROWS["airline-rebook-0412-step3"]  # expects change_flight(QX7R2P, LH1808, 2025-03-07)
ROUTER_HELP = ROWS["router-help-0731-step1"]  # expects search_knowledge_base("reset router ...", 3)
EXPECTED_SEARCH = orjson.loads(ROUTER_HELP["expected_action"]["arguments"])
SIMULATED_ARTICLES = '{"articles": [{"id": "KB-311", "title": "Factory reset of the HomeBox router"}]}'


@dataclass
class Stack:
    single_step_url: str
    simulating_url: str
    policy: str
    simulator: str
    upstream: ScriptedUpstream

    def script(self, policy_turns: list[dict], simulator_turns: list[dict] = ()) -> None:
        for model, turns in ((self.policy, policy_turns), (self.simulator, simulator_turns)):
            self.upstream.clear(model)
            self.upstream.script(model, list(turns))
        self.seen = {model: len(self.upstream.requests(model)) for model in (self.policy, self.simulator)}

    def requests_of(self, model: str) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(model)[self.seen[model] :]]


def shipped_blocks() -> dict:
    """The pairing config's instances, as shipped."""
    return yaml.safe_load(PAIRING.read_text())


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("tool_simulation_agent")
    policy, simulator = fresh_model("toolsim-policy"), fresh_model("toolsim-simulator")
    shipped = shipped_blocks()
    environment = shipped["single_step_tool_use_with_argument_comparison"]["resources_servers"]
    settings = environment["single_step_tool_use_with_argument_comparison"]
    config = {
        "single_step_tool_use_with_argument_comparison": instance_config(
            "resources_servers", "single_step_tool_use_with_argument_comparison", **settings
        ),
        **{
            name: instance_config(
                "responses_api_models",
                "openai_model",
                openai_base_url=scripted_upstream.base_url,
                openai_api_key="sk-toolsim-test",
                openai_model=model,
            )
            for name, model in (("policy_model", policy), ("simulator_model", simulator))
        },
    }
    with ExitStack() as servers:
        for name, server_type, folder in (
            (
                "single_step_tool_use_with_argument_comparison",
                "resources_servers",
                "single_step_tool_use_with_argument_comparison",
            ),
            ("policy_model", "responses_api_models", "openai_model"),
            ("simulator_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        agent = shipped["single_step_tool_use_with_argument_comparison_agent"]["responses_api_agents"]
        agent_settings = {k: v for k, v in agent["tool_simulation_agent"].items() if k != "datasets"}
        # The shipped settings, plus `max_steps: null` as NeMo Gym configs may say it: still one step.
        config["single_step_agent"] = instance_config(
            "responses_api_agents", "tool_simulation_agent", **agent_settings, max_steps=None
        )
        config["simulating_agent"] = instance_config(
            "responses_api_agents",
            "tool_simulation_agent",
            **agent_settings,
            max_steps=4,
            tool_simulation_model={"type": "responses_api_models", "name": "simulator_model"},
        )
        single_step = servers.enter_context(run_instance(config, "single_step_agent", workdir))
        simulating = servers.enter_context(run_instance(config, "simulating_agent", workdir))
        yield Stack(single_step.url, simulating.url, policy, simulator, scripted_upstream)


async def run(url: str, row: dict) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


async def test_shipped_pairing_grades_the_one_reply_as_nemo_gym_does(stack):
    expected = REBOOKING["expected_action"]
    stack.script([{"output": [function_call(expected["name"], orjson.loads(expected["arguments"]))]}])
    status, result = await run(stack.single_step_url, REBOOKING)
    assert status == 200, result
    assert result["reward"] == 1.0
    assert [item["type"] for item in result["response"]["output"]] == ["function_call"], "never run"
    (asked,) = stack.requests_of(stack.policy)
    assert asked["input"] == REBOOKING["responses_create_params"]["input"]
    assert stack.requests_of(stack.simulator) == []


async def test_one_step_stops_at_the_first_tool_call_even_with_a_wrong_action(stack):
    stack.script(
        [
            {"output": [function_call("search_flights", {"origin": "FRA", "destination": "LIS"})]},
            {"output": []},
        ]
    )
    status, result = await run(stack.single_step_url, REBOOKING)
    assert status == 200, result
    assert result["reward"] == 0.0
    assert len(stack.requests_of(stack.policy)) == 1


async def test_the_simulator_answers_the_tool_call_and_the_policy_goes_on(stack):
    search = function_call("search_knowledge_base", EXPECTED_SEARCH)
    stack.script(
        [
            {"output": [search], "usage": {"input_tokens": 100, "output_tokens": 10}},
            {
                "output": [assistant_message("Hold the reset button for 10 s.")],
                "usage": {"input_tokens": 130},
            },
        ],
        [{"output": [assistant_message(SIMULATED_ARTICLES)]}],
    )
    status, result = await run(stack.simulating_url, ROUTER_HELP)
    assert status == 200, result
    assert result["reward"] == 1.0, "the first call is the graded action"
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    assert {key: output[1][key] for key in ("type", "call_id", "output")} == {
        "type": "function_call_output",
        "call_id": search["call_id"],
        "output": SIMULATED_ARTICLES,
    }
    assert result["response"]["usage"]["input_tokens"] == 230

    (simulation,) = stack.requests_of(stack.simulator)
    system, case = simulation["input"]
    assert system["role"] == "system" and "tool" in system["content"]
    case = orjson.loads(case["content"])
    assert case["tool"]["name"] == "search_knowledge_base"
    assert case["call"] == {"name": "search_knowledge_base", "arguments": search["arguments"]}
    assert case["conversation"][-1]["call_id"] == search["call_id"]
    assert "tools" not in simulation, "the simulator answers in text"

    first, second = stack.requests_of(stack.policy)
    assert second["input"][-1]["output"] == SIMULATED_ARTICLES
    assert second["input"][: len(first["input"])] == first["input"]


@pytest.mark.parametrize(
    "simulator_turn",
    [
        {"output": []},
        {"output": [function_call("search_knowledge_base", {"query": "x"})]},
        {
            "output": [assistant_message('{"articles": [')],
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    ],
    ids=["empty", "a_tool_call", "cut_off"],
)
async def test_an_unusable_simulation_ends_the_rollout_marked_and_still_verified(stack, simulator_turn):
    search = function_call("search_knowledge_base", EXPECTED_SEARCH)
    stack.script([{"output": [search]}, {"output": [assistant_message("never asked")]}], [simulator_turn])
    status, result = await run(stack.simulating_url, ROUTER_HELP)
    assert status == 200, result
    response = result["response"]
    assert response["status"] == "incomplete"
    assert response["metadata"]["ng_termination_reason"] == "tool_simulation_failed"
    assert "tool simulator" in response["metadata"]["ng_termination_message"]
    assert [item["type"] for item in response["output"]] == ["function_call"], "no made-up tool output"
    assert len(stack.requests_of(stack.policy)) == 1
    assert result["reward"] == 1.0, "the policy's action was still graded"


async def test_a_call_that_may_not_run_is_refused_without_asking_the_simulator(stack):
    stack.script(
        [
            {"output": [function_call("verify", {}), function_call("reset_router", {"model": "HB2"})]},
            {"output": [assistant_message("Let me search instead.")]},
        ]
    )
    status, result = await run(stack.simulating_url, ROUTER_HELP)
    assert status == 200, result
    refusals = [item for item in result["response"]["output"] if item["type"] == "function_call_output"]
    assert [orjson.loads(item["output"])["error"].split(".")[0] for item in refusals] == [
        "Unknown tool 'verify'",
        "Unknown tool 'reset_router'",
    ]
    assert stack.requests_of(stack.simulator) == []
    assert result["reward"] == 0.0


async def test_responses_route_runs_the_loop_without_verifying(stack):
    stack.script(
        [
            {"output": [function_call("search_knowledge_base", {"query": "reset"})]},
            {"output": [assistant_message("Done.")]},
        ],
        [{"output": [assistant_message('{"articles": []}')]}],
    )
    params = copy.deepcopy(ROUTER_HELP["responses_create_params"])
    params["input"] = "How do I reset my router?"
    response = await request(
        "POST", stack.simulating_url + "/v1/responses", json=params, cookies={"caller": "kept"}
    )
    result = await get_response_json(response)
    assert response.status == 200, result
    assert [item["type"] for item in result["output"]] == ["function_call", "function_call_output", "message"]
    assert stack.requests_of(stack.policy)[0]["input"] == [
        {"role": "user", "content": "How do I reset my router?", "type": "message"}
    ]
    assert response.cookies["caller"].value == "kept"


def test_more_steps_without_a_simulator_is_refused_at_start(tmp_path):
    config = {
        "agent": instance_config(
            "responses_api_agents",
            "tool_simulation_agent",
            max_steps=3,
            resources_server={"type": "resources_servers", "name": "env"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
        )
    }
    with pytest.raises(RuntimeError) as refused:
        with run_instance(config, "agent", tmp_path):
            pass
    assert "max_steps is 3 but tool_simulation_model is not set" in str(refused.value)


def test_the_shipped_pairing_replays_offline_to_the_recorded_rewards(tmp_path):
    """`gym eval run` of the pairing config with replay_model playing the environment's recorded rollouts:
    every example task runs through this agent and earns the reward it was recorded with."""
    recordings = ENVIRONMENT / "data" / "example_rollouts.jsonl"
    output = tmp_path / "rollouts.jsonl"
    result = subprocess.run(
        gym_command(
            "eval", "run", "--config", str(PAIRING), "--model-type", "replay_model",
            f"++policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath=[{recordings}]",
            "-o", str(output),
        ),
        capture_output=True, text=True, timeout=LAUNCHER_VERDICT_S, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0 and " 0 failed" in result.stdout, result.stdout + result.stderr
    rows = read_jsonl(output)
    # A verify past its grading deadline (a busy machine) is masked with its reason: it measured nothing.
    assert all(row["failure_kind"] for row in rows if row.get("mask_sample"))
    replayed = Counter(
        (prompt_key(row["responses_create_params"]), row["reward"])
        for row in rows
        if not row.get("mask_sample")
    )
    recorded = Counter(
        (prompt_key(row["responses_create_params"]), row["reward"]) for row in read_jsonl(recordings)
    )
    assert replayed <= recorded and len(rows) == len(ROWS)
