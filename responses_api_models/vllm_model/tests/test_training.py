"""Training mode against the vLLM-compatible upstream: real processes, real BPE token ids.

A rollout is driven as an agent drives it: every turn POSTs /v1/responses with the previous input plus
the output items exactly as returned (token fields included) and the tool results.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from pydantic import TypeAdapter

from nemo_gym.openai_utils import RESPONSES_TO_TRAIN, NeMoGymResponseInputItem
from nemo_gym.testing import StartedServer
from responses_api_models.vllm_model.tests.test_app import Served, rollout_session, served
from responses_api_models.vllm_model.training import EOS_PROBES, LONG_HISTORY_TOKENS
from tests.upstream_script import ScriptedUpstream
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}
CITIES = ("Paris", "London", "Berlin", "Tokyo")
ITEMS = TypeAdapter(list[NeMoGymResponseInputItem])
TRAINING_TYPES = tuple(RESPONSES_TO_TRAIN.values())


def weather_steps() -> list[dict[str, Any]]:
    """Four tool-calling turns with reasoning, then the answer."""
    calls = [
        {"reasoning": f"I should check {city}.", "tool_calls": [scripted_call("get_weather", {"city": city})]}
        for city in CITIES
    ]
    return [*calls, {"reasoning": "All checked.", "text": "Paris is the sunniest."}]


@asynccontextmanager
async def training_server(
    tmp_path: Path, upstream: ScriptedUpstream, model: str, **settings: Any
) -> AsyncIterator[Served]:
    """Training mode as NeMo Gym configures it: no eos_token_id unless a test sets one. The reasoning
    parser is off unless a test turns it on: vLLM's qwen3 parser reads a turn without `</think>` as
    all reasoning, and most scripted turns here are plain text."""
    settings.setdefault("uses_reasoning_parser", False)
    async with served(
        tmp_path, upstream.base_url, model, return_token_id_information=True, **settings
    ) as vllm:
        yield vllm


def weather_question() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Which city is sunniest?"}]


def noncanonical_weather_steps() -> list[dict[str, Any]]:
    """The weather turns, the first one sampled as ids the tokenizer would not produce for its text."""
    first, *rest = weather_steps()
    return [{**first, "noncanonical": True}, *rest]


@asynccontextmanager
async def weather_rollout(
    tmp_path: Path,
    upstream: VllmUpstream,
    model: str,
    steps: list[dict[str, Any]] | None = None,
    **settings: Any,
) -> AsyncIterator[tuple[Served, aiohttp.ClientSession]]:
    """A training server with the reasoning parser on, `steps` (the weather turns) scripted for `model`,
    and the cookie session of one rollout."""
    upstream.script(model, weather_steps() if steps is None else steps)
    server = training_server(tmp_path, upstream, model, uses_reasoning_parser=True, **settings)
    async with server as vllm, rollout_session() as session:
        yield vllm, session


def probes_made(upstream: VllmUpstream, model: str) -> int:
    """How many end-of-turn probes reached the upstream (each renders the first probe conversation once)."""
    return sum(
        call["path"] == "/tokenize" and call["body"].get("messages") == EOS_PROBES[0]
        for call in upstream.requests(model)
    )


def tool_results(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One distinct result per call (an edit is then unambiguous: no other tool turn reads the same)."""
    return [
        {
            "type": "function_call_output",
            "call_id": item["call_id"],
            "output": f"{orjson.loads(item['arguments'])['city']}: sunny",
        }
        for item in output
        if item["type"] == "function_call"
    ]


def generation_prompts(upstream: VllmUpstream, model: str) -> list[list[int]]:
    """The prompt ids the engine was given for each generation (not for /tokenize)."""
    return [
        call["prompt_token_ids"]
        for call in upstream.requests(model)
        if call["path"] in ("/v1/chat/completions", "/v1/completions")
    ]


async def run_turns(
    vllm: Served, session: aiohttp.ClientSession, history: list[dict[str, Any]], turns: int
) -> list[dict[str, Any]]:
    """`turns` model calls, each fed the growing history; returns every response."""
    responses = []
    for _ in range(turns):
        status, response = await vllm.post(
            "/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session
        )
        assert status == 200, response
        responses.append(response)
        history.extend(response["output"])
        history.extend(tool_results(response["output"]))
    return responses


def token_fields(response: dict[str, Any]) -> tuple[list[int], list[int], list[float]]:
    last = response["output"][-1]
    return last["prompt_token_ids"], last["generation_token_ids"], last["generation_log_probs"]


async def test_five_tool_turns_keep_every_prompt_an_exact_extension_of_the_last(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model) as (vllm, session):
        responses = await run_turns(vllm, session, history, turns=5)

    fields = [token_fields(response) for response in responses]
    assert generation_prompts(vllm_upstream, model) == [prompt for prompt, _, _ in fields]
    for (prompt, generated, _), (next_prompt, _, _) in zip(fields, fields[1:], strict=False):
        assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    for prompt, generated, log_probs in fields:
        assert prompt and generated and len(log_probs) == len(generated)
    eos = vllm_upstream.tokenizer_info()["eos_token_id"]
    assert all(generated[-1] == eos for _, generated, _ in fields)

    for response, city in zip(responses, CITIES, strict=False):
        reasoning, call = ITEMS.validate_python(response["output"])
        assert reasoning.summary[0].text == f"\nI should check {city}.\n"  # vLLM's qwen3 keeps the newlines
        assert (call.name, call.arguments) == ("get_weather", f'{{"city": "{city}"}}')
        assert isinstance(call, TRAINING_TYPES) and not isinstance(reasoning, TRAINING_TYPES)
        assert "token_continuity" not in response
    reasoning, message = ITEMS.validate_python(responses[-1]["output"])
    assert reasoning.summary[0].text == "\nAll checked.\n"
    assert message.content[0].text == "\n\nParis is the sunniest." and isinstance(message, TRAINING_TYPES)
    assert [call["path"] for call in vllm_upstream.requests(model)].count("/v1/completions") == 4


async def test_a_user_message_after_reasoning_turns_keeps_the_prompt_an_exact_extension(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """The template (as Qwen3's) stops rendering the earlier turns' reasoning once a user message
    follows them; the model did generate it, so the next prompt still starts with P + G."""
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model) as (vllm, session):
        responses = await run_turns(vllm, session, history, turns=2)
        history.append({"role": "user", "content": "And tomorrow?"})
        responses += await run_turns(vllm, session, history, turns=2)

    assert all("token_continuity" not in response for response in responses)
    fields = [token_fields(response) for response in responses]
    assert generation_prompts(vllm_upstream, model) == [prompt for prompt, _, _ in fields]
    for (prompt, generated, _), (next_prompt, _, _) in zip(fields, fields[1:], strict=False):
        assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    (prompt, generated, _), (after_user, _, _) = fields[1], fields[2]
    assert "I should check London." in vllm_upstream.detokenize(model, after_user)
    tail = vllm_upstream.detokenize(model, after_user[len(prompt) + len(generated) :])
    assert tail.endswith("<|im_start|>user\nAnd tomorrow?<|im_end|>\n<|im_start|>assistant\n")
    [asked] = [
        call["body"]
        for call in vllm_upstream.requests(model)
        if call["path"] == "/tokenize" and call["body"]["messages"][-1]["content"] == "And tomorrow?"
    ]
    canonical = vllm_upstream.tokenize_messages(model, asked["messages"], asked["tools"])
    assert "I should check London." not in vllm_upstream.detokenize(model, canonical)


async def test_a_reasoning_only_turn_followed_by_more_generation_keeps_the_prompt_an_exact_extension(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """A turn that only reasoned comes back as a reasoning item alone; asking the model again continues
    from its ids, the template's end of that turn and a new assistant header following them."""
    model = fresh_model("vllm")
    thought = {
        "raw": "<think>\nLet me think.\n</think>\n\n",
        "message": {"reasoning_content": "\nLet me think.\n"},
    }
    vllm_upstream.script(model, [thought, {"text": "Done."}])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Hi?"}]
    server = training_server(tmp_path, vllm_upstream, model, uses_reasoning_parser=True)
    async with server as vllm, rollout_session() as session:
        status, first = await vllm.post("/v1/responses", {"input": history}, session)
        assert status == 200 and [item["type"] for item in first["output"]] == ["reasoning"], first
        status, second = await vllm.post("/v1/responses", {"input": history + first["output"]}, session)

    assert status == 200 and "token_continuity" not in second, second
    (prompt, generated, _), (next_prompt, _, _) = token_fields(first), token_fields(second)
    assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    assert vllm_upstream.detokenize(model, next_prompt[len(prompt) + len(generated) :]) == (
        "\n<|im_start|>assistant\n"
    )


async def test_a_long_history_is_spliced_as_exactly_as_a_short_one(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """From LONG_HISTORY_TOKENS prompt tokens on the splice point is searched in a worker thread."""
    model = fresh_model("vllm")
    vllm_upstream.configure(model, max_model_len=8 * LONG_HISTORY_TOKENS)
    history = weather_question()
    long_report = " ".join(f"reading {index} sunny" for index in range(LONG_HISTORY_TOKENS // 3))
    async with weather_rollout(tmp_path, vllm_upstream, model) as (vllm, session):
        [first] = await run_turns(vllm, session, history, turns=1)
        history[-1] = {**history[-1], "output": long_report}
        [second] = await run_turns(vllm, session, history, turns=1)

    (prompt, generated, _), (next_prompt, _, _) = token_fields(first), token_fields(second)
    assert len(next_prompt) >= LONG_HISTORY_TOKENS and "token_continuity" not in second
    assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    assert next_prompt == generation_prompts(vllm_upstream, model)[-1]


async def test_a_noncanonical_generation_is_continued_with_its_own_ids_not_retokenised(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model, noncanonical_weather_steps()) as (
        vllm,
        session,
    ):
        responses = await run_turns(vllm, session, history, turns=2)

    (prompt, generated, _), (next_prompt, _, _) = (token_fields(response) for response in responses)
    assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    assert "token_continuity" not in responses[1]
    body = vllm_upstream.tokenize(model, vllm_upstream.detokenize(model, generated))
    assert body != generated  # re-tokenising the text would have changed what the model produced


async def test_first_turn_prompt_ids_are_the_templated_conversation(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Hello there!"}])
    question = [{"role": "user", "content": "Hello?"}]
    async with training_server(tmp_path, vllm_upstream, model) as vllm:
        status, response = await vllm.post("/v1/responses", {"input": question})

    assert status == 200
    prompt, generated, _ = token_fields(response)
    user = {"role": "user", "content": [{"type": "text", "text": "Hello?"}]}
    assert (
        prompt
        == vllm_upstream.tokenize_messages(model, [user])
        == generation_prompts(vllm_upstream, model)[0]
    )
    assert vllm_upstream.detokenize(model, generated) == "Hello there!<|im_end|>"


async def rollout_then_edit(
    tmp_path: Path,
    upstream: VllmUpstream,
    turns: int,
    edit: Callable[[list[dict[str, Any]]], None],
) -> tuple[str, dict[str, Any]]:
    """`turns` weather turns, then `edit` changes the history in place and one more turn is asked for."""
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, upstream, model) as (vllm, session):
        await run_turns(vllm, session, history, turns=turns)
        edit(history)
        status, response = await vllm.post(
            "/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session
        )
    assert status == 200, response
    return model, response


def item_index(history: list[dict[str, Any]], item_type: str, occurrence: int = 0) -> int:
    return [index for index, item in enumerate(history) if item.get("type") == item_type][occurrence]


def assert_canonical_prompt_sent(upstream: VllmUpstream, model: str, response: dict[str, Any]) -> None:
    """A flagged turn is prompted with the template's own tokenisation of the current history."""
    canonical = [
        call["body"]
        for call in upstream.requests(model)
        if call["path"] == "/tokenize" and call["body"]["add_generation_prompt"]
    ][-1]
    assert token_fields(response)[0] == generation_prompts(upstream, model)[-1]
    assert token_fields(response)[0] == upstream.tokenize_messages(
        model, canonical["messages"], canonical["tools"]
    )


async def test_an_edited_tool_output_is_flagged_at_the_turn_it_fed_and_the_canonical_prompt_is_sent(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    def edit(history: list[dict[str, Any]]) -> None:
        first_result = item_index(history, "function_call_output")
        history[first_result] = {**history[first_result], "output": "rainy, edited"}

    model, response = await rollout_then_edit(tmp_path, vllm_upstream, 3, edit)
    assert response["token_continuity"]["broken_at_turn"] == 2
    assert "edited" in response["token_continuity"]["reason"]
    assert_canonical_prompt_sent(vllm_upstream, model, response)


async def test_a_turn_that_overflows_the_context_has_no_token_data_and_keeps_the_earlier_flag(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """NeMo RL takes every item with `generation_token_ids` as a turn to train on, so a turn the model
    generated nothing for must not carry empty lists; the break found in its history is still reported,
    on the response and on the turn's item (which stays with the turn in an agent's rollout)."""
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model) as (vllm, session):
        await run_turns(vllm, session, history, turns=2)
        first_result = item_index(history, "function_call_output")
        history[first_result] = {**history[first_result], "output": "rainy, edited"}
        [flagged] = await run_turns(vllm, session, history, turns=1)
        vllm_upstream.configure(model, max_model_len=len(token_fields(flagged)[0]))
        status, overflowed = await vllm.post(
            "/v1/responses", {"input": history, "tools": [WEATHER_TOOL]}, session
        )

    assert status == 200, overflowed
    assert flagged["token_continuity"]["broken_at_turn"] == 2
    assert flagged["output"][-1]["token_continuity"] == flagged["token_continuity"]
    assert overflowed["status"] == "incomplete"
    assert overflowed["incomplete_details"] == {"reason": "max_output_tokens"}
    assert overflowed["token_continuity"] == flagged["token_continuity"]
    [item] = overflowed["output"]
    assert item["token_continuity"] == flagged["token_continuity"]
    assert not {"prompt_token_ids", "generation_token_ids", "generation_log_probs"} & set(item)


@pytest.mark.parametrize("where", ["before_the_last_turn", "after_the_first_call"])
async def test_a_message_inserted_into_the_recorded_history_is_flagged(
    tmp_path: Path, vllm_upstream: VllmUpstream, where: str
) -> None:
    def edit(history: list[dict[str, Any]]) -> None:
        kind, occurrence = (
            ("reasoning", 2) if where == "before_the_last_turn" else ("function_call_output", 0)
        )
        at = item_index(history, kind, occurrence) + (where == "after_the_first_call")
        history.insert(at, {"role": "user", "content": "Also Rome?"})

    model, response = await rollout_then_edit(tmp_path, vllm_upstream, 3, edit)
    assert response["token_continuity"]["broken_at_turn"] == (3 if where == "before_the_last_turn" else 2)
    assert_canonical_prompt_sent(vllm_upstream, model, response)


async def test_turns_whose_recorded_ids_do_not_chain_are_flagged(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    def edit(history: list[dict[str, Any]]) -> None:
        third = item_index(history, "function_call", 2)
        history[third] = {**history[third], "prompt_token_ids": history[third]["prompt_token_ids"][1:]}

    _, response = await rollout_then_edit(tmp_path, vllm_upstream, 3, edit)
    assert response["token_continuity"]["broken_at_turn"] == 3


async def test_missing_logprobs_are_a_502_not_a_turn_without_token_data(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    model = fresh_model()
    scripted_upstream.script(model, [{"message": {"content": "no logprobs here"}}])
    async with training_server(tmp_path, scripted_upstream, model) as vllm:
        status, body = await vllm.post("/v1/responses", {"input": "hi"})

    assert status == 502
    assert body["error"]["type"] == "bad_upstream_response" and "logprobs" in body["error"]["message"]


@pytest.mark.parametrize("max_output_tokens", [None, 7])
async def test_continued_turns_always_set_max_tokens(
    tmp_path: Path, vllm_upstream: VllmUpstream, max_output_tokens: int | None
) -> None:
    model = fresh_model("vllm")
    history = weather_question()
    async with weather_rollout(tmp_path, vllm_upstream, model) as (vllm, session):
        await run_turns(vllm, session, history, turns=1)
        request = {"input": history, "tools": [WEATHER_TOOL], "max_output_tokens": max_output_tokens}
        status, response = await vllm.post("/v1/responses", request, session)

    assert status == 200
    [completion] = [call for call in vllm_upstream.requests(model) if call["path"] == "/v1/completions"]
    max_model_len = vllm_upstream.configure(model)["max_model_len"]
    expected = max_output_tokens or max_model_len - len(completion["prompt_token_ids"])
    assert completion["body"]["max_tokens"] == expected
    assert (completion["body"]["logprobs"], completion["body"]["return_tokens_as_token_ids"]) == (0, True)
    if max_output_tokens:
        assert response["status"] == "incomplete" and len(token_fields(response)[1]) == max_output_tokens


QUESTION = {"role": "user", "content": "Hello?"}
FOLLOW_UP = {"role": "user", "content": "Leaving?"}


async def two_chat_turns(
    tmp_path: Path,
    upstream: VllmUpstream,
    second_messages: Callable[[dict[str, Any]], list[dict[str, Any]]],
    model: str | None = None,
    **settings: Any,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Two chat-route calls of one rollout; the second's messages are made from the first reply."""
    model = model or fresh_model("vllm")
    upstream.script(model, [{"text": "Hello there!"}, {"text": "Bye!"}])
    server = training_server(tmp_path, upstream, model, **settings)
    async with server as vllm, rollout_session() as session:
        status, first = await vllm.post("/v1/chat/completions", {"messages": [QUESTION]}, session)
        assert status == 200, first
        body = {"messages": second_messages(first["choices"][0]["message"])}
        status, second = await vllm.post("/v1/chat/completions", body, session)
        assert status == 200, second
    return model, first, second


async def test_chat_route_returns_token_fields_on_the_message_and_continues_them(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model, first, second = await two_chat_turns(
        tmp_path, vllm_upstream, lambda reply: [QUESTION, reply, FOLLOW_UP]
    )

    replies = [answer["choices"][0]["message"] for answer in (first, second)]
    assert [reply["content"] for reply in replies] == ["Hello there!", "Bye!"]
    assert generation_prompts(vllm_upstream, model) == [reply["prompt_token_ids"] for reply in replies]
    expected = replies[0]["prompt_token_ids"] + replies[0]["generation_token_ids"]
    assert replies[1]["prompt_token_ids"][: len(expected)] == expected
    for reply in replies:
        generated = reply["generation_token_ids"]
        assert generated and len(reply["generation_log_probs"]) == len(generated)
    assert [call["path"] for call in vllm_upstream.requests(model)].count("/v1/completions") == 1
    assert "token_continuity" not in second


async def test_chat_route_flags_a_history_edited_before_a_recorded_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    edited_question = {"role": "user", "content": "Good evening?"}
    model, _, second = await two_chat_turns(
        tmp_path, vllm_upstream, lambda reply: [edited_question, reply, FOLLOW_UP]
    )

    assert second["token_continuity"]["broken_at_turn"] == 1
    assert generation_prompts(vllm_upstream, model)[-1] == second["choices"][0]["message"]["prompt_token_ids"]


async def test_a_chat_turn_limit_reaches_the_completion_only_as_max_tokens(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Hello there!"}, {"text": "Bye for now, see you soon!"}])
    async with training_server(tmp_path, vllm_upstream, model) as vllm, rollout_session() as session:
        status, first = await vllm.post("/v1/chat/completions", {"messages": [QUESTION]}, session)
        body = {"messages": [QUESTION, first["choices"][0]["message"], FOLLOW_UP], "max_completion_tokens": 3}
        status, second = await vllm.post("/v1/chat/completions", body, session)

    assert status == 200, second
    [completion] = [call for call in vllm_upstream.requests(model) if call["path"] == "/v1/completions"]
    assert completion["body"]["max_tokens"] == 3 and "max_completion_tokens" not in completion["body"]


async def test_a_turn_that_generated_nothing_is_not_a_break_in_the_chain(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    empty_turn = {"role": "assistant", "content": "", "prompt_token_ids": [], "generation_token_ids": []}
    model, first, second = await two_chat_turns(
        tmp_path,
        vllm_upstream,
        lambda reply: [QUESTION, reply, FOLLOW_UP, {**empty_turn, "generation_log_probs": []}, FOLLOW_UP],
    )

    assert "token_continuity" not in second
    expected = (
        first["choices"][0]["message"]["prompt_token_ids"]
        + first["choices"][0]["message"]["generation_token_ids"]
    )
    assert second["choices"][0]["message"]["prompt_token_ids"][: len(expected)] == expected


async def test_edited_arguments_of_an_earlier_call_are_flagged_at_that_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    def edit(history: list[dict[str, Any]]) -> None:
        first_call = item_index(history, "function_call")
        history[first_call] = {**history[first_call], "arguments": '{"city": "Madrid"}'}

    model, response = await rollout_then_edit(tmp_path, vllm_upstream, 2, edit)
    assert response["token_continuity"]["broken_at_turn"] == 1
    assert "tool calls" in response["token_continuity"]["reason"]
    assert_canonical_prompt_sent(vllm_upstream, model, response)
    assert "Madrid" in vllm_upstream.detokenize(model, token_fields(response)[0])


async def test_a_turn_cut_by_max_tokens_is_continued_with_the_templates_end_of_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Hello there, how are you?"}, {"text": "Bye!"}])
    async with training_server(tmp_path, vllm_upstream, model) as vllm, rollout_session() as session:
        body = {"messages": [QUESTION], "max_completion_tokens": 3}
        status, first = await vllm.post("/v1/chat/completions", body, session)
        assert status == 200 and first["choices"][0]["finish_reason"] == "length", first
        reply = first["choices"][0]["message"]
        body = {"messages": [QUESTION, reply, FOLLOW_UP]}
        status, second = await vllm.post("/v1/chat/completions", body, session)

    assert status == 200, second
    assert "token_continuity" not in second
    prompt, generated = reply["prompt_token_ids"], reply["generation_token_ids"]
    eos = vllm_upstream.tokenizer_info()["eos_token_id"]
    assert len(generated) == 3 and generated[-1] != eos
    next_prompt = second["choices"][0]["message"]["prompt_token_ids"]
    assert next_prompt == generation_prompts(vllm_upstream, model)[-1]
    assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
    tail = vllm_upstream.detokenize(model, next_prompt[len(prompt) + len(generated) :])
    assert tail == "<|im_end|>\n<|im_start|>user\nLeaving?<|im_end|>\n<|im_start|>assistant\n"


def spliced_tail(upstream: VllmUpstream, model: str, first: dict[str, Any], second: dict[str, Any]) -> str:
    """The text of what the second prompt adds after the first turn's prompt and generation ids, which
    it must start with."""
    earlier, later = (answer["choices"][0]["message"] for answer in (first, second))
    expected = earlier["prompt_token_ids"] + earlier["generation_token_ids"]
    assert later["prompt_token_ids"][: len(expected)] == expected
    return upstream.detokenize(model, later["prompt_token_ids"][len(expected) :])


# The generation ended with <|im_end|>, so the template's tokens take over right after it.
TAIL_AFTER_EOS = "\n<|im_start|>user\nLeaving?<|im_end|>\n<|im_start|>assistant\n"


async def test_a_burst_of_first_continued_turns_probes_the_end_of_turn_id_once(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    burst = 8
    vllm_upstream.script(model, [{"text": "Hello there!"}, {"text": "Bye!", "repeat": burst}])
    async with training_server(tmp_path, vllm_upstream, model) as vllm:
        status, first = await vllm.post("/v1/chat/completions", {"messages": [QUESTION]})
        assert status == 200, first
        body = {"messages": [QUESTION, first["choices"][0]["message"], FOLLOW_UP]}
        answers = await asyncio.gather(*(vllm.post("/v1/chat/completions", body) for _ in range(burst)))

    assert [status for status, _ in answers] == [200] * burst, answers
    assert probes_made(vllm_upstream, model) == 1
    for _, second in answers:
        assert spliced_tail(vllm_upstream, model, first, second) == TAIL_AFTER_EOS
        assert "token_continuity" not in second


@pytest.mark.parametrize("eos_token_id_set", [True, False])
async def test_eos_token_id_in_the_config_is_used_as_is_and_else_probed(
    tmp_path: Path, vllm_upstream: VllmUpstream, eos_token_id_set: bool
) -> None:
    eos = vllm_upstream.tokenizer_info()["eos_token_id"]
    settings = {"eos_token_id": eos} if eos_token_id_set else {}
    model, first, second = await two_chat_turns(
        tmp_path, vllm_upstream, lambda reply: [QUESTION, reply, FOLLOW_UP], **settings
    )

    assert probes_made(vllm_upstream, model) == (0 if eos_token_id_set else 1)
    assert spliced_tail(vllm_upstream, model, first, second) == TAIL_AFTER_EOS
    assert "token_continuity" not in second


# A continued turn as a trainer sends it: the assistant message carries the ids of its model call.
CONTINUED_MESSAGES = [
    QUESTION,
    {
        "role": "assistant",
        "content": "Hello there!",
        "prompt_token_ids": [1, 2],
        "generation_token_ids": [3, 4],
        "generation_log_probs": [-0.5, -0.5],
    },
    FOLLOW_UP,
]


@pytest.mark.parametrize(
    ("upstream_kind", "reason"),
    [("tokenize_answers_404", "/tokenize answered HTTP 404"), ("no_chat_template", "no common token")],
)
async def test_an_upstream_that_cannot_show_the_end_of_turn_id_is_a_502_naming_eos_token_id(
    tmp_path: Path,
    flaky_server: StartedServer,
    scripted_upstream: ScriptedUpstream,
    upstream_kind: str,
    reason: str,
) -> None:
    model = fresh_model("no-eos")
    base_url = {
        # Every call under this base URL answers 404, as a server without vLLM's /tokenize would.
        "tokenize_answers_404": f"{flaky_server.url}/s/{model}/404/1000000/v1",
        # One token per word of the message texts: no template, so no closing tokens to find.
        "no_chat_template": scripted_upstream.base_url,
    }[upstream_kind]
    async with served(tmp_path, base_url, model, return_token_id_information=True) as vllm:
        status, body = await vllm.post("/v1/chat/completions", {"messages": CONTINUED_MESSAGES})

    assert (status, body["error"]["type"]) == (502, "bad_upstream_response"), body
    message = body["error"]["message"]
    assert reason in message and "set eos_token_id" in message and "\n" not in message


async def test_sampling_overrides_win_over_the_caller_on_every_generation_request(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    model = fresh_model("vllm")
    vllm_upstream.script(model, weather_steps())
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    overrides = {"temperature": 0.0, "top_k": 3}
    server = training_server(
        tmp_path, vllm_upstream, model, uses_reasoning_parser=True, sampling_overrides=overrides
    )
    async with server as vllm, rollout_session() as session:
        for _ in range(2):
            body = {"input": history, "tools": [WEATHER_TOOL], "temperature": 1.0}
            status, response = await vllm.post("/v1/responses", body, session)
            assert status == 200, response
            history.extend(response["output"])
            history.extend(tool_results(response["output"]))

    generations = [call for call in vllm_upstream.requests(model) if call["path"].endswith("completions")]
    assert [call["path"] for call in generations] == ["/v1/chat/completions", "/v1/completions"]
    assert all((call["body"]["temperature"], call["body"]["top_k"]) == (0.0, 3) for call in generations)


@pytest.mark.parametrize("closing_text", ["\n", " ."])
async def test_a_template_that_writes_a_token_before_its_end_marker_is_spliced_at_the_models_end_of_turn(
    tmp_path: Path, vllm_upstream: VllmUpstream, closing_text: str
) -> None:
    """The probe renderings then end with the template's own token, then <|im_end|>: the id that ends
    the model's turn is the one its generation ended with, not the first of that shared ending."""
    model = fresh_model("vllm")
    vllm_upstream.configure(model, closing_text=closing_text)
    model, first, second = await two_chat_turns(
        tmp_path, vllm_upstream, lambda reply: [QUESTION, reply, FOLLOW_UP], model=model
    )

    assert "token_continuity" not in second
    assert spliced_tail(vllm_upstream, model, first, second) == TAIL_AFTER_EOS
    rendered = vllm_upstream.detokenize(
        model, vllm_upstream.tokenize_messages(model, [QUESTION, {"role": "assistant", "content": "Hi"}])
    )
    assert f"Hi{closing_text}<|im_end|>" in rendered


async def test_a_generation_prompt_that_history_turns_do_not_show_keeps_every_prompt_exact(
    tmp_path: Path, vllm_upstream: VllmUpstream
) -> None:
    """Qwen3 without thinking opens each turn with an empty <think></think> block that the history
    rendering of that turn leaves out; the model did see it, so it stays in the spliced prompts."""
    model = fresh_model("vllm")
    steps = [{"tool_calls": [scripted_call("get_weather", {"city": city})]} for city in CITIES[:3]]
    vllm_upstream.script(model, [*steps, {"text": "Paris is the sunniest."}])
    history: list[dict[str, Any]] = [{"role": "user", "content": "Which city is sunniest?"}]
    no_thinking = {"chat_template_kwargs": orjson.dumps({"enable_thinking": False}).decode()}
    async with (
        training_server(tmp_path, vllm_upstream, model, uses_reasoning_parser=True) as vllm,
        rollout_session() as session,
    ):
        responses = []
        for _ in range(4):
            body = {"input": history, "tools": [WEATHER_TOOL], "metadata": no_thinking}
            status, response = await vllm.post("/v1/responses", body, session)
            assert status == 200, response
            responses.append(response)
            history.extend(response["output"])
            history.extend(tool_results(response["output"]))

    assert all("token_continuity" not in response for response in responses)
    fields = [token_fields(response) for response in responses]
    for (prompt, generated, _), (next_prompt, _, _) in zip(fields, fields[1:], strict=False):
        assert next_prompt[: len(prompt) + len(generated)] == prompt + generated
        assert vllm_upstream.detokenize(model, next_prompt).endswith(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )
    assert vllm_upstream.detokenize(model, fields[-1][0]).count("<think>\n\n</think>") == 4
    calls = [
        [item for item in response["output"] if item["type"] == "function_call"] for response in responses
    ]
    assert [len(made) for made in calls] == [1, 1, 1, 0]
