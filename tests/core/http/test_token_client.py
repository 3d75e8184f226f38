"""GymTokenClient against a vllm_model training server and the vLLM-compatible upstream (real BPE ids).

Calls are made as a Verifiers rollout makes them: plain chat messages, the returned assistant message
appended as the SDK object, tool results and user turns added between calls.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion

from nemo_gym.http.token_client import TOKEN_FIELDS, GymTokenClient
from responses_api_models.vllm_model.tests.test_training import generation_prompts, training_server
from tests.shared_fixtures import closed_port
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


def as_plain_dict(message: Any) -> dict[str, Any]:
    return message.model_dump(mode="json", exclude_none=True) if hasattr(message, "model_dump") else message


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
        # Sent back as plain dicts: the SDK messages would carry their own token data.
        plain = [
            {key: value for key, value in as_plain_dict(message).items() if key not in TOKEN_FIELDS}
            for message in messages
        ]
        again = await copy.chat.completions.create(messages=plain + [{"role": "user", "content": "Again?"}])

    # Without the reset the history's assistant turns would carry their ids: a token-in/token-out call.
    assert generation_paths(vllm_upstream, model) == [
        "/v1/chat/completions", "/v1/completions", "/v1/completions", "/v1/chat/completions"
    ]  # fmt: skip
    assert again.choices[0].message.content == "Again: sunny."
    assert len(client.state.turns) == 1 and len(client.state.cookies) == 1


def prompts_of(upstream: VllmUpstream, model: str) -> list[list[int]]:
    return [
        call["prompt_token_ids"] for call in upstream.requests(model) if call["path"] == "/v1/completions"
    ]


def extends(prompt: list[int], completion: ChatCompletion) -> bool:
    expected = completion.prompt_token_ids + completion.choices[0].token_ids
    return prompt[: len(expected)] == expected


async def test_two_rollouts_sharing_a_client_keep_their_own_ids_when_their_texts_coincide(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """The same call and the same answer text in both rollouts, generated as different ids: each
    rollout's next prompt continues its own ids (told apart by the tool-call ids the server gave)."""
    model = fresh_model("vllm")
    same_call = {"tool_calls": [scripted_call("get_weather", {"city": "Paris"})]}
    vllm_upstream.script(
        model, [same_call, {**same_call, "noncanonical": True}, {"text": "A."}, {"text": "B."}]
    )
    async with training_server(tmp_path, vllm_upstream, model) as vllm:
        async with GymTokenClient(f"{vllm.process.url}/v1", model=model) as client:
            rollouts: list[list[Any]] = [[QUESTION], [QUESTION]]
            firsts = []
            for messages in rollouts:
                first = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL])
                call = first.choices[0].message.tool_calls[0]
                # Sent back as plain dicts, as Verifiers does: only the text and the call id remain.
                messages += [
                    {"role": "assistant", "content": "", "tool_calls": [call.model_dump(mode="json")]},
                    {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
                ]
                firsts.append(first)
            seconds = [
                await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL])
                for messages in rollouts
            ]

    assert firsts[0].choices[0].token_ids != firsts[1].choices[0].token_ids
    own, other = prompts_of(vllm_upstream, model), list(reversed(firsts))
    for prompt, first, second, stranger in zip(own, firsts, seconds, other, strict=True):
        assert extends(prompt, first) and not extends(prompt, stranger)
        assert getattr(second, "token_continuity", None) is None


async def test_twins_the_client_cannot_tell_apart_are_flagged_never_mixed(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """Same text, different ids, nothing else to go by: the turn goes without token data, and the
    answer says the prompt was re-tokenised there. The SDK message sent back as is carries its own."""
    model = fresh_model("vllm")
    vllm_upstream.script(
        model,
        [{"text": "Sunny."}, {"text": "Sunny.", "noncanonical": True}, {"text": "Yes."}, {"text": "Yes."}],
    )
    async with training_server(tmp_path, vllm_upstream, model) as vllm:
        async with GymTokenClient(f"{vllm.process.url}/v1", model=model) as client:
            first = await client.chat.completions.create(messages=[QUESTION])
            twin = await client.chat.completions.create(messages=[QUESTION])
            follow_up = {"role": "user", "content": "Sure?"}
            as_text = {"role": "assistant", "content": "Sunny."}
            blind = await client.chat.completions.create(messages=[QUESTION, as_text, follow_up])
            exact = await client.chat.completions.create(
                messages=[QUESTION, twin.choices[0].message, follow_up]
            )

    assert first.choices[0].token_ids != twin.choices[0].token_ids
    assert blind.token_continuity["broken_at_turn"] == 1
    assert "carries no token ids" in blind.token_continuity["reason"]
    assert getattr(exact, "token_continuity", None) is None
    assert extends(exact.prompt_token_ids, twin) and not extends(exact.prompt_token_ids, first)


async def weather_call(client: GymTokenClient) -> tuple[ChatCompletion, Any]:
    """The first turn of a rollout: the model calls the weather tool; the completion and its call."""
    first = await client.chat.completions.create(messages=[QUESTION], tools=[WEATHER_TOOL])
    return first, first.choices[0].message.tool_calls[0]


async def test_a_generation_edited_on_its_way_back_is_flagged_not_continued_silently(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    async with token_client(tmp_path, vllm_upstream, model) as client:
        _, call = await weather_call(client)
        reserialised = {
            **call.model_dump(mode="json"),
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        }
        messages = [
            QUESTION,
            {"role": "assistant", "content": "", "tool_calls": [reserialised]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        second = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL])

    assert second.token_continuity["broken_at_turn"] == 1
    assert "differs from what the model generated" in second.token_continuity["reason"]
    assert second.choices[0].message.content == "Paris is sunny."


async def test_a_turn_that_overflows_the_context_carries_no_token_data_and_costs_no_continuity(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    async with token_client(tmp_path, vllm_upstream, model) as client:
        first, call = await weather_call(client)
        messages = [
            QUESTION,
            first.choices[0].message,
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ]
        roomy = vllm_upstream.configure(model)["max_model_len"]
        vllm_upstream.configure(model, max_model_len=len(first.prompt_token_ids))
        overflowed = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL])
        vllm_upstream.configure(model, max_model_len=roomy)
        messages += [overflowed.choices[0].message, {"role": "user", "content": "Try again?"}]
        third = await client.chat.completions.create(messages=messages, tools=[WEATHER_TOOL])

    choice = overflowed.choices[0]
    assert choice.finish_reason == "length" and not choice.message.content
    assert (
        getattr(choice, "token_ids", None) is None and getattr(overflowed, "prompt_token_ids", None) is None
    )
    assert not set(TOKEN_FIELDS) & set(choice.message.model_dump(exclude_none=True))
    assert getattr(third, "token_continuity", None) is None
    expected = first.prompt_token_ids + first.choices[0].token_ids
    assert third.prompt_token_ids[: len(expected)] == expected and third.choices[0].token_ids


async def test_extra_body_reaches_the_upstream_on_every_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    extra = {
        "top_k": 20,
        "min_p": 0.05,
        "repetition_penalty": 1.1,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    async with token_client(tmp_path, vllm_upstream, model) as client:
        messages: list[Any] = [QUESTION]
        for _ in range(3):
            completion = await client.chat.completions.create(
                messages=messages, tools=[WEATHER_TOOL], temperature=0.5, extra_body=extra
            )
            message = completion.choices[0].message
            messages.append(message)
            if message.tool_calls:
                messages.append(
                    {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "sunny"}
                )
            else:
                messages.append({"role": "user", "content": "More?"})

    generations = [
        call
        for call in vllm_upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/v1/completions")
    ]
    assert len(generations) == 3
    for call in generations:
        body = call["body"]
        assert (body["top_k"], body["min_p"], body["repetition_penalty"], body["temperature"]) == (
            20,
            0.05,
            1.1,
            0.5,
        )
    renderings = [
        call
        for call in vllm_upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/tokenize")
    ]
    assert all(call["body"]["chat_template_kwargs"] == {"enable_thinking": False} for call in renderings)
    assert all(
        prompt.endswith("<think>\n\n</think>\n\n")
        for prompt in (
            vllm_upstream.detokenize(model, ids) for ids in generation_prompts(vllm_upstream, model)
        )
    )


async def test_failures_are_openais_own_errors(tmp_path: Path, vllm_upstream: VllmUpstream) -> None:
    model = fresh_model("vllm")
    async with training_server(tmp_path, vllm_upstream, model) as vllm:
        vllm_upstream.script(model, [{"status": 400, "body": {"error": {"message": "bad prompt"}}}])
        async with GymTokenClient(f"{vllm.process.url}/v1", model=model) as client:
            with pytest.raises(openai.BadRequestError) as refused:
                await client.chat.completions.create(messages=[QUESTION])
            with pytest.raises(openai.BadRequestError, match="n: training mode generates one choice"):
                await client.chat.completions.create(messages=[QUESTION], n=2)
    assert refused.value.status_code == 400 and "bad prompt" in str(refused.value.body)

    unreachable = GymTokenClient(f"http://127.0.0.1:{closed_port()}/v1", max_retries=1)
    with pytest.raises(openai.APIConnectionError):
        await unreachable.chat.completions.create(messages=[QUESTION])


@pytest.mark.parametrize("max_retries", [0, 1])
async def test_max_retries_counts_retries_after_the_first_attempt_as_in_openai(
    vllm_upstream: VllmUpstream, max_retries: int
) -> None:
    model = fresh_model("vllm")
    unavailable = {"status": 503, "body": {"error": {"message": "warming up"}}}
    vllm_upstream.script(model, [unavailable] * (max_retries + 2))
    client = GymTokenClient(vllm_upstream.base_url, model=model, max_retries=max_retries)
    with pytest.raises(openai.InternalServerError):
        await client.chat.completions.create(messages=[QUESTION])
    assert len(vllm_upstream.requests(model)) == max_retries + 1


async def test_streaming_and_a_closed_client_are_refused() -> None:
    client = GymTokenClient("http://127.0.0.1:9/v1")
    with pytest.raises(ValueError, match="does not stream"):
        await client.chat.completions.create(messages=[QUESTION], stream=True)
    await client.close()
    await client.close()
    with pytest.raises(RuntimeError, match="closed"):
        await client.chat.completions.create(messages=[QUESTION])
