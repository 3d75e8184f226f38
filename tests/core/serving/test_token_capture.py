"""Training-token capture (the top-level `token_id_capture` block) end to end, every server a real process:
single_agent_turn environment servers in front of simple_agent, vllm_model in training mode over the
vLLM-compatible upstream (real token ids and log-probs), the tally resources server of tests/fixtures.

The environment server asks for capture only for an agent the block covers; the model server then writes
one line per call to `<dir>/<rollout key>.jsonl` holding the token ids the upstream produced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.serving.token_capture import capture_record, captured_routes
from nemo_gym.testing import StartedServer, instance_config, run_instance
from tests.helpers import run_fixture_instance
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call
from tests.vllm_upstream import token_logprob

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ADD_TOOL = {
    "type": "function",
    "name": "add",
    "description": "add n to the tally",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    "strict": True,
}
RS = {"type": "resources_servers", "name": "tally"}
GENERATING = ("/v1/chat/completions", "/v1/completions")
CAPTURE_PREFIX = "/ng-rollout/{key}/training-token-capture"


@dataclass
class Stack:
    urls: dict[str, str]
    model: str
    upstream: VllmUpstream
    capture_dir: Path

    def captured(self, key: str) -> list[dict[str, Any]]:
        path = self.capture_dir / f"{key}.jsonl"
        return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.exists() else []

    def generation_prompts(self) -> list[list[int]]:
        """The prompt ids the upstream was given for each generation so far."""
        return [
            call["prompt_token_ids"]
            for call in self.upstream.requests(self.model)
            if call["path"] in GENERATING
        ]


def capture_block(capture_dir: Path, **settings: Any) -> dict[str, Any]:
    return {"enabled": True, "dir": str(capture_dir), **settings}


def environment_server(agent: str) -> dict:
    return instance_config(
        "environment_servers",
        "single_agent_turn",
        resources_server=RS,
        agent_server={"type": "responses_api_agents", "name": agent},
        resources_tool_transports=["direct_http"],
        cleanup_timeout_seconds=30,
    )


@pytest.fixture(scope="module")
def stack(vllm_upstream: VllmUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("token_capture")
    capture_dir = workdir / "captured"  # not there yet: the model server makes it
    model = fresh_model("capture")
    vllm_settings = {
        "base_url": vllm_upstream.base_url,
        "api_key": "k",
        "model": model,
        "uses_reasoning_parser": False,
    }
    config: dict[str, Any] = {
        "token_id_capture": capture_block(capture_dir),
        "tally": instance_config("resources_servers", "tally", domain="other"),
        "policy_model": instance_config(
            "responses_api_models",
            "vllm_model",
            **vllm_settings,
            return_token_id_information=True,
            token_id_capture_non_generating_requests=[{"method": "post", "path": "v1/chat/completions/"}],
        ),
        "untouched_model": instance_config("responses_api_models", "vllm_model", **vllm_settings),
    }
    urls: dict[str, str] = {}

    def started(server: StartedServer, instance: str) -> None:
        block = next(iter(next(iter(config[instance].values())).values()))
        block["port"] = server.port
        urls[instance] = server.url

    with ExitStack() as servers:
        tally = run_fixture_instance(FIXTURES / "tally_resources_server.py", config, "tally", workdir)
        started(servers.enter_context(tally), "tally")
        started(servers.enter_context(run_instance(config, "policy_model", workdir)), "policy_model")
        # The same deployment with the block off: this model server must record nothing.
        disabled = {**config, "token_id_capture": {"enabled": False, "dir": str(capture_dir)}}
        started(servers.enter_context(run_instance(disabled, "untouched_model", workdir)), "untouched_model")
        for agent, opted_in in (("opted_agent", True), ("plain_agent", False)):
            config[agent] = instance_config(
                "responses_api_agents",
                "simple_agent",
                resources_server=RS,
                model_server={"type": "responses_api_models", "name": "policy_model"},
                token_id_capture=opted_in,
            )
            started(servers.enter_context(run_instance(config, agent, workdir)), agent)
        config["opted_env"] = environment_server("opted_agent")
        config["plain_env"] = environment_server("plain_agent")
        config["all_agents_env"] = environment_server("plain_agent")
        config["disabled_env"] = environment_server("opted_agent")
        variants = {
            "opted_env": config,
            "plain_env": config,
            "all_agents_env": {**config, "token_id_capture": capture_block(capture_dir, all_agents=True)},
            "disabled_env": {**config, "token_id_capture": {"enabled": False}},
        }
        for name, variant in variants.items():
            started(servers.enter_context(run_instance(variant, name, workdir)), name)
        yield Stack(urls, model, vllm_upstream, capture_dir)


async def post(url: str, body: Any) -> tuple[int, Any]:
    response = await request("POST", url, json=body)
    return response.status, await get_response_json(response)


async def run_episode(stack: Stack, environment: str, rollout_id: str) -> dict[str, Any]:
    """One episode whose model adds 3 in one tool call and then answers; its verify result."""
    stack.upstream.clear(stack.model)
    stack.upstream.script(
        stack.model, [{"tool_calls": [scripted_call("add", {"n": 3})]}, {"text": "The tally is 3."}]
    )
    episode = {
        "episode_id": {"rollout_id": rollout_id, "attempt": 0},
        "task": {
            "task_id": {"taskset": "tally", "task_id": rollout_id},
            "task_input": {
                "responses_create_params": {
                    "input": [{"role": "user", "content": "add 3"}],
                    "tools": [ADD_TOOL],
                },
                "task_data": {"expected_total": 3},
            },
        },
    }
    status, answer = await post(f"{stack.urls[environment]}/run", episode)
    assert status == 200 and answer.get("result") is not None, answer
    assert answer["result"]["reward"] == 1.0
    return answer["result"]


def token_items(response: dict[str, Any]) -> list[tuple[list[int], list[int], list[float]]]:
    """The token fields of each model turn, as the agent's trajectory carries them."""
    return [
        (item["prompt_token_ids"], item["generation_token_ids"], item["generation_log_probs"])
        for item in response["output"]
        if item.get("generation_token_ids") is not None
    ]


def recorded_tokens(lines: list[dict[str, Any]]) -> list[tuple[list[int], list[int], list[float]]]:
    return [
        (output["prompt_token_ids"], output["generation_token_ids"], output["generation_log_probs"])
        for line in lines
        for output in line["outputs"]
        if output["generation_token_ids"] is not None
    ]


async def test_an_opted_in_agent_s_model_calls_are_recorded_with_the_upstream_s_tokens(stack: Stack) -> None:
    prompts_before = len(stack.generation_prompts())
    result = await run_episode(stack, "opted_env", "captured-1")

    lines = stack.captured("captured-1")
    assert [(line["rollout_key"], line["route"], line["call_index"], line["status"]) for line in lines] == [
        ("captured-1", "/v1/responses", 0, 200),
        ("captured-1", "/v1/responses", 1, 200),
    ]
    assert all(line["token_ids_available"] for line in lines)
    recorded = recorded_tokens(lines)
    assert [prompt for prompt, _, _ in recorded] == stack.generation_prompts()[prompts_before:]
    assert recorded == token_items(result["response"])
    for _, generated, log_probs in recorded:
        assert generated and log_probs == [token_logprob(at, token) for at, token in enumerate(generated)]
    assert [output["type"] for output in lines[0]["outputs"]] == ["function_call"]


async def test_a_captured_agent_s_run_without_a_prefix_records_under_the_row_s_rollout(stack: Stack) -> None:
    """A 0.4-style collector or a trainer calls the agent's /run directly: the row's indices name it."""
    stack.upstream.clear(stack.model)
    stack.upstream.script(
        stack.model, [{"tool_calls": [scripted_call("add", {"n": 3})]}, {"text": "The tally is 3."}]
    )
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "add 3"}], "tools": [ADD_TOOL]},
        "expected_total": 3,
        "_ng_task_index": 7,
        "_ng_rollout_index": 2,
        "_ng_attempt_index": 1,
    }
    status, answer = await post(f"{stack.urls['opted_agent']}/run", row)
    assert status == 200 and answer["reward"] == 1.0, answer
    assert [line["call_index"] for line in stack.captured("7-2-a1")] == [0, 1]
    assert recorded_tokens(stack.captured("7-2-a1")) == token_items(answer["response"])

    stack.upstream.script(
        stack.model, [{"tool_calls": [scripted_call("add", {"n": 3})]}, {"text": "The tally is 3."}]
    )
    status, _ = await post(f"{stack.urls['plain_agent']}/run", {**row, "_ng_task_index": 8})
    assert status == 200 and not (stack.capture_dir / "8-2-a1.jsonl").exists()


async def test_all_agents_covers_an_agent_that_did_not_opt_in(stack: Stack) -> None:
    await run_episode(stack, "all_agents_env", "everyone-1")
    assert [line["call_index"] for line in stack.captured("everyone-1")] == [0, 1]


async def test_an_agent_not_opted_in_is_not_recorded(stack: Stack) -> None:
    await run_episode(stack, "plain_env", "plain-1")
    assert not (stack.capture_dir / "plain-1.jsonl").exists()


async def test_with_the_block_disabled_nothing_asks_for_or_records_capture(stack: Stack) -> None:
    await run_episode(stack, "disabled_env", "disabled-1")  # the model server would record if asked
    stack.upstream.script(stack.model, [{"text": "Hi."}])
    path = CAPTURE_PREFIX.format(key="disabled-2") + "/v1/responses"
    status, answer = await post(stack.urls["untouched_model"] + path, {"input": "hi"})
    assert status == 200, answer
    assert not {"disabled-1.jsonl", "disabled-2.jsonl"} & {p.name for p in stack.capture_dir.iterdir()}


async def test_a_non_generating_route_is_not_recorded_and_others_are_numbered_per_rollout(
    stack: Stack,
) -> None:
    stack.upstream.clear(stack.model)
    stack.upstream.script(stack.model, [{"text": "One."}, {"text": "Two."}, {"text": "Three."}])
    prefix = stack.urls["policy_model"] + CAPTURE_PREFIX.format(key="direct-1")
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    assert (await post(f"{prefix}/v1/chat/completions", chat))[0] == 200
    for _ in range(2):
        assert (await post(f"{prefix}/v1/responses", {"input": "hi"}))[0] == 200
    assert [(line["route"], line["call_index"]) for line in stack.captured("direct-1")] == [
        ("/v1/responses", 0),
        ("/v1/responses", 1),
    ]


def test_an_answer_without_token_data_says_so_with_explicit_nulls() -> None:
    answer = {"output": [{"type": "reasoning"}, {"type": "message", "content": []}]}
    record = capture_record("r-1", "/v1/responses", 0, 200, orjson.dumps(answer))
    nulls = {"prompt_token_ids": None, "generation_token_ids": None, "generation_log_probs": None}
    assert record == {
        "rollout_key": "r-1",
        "route": "/v1/responses",
        "call_index": 0,
        "status": 200,
        "token_ids_available": False,
        "outputs": [{"type": "message", **nulls}],
    }
    error = capture_record("r-1", "/v1/chat/completions", 1, 502, b'{"error": {}}')
    assert (error["token_ids_available"], error["outputs"]) == (False, None)


def test_a_chat_answer_is_recorded_from_its_messages() -> None:
    message = {
        "role": "assistant",
        "prompt_token_ids": [1, 2],
        "generation_token_ids": [3],
        "generation_log_probs": [-0.5],
    }
    answer = {"choices": [{"index": 0, "message": message}]}
    record = capture_record("r-2", "/v1/chat/completions", 0, 200, orjson.dumps(answer))
    assert record["token_ids_available"] is True
    assert record["outputs"] == [
        {
            "choice_index": 0,
            "prompt_token_ids": [1, 2],
            "generation_token_ids": [3],
            "generation_log_probs": [-0.5],
        }
    ]
    assert captured_routes([("post", "v1/chat/completions/")]) == {
        ("POST", "/v1/responses"),
        ("POST", "/v1/messages"),
    }
