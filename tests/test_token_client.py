"""GymTokenClient against a vllm_model training server and the vLLM-compatible upstream (real BPE ids).

Calls are made as a Verifiers rollout makes them: plain chat messages, the returned assistant message
appended as the SDK object, tool results and user turns added between calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from nemo_gym.token_client import GymTokenClient
from responses_api_models.vllm_model.tests.test_training import generation_prompts, training_server
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
QUESTION = {"role": "user", "content": "Weather in Paris?"}
STEPS = [
    {"tool_calls": [scripted_call("get_weather", {"city": "Paris"})]},
    {"text": "Paris is sunny."},
    {"text": "Yes, take sunglasses."},
]


@asynccontextmanager
async def token_client(tmp_path: Path, upstream: VllmUpstream, model: str) -> AsyncIterator[GymTokenClient]:
    upstream.script(model, STEPS)
    async with training_server(tmp_path, upstream, model) as vllm:
        async with GymTokenClient(f"{vllm.process.url}/v1", model=model) as client:
            yield client


async def three_turns(client: GymTokenClient, messages: list[Any]) -> list[ChatCompletion]:
    """Tool call, answer, follow-up answer; the third call goes through a copy of the client."""
    first = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL], max_tokens=64)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL], temperature=1.0)
    messages += [second.choices[0].message, {"role": "user", "content": "Sunglasses?"}]
    third = await client.copy().chat.completions.create(messages=messages, tools=[WEATHER_TOOL])
    messages.append(third.choices[0].message)
    return [first, second, third]


def generation_paths(upstream: VllmUpstream, model: str) -> list[str]:
    return [
        call["path"]
        for call in upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/v1/completions")
    ]


async def test_every_prompt_extends_the_last_and_logprobs_align_with_token_ids(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    async with token_client(tmp_path, vllm_upstream, model) as client:
        completions = await three_turns(client, [QUESTION])

    prompts = [completion.prompt_token_ids for completion in completions]
    assert generation_prompts(vllm_upstream, model) == prompts
    assert generation_paths(vllm_upstream, model) == [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/completions",
    ]
    for earlier, later in zip(completions, completions[1:], strict=False):
        expected = earlier.prompt_token_ids + earlier.choices[0].token_ids
        assert later.prompt_token_ids[: len(expected)] == expected
    for completion in completions:
        choice = completion.choices[0]
        assert choice.token_ids and len(choice.logprobs.content) == len(choice.token_ids)
        assert [entry.token_id for entry in choice.logprobs.content] == choice.token_ids
        assert all(entry.token == f"token_id:{entry.token_id}" for entry in choice.logprobs.content)
        assert all(isinstance(entry.logprob, float) for entry in choice.logprobs.content)
        assert getattr(completion, "token_continuity", None) is None
    assert completions[0].choices[0].message.tool_calls[0].function.name == "get_weather"
    assert completions[2].choices[0].message.content == "Yes, take sunglasses."


async def test_reset_makes_the_next_call_a_first_turn_and_copies_share_the_reset(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    messages: list[Any] = [QUESTION]
    async with token_client(tmp_path, vllm_upstream, model) as client:
        await three_turns(client, messages)
        copy = client.copy()
        client.reset()
        vllm_upstream.script(model, [{"text": "Again: sunny."}])
        again = await copy.chat.completions.create(
            messages=messages + [{"role": "user", "content": "Again?"}]
        )

    # Without the reset the history's assistant turns would carry their ids: a token-in/token-out call.
    assert generation_paths(vllm_upstream, model) == [
        "/v1/chat/completions", "/v1/completions", "/v1/completions", "/v1/chat/completions"
    ]  # fmt: skip
    assert again.choices[0].message.content == "Again: sunny."
    assert len(client.state.turns) == 1 and client.state.cookies


async def test_more_than_one_choice_and_a_closed_client_are_refused() -> None:
    client = GymTokenClient("http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="n=1"):
        await client.chat.completions.create(messages=[{"role": "user", "content": "Hi"}], n=2)
    await client.close()
    await client.close()
    with pytest.raises(RuntimeError, match="closed"):
        await client.chat.completions.create(messages=[{"role": "user", "content": "Hi"}])
