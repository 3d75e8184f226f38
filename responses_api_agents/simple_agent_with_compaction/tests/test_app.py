"""simple_agent_with_compaction over HTTP, every server a real process: the session-counter environment
(shipped), vllm_model_with_compaction, and the fake vLLM of tests/vllm_upstream.py (a real tokenizer,
prompt ids as the engine was given them, the `required_prefix_token_ids` extension) playing the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from nemo_gym.http.client import get_response_json, request
from tests.helpers import instance_config, run_instance
from tests.upstream_script import ScriptedUpstream, assistant_message, function_call, reasoning
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

DATA = Path(__file__).resolve().parents[3] / "resources_servers" / "example_session_state_mgmt" / "data"
ROW = orjson.loads((DATA / "example.jsonl").read_bytes().splitlines()[0])  # 3, add 1, add 2 -> 6
CHAT_PATH = "/v1/chat/completions"
PAIRING = yaml.safe_load((DATA.parent / "configs" / "example_session_state_mgmt_compaction.yaml").read_text())
# The shipped pairing's: reasoning of the last call only, rewritten every two calls.
SHIPPED = PAIRING["example_session_state_mgmt_simple_agent_with_compaction"]["responses_api_agents"][
    "simple_agent_with_compaction"
]["context_history"]
RECENCY = SHIPPED["policy"]


def counter_steps() -> list[dict[str, Any]]:
    """Five model calls, each with its own reasoning: add 1, add 2, read twice, answer."""
    return [
        {"reasoning": "First add one.", "tool_calls": [scripted_call("increment_counter", {"count": 1})]},
        {"reasoning": "Now add two.", "tool_calls": [scripted_call("increment_counter", {"count": 2})]},
        {  # sampled as ids the tokenizer would not give its text: only exact ids continue it
            "reasoning": "Read the count.",
            "tool_calls": [scripted_call("get_counter_value", {})],
            "noncanonical": True,
        },
        {"reasoning": "Read it again.", "tool_calls": [scripted_call("get_counter_value", {})]},
        {"reasoning": "It is six.", "text": "The count is 6."},
    ]


@contextmanager
def stack(
    upstream: VllmUpstream, workdir: Path, context_history: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """The three servers, the model played by the fake vLLM; yields the agent's URL and the model."""
    model = fresh_model("compaction")
    upstream.configure(model, honours_required_prefix=True)
    upstream.script(model, counter_steps())
    implementation = "vllm_model_with_compaction"
    settings = {"base_url": upstream.base_url, "api_key": "sk-compaction-test", "model": model}
    settings["uses_reasoning_parser"] = True
    with agent_stack(workdir, implementation, settings, context_history) as url:
        yield url, model


def agent_config(context_history: dict[str, Any]) -> dict[str, Any]:
    return instance_config(
        "responses_api_agents",
        "simple_agent_with_compaction",
        resources_server={"type": "resources_servers", "name": "counter"},
        model_server={"type": "responses_api_models", "name": "policy_model"},
        context_history=context_history,
    )


@contextmanager
def agent_stack(
    workdir: Path, implementation: str, model_settings: dict[str, Any], context_history: dict[str, Any]
) -> Iterator[str]:
    """The counter environment, model server `implementation` and the agent; yields the agent's URL."""
    resources = {"counter": instance_config("resources_servers", "example_session_state_mgmt")}
    policy = {"policy_model": instance_config("responses_api_models", implementation, **model_settings)}
    with ExitStack() as servers:
        counter = servers.enter_context(run_instance(resources, "counter", workdir))
        model_server = servers.enter_context(run_instance(policy, "policy_model", workdir))
        resources["counter"]["resources_servers"]["example_session_state_mgmt"]["port"] = counter.port
        policy["policy_model"]["responses_api_models"][implementation]["port"] = model_server.port
        agent = agent_config(context_history)
        agent_server = servers.enter_context(
            run_instance({**resources, **policy, "agent": agent}, "agent", workdir)
        )
        yield agent_server.url


async def run(url: str) -> tuple[int, dict[str, Any]]:
    answer = await request("POST", url + "/run", json=ROW)
    return answer.status, await get_response_json(answer)


def token_carriers(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in output if "generation_token_ids" in item]


async def test_a_compaction_mid_rollout_keeps_every_turns_token_ids_exact_and_the_prefix_after_it(
    vllm_upstream: VllmUpstream, tmp_path: Path
) -> None:
    with stack(vllm_upstream, tmp_path, SHIPPED) as (url, model):
        status, result = await run(url)
    assert status == 200, result
    assert result["reward"] == 1.0

    output = result["response"]["output"]
    assert [item["type"] for item in output].count("reasoning") == 5  # nothing dropped from the rollout
    assert [item["type"] for item in output].count("function_call_output") == 4
    calls = [entry for entry in vllm_upstream.requests(model) if entry["path"] == CHAT_PATH]
    carriers = token_carriers(output)
    assert len(calls) == len(carriers) == 5
    for call, carrier in zip(calls, carriers, strict=True):
        assert carrier["prompt_token_ids"] == call["prompt_token_ids"]  # what the engine was given
        assert len(carrier["generation_log_probs"]) == len(carrier["generation_token_ids"])
    generated_text = [vllm_upstream.detokenize(model, item["generation_token_ids"]) for item in carriers]
    for text, step in zip(generated_text, counter_steps(), strict=True):
        assert text.startswith(f"<think>\n{step['reasoning']}\n</think>") and text.endswith("<|im_end|>")

    assert carriers[2]["generation_token_ids"] != vllm_upstream.tokenize(model, generated_text[2])

    # Chunks of two calls: 1-2, 3-4, 5. Calls 2 and 4 extend the call before; 3 and 5 follow a compaction.
    prefixes = [call["body"].get("required_prefix_token_ids") for call in calls]
    parents = [carrier["prompt_token_ids"] + carrier["generation_token_ids"] for carrier in carriers]
    assert prefixes == [None, parents[0], None, parents[2], None]
    assert calls[3]["prompt_token_ids"][: len(parents[2])] == parents[2]
    assert calls[2]["prompt_token_ids"][: len(parents[1])] != parents[1]
    assert "First add one." not in calls[2]["prompt_text"] and "Now add two." in calls[2]["prompt_text"]
    assert "Now add two." not in calls[4]["prompt_text"] and "Read it again." in calls[4]["prompt_text"]

    events = result["response"]["boundary_events"]
    assert [event["applies_to_step"] for event in events] == [3, 5]
    assert [event["omitted_reasoning_item_count"] for event in events] == [1, 3]
    metadata = result["response"]["model_call_metadata"]
    assert [entry["expected_append_compatible"] for entry in metadata] == [False, True, False, True, False]
    assert [entry["compaction_event_id"] for entry in metadata] == [
        None,
        None,
        events[0]["event_id"],
        None,
        events[1]["event_id"],
    ]


async def test_without_compaction_every_call_after_the_first_extends_the_last_one(
    vllm_upstream: VllmUpstream, tmp_path: Path
) -> None:
    """The identity policy never rewrites: each call carries its parent's ids and no boundary is recorded."""
    with stack(vllm_upstream, tmp_path, {"enabled": True}) as (url, model):
        status, result = await run(url)
    assert status == 200 and result["reward"] == 1.0
    calls = [entry for entry in vllm_upstream.requests(model) if entry["path"] == CHAT_PATH]
    carriers = token_carriers(result["response"]["output"])
    for call, parent in zip(calls[1:], carriers, strict=False):
        ids = parent["prompt_token_ids"] + parent["generation_token_ids"]
        assert (
            call["body"]["required_prefix_token_ids"] == ids and call["prompt_token_ids"][: len(ids)] == ids
        )
    assert result["response"]["boundary_events"] == []


async def test_a_token_guard_closes_the_chunk_early_and_compacts_before_the_call(
    vllm_upstream: VllmUpstream, tmp_path: Path
) -> None:
    """Chunks of four calls, a token limit just under the third call's uncompacted prompt: the chunk
    closes after two calls and the prompt, compacted then (the first reasoning left out), is admitted."""
    with stack(vllm_upstream, tmp_path, {"enabled": True}) as (url, model):
        status, _ = await run(url)
    assert status == 200
    uncompacted = len(
        [e for e in vllm_upstream.requests(model) if e["path"] == CHAT_PATH][2]["prompt_token_ids"]
    )

    settings = {
        "enabled": True,
        "policy": RECENCY,
        "schedule": {"type": "turn_chunked_recency", "actions_per_chunk": 4},
        "guards": {"max_total_tokens": uncompacted + 9, "reserved_generation_tokens": 10},
    }
    with stack(vllm_upstream, tmp_path, settings) as (url, model):
        status, result = await run(url)
    assert status == 200, result

    first = result["response"]["guard_records"][0]
    assert first["applies_to_step"] == 3 and first["guard_name"] == "max_total_tokens"
    assert (first["measured_value"], first["configured_limit"]) == (uncompacted + 10, uncompacted + 9)
    assert first["early_chunk_close"] and first["decision"] == "admit_after_compaction"
    third = [e for e in vllm_upstream.requests(model) if e["path"] == CHAT_PATH][2]
    assert first["post_compaction_value"] == len(third["prompt_token_ids"]) + 10 <= uncompacted + 9
    assert "First add one." not in third["prompt_text"] and "required_prefix_token_ids" not in third["body"]
    assert result["response"]["boundary_events"][0]["applies_to_step"] == 3


async def test_a_task_whose_input_alone_is_over_a_guard_is_a_422_naming_the_guard(
    vllm_upstream: VllmUpstream, tmp_path: Path
) -> None:
    settings = {"enabled": True, "guards": {"max_total_tokens": 5}}
    with stack(vllm_upstream, tmp_path, settings) as (url, model):
        status, result = await run(url)
    assert status == 422
    assert "max_total_tokens" in result["error"]["message"]
    assert not [e for e in vllm_upstream.requests(model) if e["path"] == CHAT_PATH]  # no call was made


async def test_a_model_server_without_token_ids_gets_the_compacted_context_and_no_prefix(
    scripted_upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """openai_model in front of the scripted upstream: the shipped pairing's compactions happen all the
    same (the old reasoning leaves the requests), but with no token ids there is no prefix to send."""
    model = fresh_model("compaction")
    settings = {
        "openai_base_url": scripted_upstream.base_url,
        "openai_api_key": "sk-test",
        "openai_model": model,
    }
    scripted_upstream.script(
        model,
        [
            {
                "output": [
                    reasoning(step["reasoning"]),
                    *(function_call(c["name"], c["arguments"]) for c in step["tool_calls"]),
                ]
            }
            for step in counter_steps()[:4]
        ]
        + [{"output": [reasoning("It is six."), assistant_message("The count is 6.")]}],
    )
    with agent_stack(tmp_path, "openai_model", settings, SHIPPED) as url:
        status, result = await run(url)
    assert status == 200 and result["reward"] == 1.0, result

    inputs = [entry["body"]["input"] for entry in scripted_upstream.requests(model)]
    assert all(
        "required_prefix_token_ids" not in entry["body"] for entry in scripted_upstream.requests(model)
    )
    thoughts = [
        [item["summary"][0]["text"] for item in shown if item.get("type") == "reasoning"] for shown in inputs
    ]
    assert thoughts == [
        [],
        ["First add one."],
        ["Now add two."],  # compacted: the first call's reasoning is left out
        ["Now add two.", "Read the count."],
        ["Read it again."],  # compacted again
    ]
    metadata = result["response"]["model_call_metadata"]
    assert [entry["expected_append_compatible"] for entry in metadata] == [False, True, False, True, False]
    assert [entry["required_prefix_token_count"] for entry in metadata] == [0] * 5
    assert [event["applies_to_step"] for event in result["response"]["boundary_events"]] == [3, 5]
    assert [item["type"] for item in result["response"]["output"]].count("reasoning") == 5


@pytest.mark.parametrize(
    ("context_history", "named"),
    [
        ({"enabled": True, "schedule": {"actions_per_chunk": 2}}, "actions_per_chunk must be 1"),
        ({"enabled": True, "policy": {"type": "summary"}}, "unknown policy.type 'summary'"),
        ({"enabled": True, "policy": {"type": "recency"}}, "needs images.enabled or reasoning.enabled"),
        (
            {"enabled": True, "policy": {"type": "recency", "config": {"images": {"keep_last_groups": 2}}}},
            "config.images: ['keep_last_groups'] only apply with enabled: true",
        ),
        ({"enabled": True, "guards": {"max_vision_tokens": 10}}, "needs projected_vision_tokens_per_image"),
    ],
)
def test_a_context_history_that_cannot_work_refuses_to_start_in_one_line(
    context_history: dict[str, Any], named: str, tmp_path: Path
) -> None:
    agent = agent_config(context_history)
    with pytest.raises(RuntimeError) as refused, run_instance({"agent": agent}, "agent", tmp_path):
        pass
    [line] = [line for line in str(refused.value).splitlines() if line.startswith("Error:")]
    assert (
        line.startswith("Error: invalid config for server instance 'agent': ") and "context_history" in line
    )
    assert named in line
