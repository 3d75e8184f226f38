"""The LangGraph agents over HTTP against the shipped reasoning_gym environment: reasoning_gym, the policy
model (openai_model) and one agent per graph, started from the shipped pairing configs, are real server
processes on 127.0.0.1, and the real LangGraph library runs each graph; the scripted upstream (the one test
double) plays the model's every call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import instance_config, shipped_instance, start_refusal
from tests.helpers import RoleStack, run_role_models, run_with_port
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model
from tests.vllm_script import VllmUpstream

REPO = Path(__file__).resolve().parents[3]
ENVIRONMENT = REPO / "resources_servers" / "reasoning_gym"
ROW = orjson.loads((ENVIRONMENT / "data" / "example.jsonl").read_bytes().splitlines()[0])
TASK_INPUT = ROW["responses_create_params"]["input"]
RIGHT = f"<answer>{ROW['answer']}</answer>"
WRONG = "<answer>Zoey is a sage, and Riley is a sage.</answer>"
# Generous for the rollouts that finish (a loaded machine, reasoning_gym's first scoring imports its library);
# the hang test uses an agent of its own with a short deadline, since it waits for all of it.
ROLLOUT_DEADLINE_S = 60.0
HANG_DEADLINE_S = 3.0
# Pairing config of each graph -> its agent instance there.
GRAPHS = {
    "reflection": "reasoning_gym_langgraph_agent",
    "orchestrator": "reasoning_gym_orchestrator_agent",
    "parallel_thinking": "reasoning_gym_parallel_thinking_agent",
    "rewoo": "reasoning_gym_rewoo_agent",
}
TOKENS = {
    "prompt_token_ids": [1, 2, 3],
    "generation_token_ids": [7, 8],
    "generation_log_probs": [-0.5, -0.25],
}


def policy_inputs(stack: RoleStack) -> list[list[dict]]:
    """The input of every policy call since the last script, in the order they arrived."""
    return [body["input"] for body in stack.requests("policy")]


def shipped_agent(graph: str, **settings: object) -> dict:
    """The agent instance of the shipped pairing config of `graph`."""
    return shipped_instance(ENVIRONMENT / "configs" / f"{graph}_agent.yaml", GRAPHS[graph], **settings)


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RoleStack]:
    workdir = tmp_path_factory.mktemp("langgraph_agent")
    with ExitStack() as servers:
        config, models = run_role_models(servers, scripted_upstream, ["policy"], workdir)
        config["reasoning_gym"] = instance_config("resources_servers", "reasoning_gym", domain="other")
        for graph in GRAPHS:
            config[graph] = shipped_agent(graph)
            config[graph]["responses_api_agents"]["langgraph_agent"]["rollout_deadline_s"] = (
                ROLLOUT_DEADLINE_S
            )
        config["parallel_thinking"]["responses_api_agents"]["langgraph_agent"]["num_parallel_paths"] = 3
        config["impatient"] = shipped_agent("orchestrator")
        config["impatient"]["responses_api_agents"]["langgraph_agent"]["rollout_deadline_s"] = HANG_DEADLINE_S
        started = {
            name: run_with_port(servers, config, name, workdir)
            for name in ["reasoning_gym", *GRAPHS, "impatient"]
        }
        yield RoleStack(
            scripted_upstream, models, urls={name: server.url for name, server in started.items()}
        )


def texts(output: list[dict]) -> list[str]:
    return [part["text"] for item in output if item["type"] == "message" for part in item["content"]]


def user_text(model_input: list[dict]) -> str:
    """The text of a call's last (user) message."""
    return model_input[-1]["content"]


def served_order(stack: RoleStack, marker_of_branch: list[str]) -> list[int]:
    """For calls made side by side: branch index of each call that arrived, in arrival order, found by the
    text only branch i's prompt holds (call k got the k-th scripted answer)."""
    order = []
    for model_input in policy_inputs(stack):
        hits = [index for index, marker in enumerate(marker_of_branch) if marker in user_text(model_input)]
        if len(hits) == 1:
            order.append(hits[0])
    return order


async def test_reflection_drafts_critiques_and_revises_into_a_rewarded_answer(stack):
    draft, critique = "Zoey is a sage, I think.", "Zoey calls Riley a fool; check Riley's statement again."
    revised = {
        "output": [{**assistant_message(f"Rechecked. {RIGHT}"), **TOKENS}],
        "usage": {"input_tokens": 40},
    }
    stack.script("policy", draft, critique, revised)
    status, result = await stack.run("reflection", ROW)
    assert status == 200, result
    assert (result["reward"], result["extracted_answer"]) == (1.0, ROW["answer"]), (
        "the real /verify scored it"
    )
    output = result["response"]["output"]
    assert texts(output) == [draft, critique, f"Rechecked. {RIGHT}"], "every model call, in order"
    assert {key: output[-1][key] for key in TOKENS} == TOKENS, "token ids come through"
    assert result["response"]["usage"]["input_tokens"] == 10 + 10 + 40, "usage summed over the calls"
    generate, reflect, revise = policy_inputs(stack)
    assert generate == TASK_INPUT
    assert (
        reflect[: len(TASK_INPUT)] == TASK_INPUT and reflect[len(TASK_INPUT)]["content"][0]["text"] == draft
    )
    assert "Review the answer" in user_text(reflect)
    assert user_text(revise) == critique, "the critique is the next user turn"


async def test_reflection_stops_after_max_reflections(stack):
    stack.script("policy", *[f"attempt {n}" for n in range(6)])
    status, result = await stack.run("reflection", ROW)
    assert status == 200 and result["reward"] == 0.0, result
    # max_reflections 2 (shipped): generate, reflect, generate, reflect, generate.
    assert texts(result["response"]["output"]) == [f"attempt {n}" for n in range(5)]
    assert len(policy_inputs(stack)) == 5


async def test_orchestrator_plans_runs_subagents_and_synthesizes(stack):
    plan = "SUBTASK 1: What follows if Zoey is a sage?\nSUBTASK 2: What follows if Zoey is a fool?"
    stack.script("policy", plan, "first sub-result", "second sub-result", f"Combined. {RIGHT}")
    status, result = await stack.run("orchestrator", ROW)
    assert status == 200 and result["reward"] == 1.0, result
    asked = policy_inputs(stack)
    assert len(asked) == 4 and ROW["question"] in user_text(asked[0])
    arrival = served_order(stack, ["Zoey is a sage?", "Zoey is a fool?"])
    assert sorted(arrival) == [0, 1], "one sub-agent call per sub-task"
    answer_of = {branch: ["first sub-result", "second sub-result"][k] for k, branch in enumerate(arrival)}
    # Output and synthesis follow sub-task order, whichever sub-agent answered first.
    assert texts(result["response"]["output"]) == [plan, answer_of[0], answer_of[1], f"Combined. {RIGHT}"]
    synthesis = user_text(asked[3])
    assert synthesis.index(answer_of[0]) < synthesis.index(answer_of[1])
    assert "Sub-task 2: What follows if Zoey is a fool?" in synthesis


async def test_orchestrator_without_subtask_lines_solves_the_whole_problem(stack):
    stack.script("policy", "I will just solve it.", "worked answer", RIGHT)
    status, result = await stack.run("orchestrator", ROW)
    assert status == 200 and result["reward"] == 1.0, result
    assert ROW["question"] in user_text(policy_inputs(stack)[1]), "the one sub-task is the problem itself"


async def test_parallel_thinking_runs_branches_and_aggregates_them(stack):
    stack.script("policy", "path a", "path b", "path c", f"Most agree. {RIGHT}")
    status, result = await stack.run("parallel_thinking", ROW)
    assert status == 200 and result["reward"] == 1.0, result
    asked = policy_inputs(stack)
    assert len(asked) == 4
    perspectives = ["Reason forward", "List every possible case", "Start from what the answer must satisfy"]
    arrival = served_order(stack, perspectives)
    assert sorted(arrival) == [0, 1, 2], "one call per branch, each with its own perspective"
    answer_of = {branch: ["path a", "path b", "path c"][k] for k, branch in enumerate(arrival)}
    assert texts(result["response"]["output"]) == [
        answer_of[0],
        answer_of[1],
        answer_of[2],
        f"Most agree. {RIGHT}",
    ]
    aggregate = user_text(asked[3])
    assert aggregate.index(f"Attempt 1:\n{answer_of[0]}") < aggregate.index(f"Attempt 3:\n{answer_of[2]}")


async def test_rewoo_plans_with_variables_runs_each_step_and_solves(stack):
    plan = (
        "Plan: test Zoey being a sage. #E1 = LLM[If Zoey is a sage, what is Riley?]\n"
        "Plan: check Riley's claim. #E2 = LLM[Riley says Zoey or Riley is a sage; given #E1, is that true?]"
    )
    stack.script("policy", plan, "Riley would be a fool.", "Then Riley told the truth: contradiction.", RIGHT)
    status, result = await stack.run("rewoo", ROW)
    assert status == 200 and result["reward"] == 1.0, result
    _, first, second, solve = policy_inputs(stack)
    assert user_text(first) == "If Zoey is a sage, what is Riley?"
    assert (
        user_text(second) == "Riley says Zoey or Riley is a sage; given Riley would be a fool., is that true?"
    )
    assert "Evidence: Then Riley told the truth: contradiction." in user_text(solve)
    assert len(result["response"]["output"]) == 4


async def test_a_model_error_mid_graph_fails_the_rollout_clearly(stack):
    refusal = {
        "status": 400,
        "body": {"error": {"message": "context too long", "type": "invalid_request_error"}},
    }
    stack.script("policy", "draft without an answer", refusal)
    status, result = await stack.run("reflection", ROW)
    assert status == 400, result
    error = result["error"]
    assert "policy_model" in error["cause"]["server"] and "context too long" in orjson.dumps(error).decode()


async def test_a_hanging_model_fails_the_rollout_at_its_deadline(stack):
    stack.script("policy", "SUBTASK 1: a\nSUBTASK 2: b", "fine", {"hang": True})
    started = time.monotonic()
    status, result = await stack.run("impatient", ROW)
    assert status == 504 and result["error"]["type"] == "timeout", result
    assert time.monotonic() - started >= HANG_DEADLINE_S


async def test_a_task_without_user_text_is_a_422(stack):
    stack.script("policy")
    row = {**ROW, "responses_create_params": {"input": [{"role": "system", "content": "be brief"}]}}
    status, result = await stack.run("rewoo", row)
    assert status == 422 and "user message" in result["error"]["message"], result
    assert policy_inputs(stack) == [], "refused before any model call"


def test_a_template_with_a_placeholder_the_graph_does_not_fill_is_refused_at_start(tmp_path: Path):
    agent = shipped_agent("rewoo")
    agent["responses_api_agents"]["langgraph_agent"]["solve_prompt"] = "{plan} -> {answer}"
    [line] = start_refusal({"agent": agent}, "agent", tmp_path)
    assert line.startswith("Error: invalid config for server instance 'agent': ")
    assert "solve_prompt names ['answer']" in line and "{plan}" in line


async def test_responses_route_runs_the_graph_without_verifying(stack):
    stack.script("policy", "a", "b", "c", RIGHT)
    response = await request(
        "POST", stack.urls["parallel_thinking"] + "/v1/responses", json={"input": "2+2?"}
    )
    result = await get_response_json(response)
    assert response.status == 200, result
    assert len(result["output"]) == 4 and texts(result["output"])[-1] == RIGHT
    assert all("Problem: 2+2?" in user_text(model_input) for model_input in policy_inputs(stack)[:3])


MALFORMED = [
    {"question": "no responses_create_params"},
    {"responses_create_params": 5},
    {"responses_create_params": {"input": 5}},
    {"responses_create_params": {"input": [{"role": "user", "content": 7}]}},
    {"responses_create_params": {"input": [{"role": "user", "content": [{"type": "input_text"}]}]}},
]


@pytest.mark.parametrize("graph", GRAPHS)
async def test_malformed_rows_are_refused_with_a_4xx(stack, graph):
    stack.script("policy")
    for row in MALFORMED:
        status, result = await stack.run(graph, row)
        assert 400 <= status < 500, (row, result)
    assert policy_inputs(stack) == []


async def test_with_vllm_model_every_call_keeps_the_engines_token_ids(
    vllm_upstream: VllmUpstream, tmp_path_factory: pytest.TempPathFactory
):
    """vllm_model in training mode on the vLLM-compatible upstream (real tokenisation): the reflection
    rollout's every model call is in the output with the prompt and generated ids the engine saw."""
    model = fresh_model("langgraph-vllm")
    vllm_upstream.configure(model, reasoning_parser=False)
    policy = instance_config(
        "responses_api_models",
        "vllm_model",
        base_url=vllm_upstream.base_url,
        api_key="sk-test",
        model=model,
        return_token_id_information=True,
        uses_reasoning_parser=False,
    )
    agent = shipped_agent("reflection")
    agent["responses_api_agents"]["langgraph_agent"]["model_server"]["name"] = "vllm_policy"
    config = {
        "reasoning_gym": instance_config("resources_servers", "reasoning_gym", domain="other"),
        "vllm_policy": policy,
        "agent": agent,
    }
    vllm_upstream.script(model, [{"text": "A first guess."}, {"text": "Check Riley."}, {"text": RIGHT}])
    workdir = tmp_path_factory.mktemp("langgraph_vllm")
    with ExitStack() as servers:
        agent = [run_with_port(servers, config, name, workdir) for name in config][-1]
        answer = await request("POST", agent.url + "/run", json=ROW)
        status, result = answer.status, await get_response_json(answer)
    assert status == 200 and result["reward"] == 1.0, result
    messages = [item for item in result["response"]["output"] if item["type"] == "message"]
    assert [message["content"][0]["text"] for message in messages] == [
        "A first guess.",
        "Check Riley.",
        RIGHT,
    ]
    engine_prompts = [
        call["prompt_token_ids"]
        for call in vllm_upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/v1/completions")
    ]
    assert [message["prompt_token_ids"] for message in messages] == engine_prompts
    assert all(
        len(message["generation_token_ids"]) == len(message["generation_log_probs"]) > 0
        for message in messages
    )
