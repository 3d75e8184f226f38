"""The vLLM-compatible test upstream: vLLM's wire shapes, scripted text, real (drifting) BPE token ids."""

import json
import re
from collections.abc import AsyncIterator

import aiohttp
import httpx
import openai
import pytest
from openai import AsyncOpenAI

from tests.upstream_script import ScriptedUpstreamError
from tests.vllm_script import VllmUpstream, fresh_model, scripted_call
from tests.vllm_upstream import TextTokenizer, build_tokenizer

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# What vllm_model sends on the training path (catalog §4.1).
TRAINING = {"logprobs": True, "top_logprobs": 0, "extra_body": {"return_tokens_as_token_ids": True}}
USER = {"role": "user", "content": "What is the weather in Paris?"}
EOS = "<|im_end|>"


@pytest.fixture
async def client(vllm_upstream: VllmUpstream) -> AsyncIterator[AsyncOpenAI]:
    """The official client; no proxies from the environment, no retries hiding a status."""
    async with httpx.AsyncClient(trust_env=False) as http:
        yield AsyncOpenAI(base_url=vllm_upstream.base_url, api_key="sk-test", http_client=http, max_retries=0)


async def post(upstream: VllmUpstream, path: str, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.post(upstream.url + path, json=body) as answer:
        return answer.status, await answer.json()


def token_ids(entries) -> list[int]:
    """Generation ids from logprob entries, parsed the way vllm_model does ("token_id:<n>")."""
    ids = []
    for entry in entries:
        match = re.fullmatch(r"token_id:(\d+)", entry.token)
        assert match, entry.token
        ids.append(int(match.group(1)))
    return ids


def eos_id(upstream: VllmUpstream) -> int:
    return upstream.tokenizer_info()["eos_token_id"]


async def test_openai_client_parses_a_tool_call_turn_with_token_id_logprobs(vllm_upstream, client):
    model = fresh_model("vllm")
    call = scripted_call("get_weather", {"city": "Paris"}, call_id="call_paris")
    vllm_upstream.script(
        model, [{"text": "Let me check.", "reasoning": "I need the tool.", "tool_calls": [call]}]
    )

    completion = await client.chat.completions.create(
        model=model, messages=[USER], tools=[WEATHER_TOOL], **TRAINING
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    # As vLLM's qwen3 and hermes parsers return them: the template's newlines stay.
    assert choice.message.content == "\n\nLet me check.\n"
    assert choice.message.model_extra["reasoning_content"] == "\nI need the tool.\n"
    [tool_call] = choice.message.tool_calls
    assert (tool_call.id, tool_call.type, tool_call.function.name) == (
        "call_paris",
        "function",
        "get_weather",
    )
    assert json.loads(tool_call.function.arguments) == {"city": "Paris"}
    entries = choice.logprobs.content
    assert len(entries) == completion.usage.completion_tokens
    assert all(entry.logprob < 0 and entry.top_logprobs == [] and entry.bytes for entry in entries)
    assert token_ids(entries)[-1] == eos_id(vllm_upstream)


async def test_generated_ids_decode_to_the_scripted_turn_then_eos(vllm_upstream, client):
    model = fresh_model("vllm")
    call = scripted_call("get_weather", {"city": "Paris"})
    vllm_upstream.script(
        model, [{"reasoning": "Use the tool.", "tool_calls": [call]}, {"text": "It is sunny."}]
    )

    first = await client.chat.completions.create(
        model=model, messages=[USER], tools=[WEATHER_TOOL], **TRAINING
    )
    second = await client.chat.completions.create(model=model, messages=[USER], **TRAINING)

    assert vllm_upstream.detokenize(model, token_ids(first.choices[0].logprobs.content)) == (
        '<think>\nUse the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
        f"\n</tool_call>{EOS}"
    )
    assert first.choices[0].message.content == "\n\n"
    assert (
        vllm_upstream.detokenize(model, token_ids(second.choices[0].logprobs.content)) == f"It is sunny.{EOS}"
    )
    assert (second.choices[0].message.content, second.choices[0].finish_reason) == ("It is sunny.", "stop")


async def test_tokenize_of_the_messages_is_the_prompt_the_completion_counted(vllm_upstream, client):
    model = fresh_model("vllm")
    messages = [{"role": "system", "content": "Be brief."}, USER]
    no_thinking = {"enable_thinking": False}

    completion = await client.chat.completions.create(
        model=model,
        messages=messages,
        tools=[WEATHER_TOOL],
        logprobs=True,
        top_logprobs=0,
        extra_body={
            "return_tokens_as_token_ids": True,
            "chat_template_kwargs": no_thinking,
            "return_token_ids": True,
        },
    )
    status, tokenized = await post(
        vllm_upstream,
        "/tokenize",
        {"model": model, "messages": messages, "tools": [WEATHER_TOOL], "chat_template_kwargs": no_thinking},
    )

    assert status == 200 and tokenized["count"] == len(tokenized["tokens"]) == completion.usage.prompt_tokens
    assert tokenized["max_model_len"] == 32768
    assert completion.model_extra["prompt_token_ids"] == tokenized["tokens"]
    assert vllm_upstream.requests(model)[0]["prompt_token_ids"] == tokenized["tokens"]
    assert vllm_upstream.detokenize(model, tokenized["tokens"]).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert completion.choices[0].model_extra["token_ids"] == token_ids(completion.choices[0].logprobs.content)


async def test_completions_continue_from_token_ids_and_record_them_exactly(vllm_upstream, client):
    """Token-in/token-out: the second prompt is prompt + generated ids + new turn, never re-tokenised."""
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Sunny in Paris.", "noncanonical": True}, {"text": "Rainy."}])
    first_prompt = vllm_upstream.tokenize_messages(model, [USER])
    first = await client.completions.create(
        model=model,
        prompt=first_prompt,
        max_tokens=64,
        logprobs=0,
        extra_body={"return_tokens_as_token_ids": True},
    )
    generated = [int(token.removeprefix("token_id:")) for token in first.choices[0].logprobs.tokens]
    next_turn = vllm_upstream.tokenize(
        model, "\n<|im_start|>user\nAnd London?<|im_end|>\n<|im_start|>assistant\n"
    )
    second_prompt = first_prompt + generated + next_turn

    second = await client.completions.create(
        model=model,
        prompt=second_prompt,
        max_tokens=64,
        logprobs=0,
        extra_body={"return_tokens_as_token_ids": True},
    )

    assert first.choices[0].text == "Sunny in Paris." and second.choices[0].text == "Rainy."
    assert generated[-1] == eos_id(vllm_upstream) and first.choices[0].finish_reason == "stop"
    logprobs = second.choices[0].logprobs
    assert all(token.startswith("token_id:") for token in logprobs.tokens)
    assert len(logprobs.token_logprobs) == len(logprobs.tokens) == second.usage.completion_tokens
    assert [
        r["prompt_token_ids"] for r in vllm_upstream.requests(model) if r["path"] == "/v1/completions"
    ] == [
        first_prompt,
        second_prompt,
    ]
    assert second.usage.prompt_tokens == len(second_prompt)
    # Re-tokenising the same text would not have given these ids back: the first turn was non-canonical.
    assert vllm_upstream.tokenize(model, vllm_upstream.detokenize(model, second_prompt)) != second_prompt


async def test_completions_string_prompt_stops_at_vllms_default_16_tokens(vllm_upstream, client):
    model = fresh_model("vllm")
    vllm_upstream.script(
        model,
        [{"text": "The weather in Paris is sunny today, the weather in London is rainy and Berlin is cold."}],
    )

    completion = await client.completions.create(model=model, prompt="Tell me the weather.")

    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 16
    assert completion.usage.prompt_tokens == len(vllm_upstream.tokenize(model, "Tell me the weather."))
    assert completion.choices[0].text.startswith("The weather in Paris")


async def test_bpe_merges_make_tokenisation_context_dependent(vllm_upstream):
    model = fresh_model("vllm")
    whole = vllm_upstream.tokenize(model, "weather")
    pieces = vllm_upstream.tokenize(model, "wea") + vllm_upstream.tokenize(model, "ther")

    assert whole != pieces and len(whole) < len(pieces)
    assert vllm_upstream.detokenize(model, whole) == vllm_upstream.detokenize(model, pieces) == "weather"


async def test_tokenizer_is_identical_in_every_process(vllm_upstream):
    text = "The weather in Paris: 25 degrees, sunny. Ça va? 日本 <think>x</think><|im_end|>"
    local = TextTokenizer(build_tokenizer())

    assert local.encode(text) == vllm_upstream.tokenize(fresh_model("vllm"), text)
    assert local.vocab_size == vllm_upstream.tokenizer_info()["vocab_size"]


async def test_chat_template_renders_a_tool_conversation_qwen_style(vllm_upstream):
    model = fresh_model("vllm")
    messages = [
        {"role": "system", "content": "Be brief."},
        USER,
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Use the tool.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]

    rendered = vllm_upstream.detokenize(
        model, vllm_upstream.tokenize_messages(model, messages, [WEATHER_TOOL])
    )

    tool_line = json.dumps(WEATHER_TOOL)
    assert rendered == (
        "<|im_start|>system\nBe brief.\n\n# Tools\n\nFunctions you can call, one JSON signature per line:\n"
        f"<tools>\n{tool_line}\n</tools>\n\nTo call a function, answer with <tool_call>\n"
        '{"name": <name>, "arguments": <JSON object>}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nUse the tool.\n</think>\n\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )


async def two_turns(upstream: VllmUpstream, client: AsyncOpenAI, model: str, step: dict, with_ids: bool):
    """Turn 1 generates `step`; turn 2 re-sends it as history (optionally with its token ids) after a
    new user message. Returns (turn-1 prompt + generated ids, turn-2 prompt ids the engine was given)."""
    upstream.script(model, [step, {"text": "Rainy."}])
    first = await client.chat.completions.create(model=model, messages=[USER], **TRAINING)
    prompt_ids = upstream.requests(model)[-1]["prompt_token_ids"]
    generated = token_ids(first.choices[0].logprobs.content)
    message = first.choices[0].message
    assistant = {"role": "assistant", "content": message.content, **message.model_extra}
    if with_ids:
        assistant |= {"prompt_token_ids": prompt_ids, "generation_token_ids": generated}
    await client.chat.completions.create(
        model=model, messages=[USER, assistant, {"role": "user", "content": "And London?"}], **TRAINING
    )
    return prompt_ids + generated, upstream.requests(model)[-1]["prompt_token_ids"]


@pytest.mark.parametrize(
    ("step", "drifts"),
    [
        ({"text": "Sunny in Paris."}, False),  # canonical ids, nothing dropped: re-rendering is faithful
        ({"text": "Sunny in Paris.", "noncanonical": True}, True),  # same text, ids BPE would not choose
        ({"text": "Sunny.", "reasoning": "Check the weather."}, True),  # the template drops old reasoning
    ],
)
async def test_re_rendered_history_drifts_from_the_generated_ids(vllm_upstream, client, step, drifts):
    model = fresh_model("vllm")

    sampled, second_prompt = await two_turns(vllm_upstream, client, model, step, with_ids=False)

    assert (second_prompt[: len(sampled)] != sampled) is drifts


@pytest.mark.parametrize(
    "step", [{"text": "Sunny.", "noncanonical": True}, {"text": "Sunny.", "reasoning": "Hmm."}]
)
async def test_stitch_token_prefix_keeps_the_sampled_ids(vllm_upstream, client, step):
    model = fresh_model("vllm")
    vllm_upstream.configure(model, stitch_token_prefix=True)

    sampled, second_prompt = await two_turns(vllm_upstream, client, model, step, with_ids=True)

    assert second_prompt[: len(sampled)] == sampled
    tail = vllm_upstream.detokenize(model, second_prompt[len(sampled) :])
    assert tail == "\n<|im_start|>user\nAnd London?<|im_end|>\n<|im_start|>assistant\n"


async def test_context_length_errors_use_vllms_wording_and_keep_the_step(vllm_upstream, client):
    model = fresh_model("vllm")
    assert vllm_upstream.configure(model, max_model_len=30)["max_model_len"] == 30
    vllm_upstream.script(model, [{"text": "Fits."}])
    long_user = {"role": "user", "content": "weather " * 40}

    with pytest.raises(openai.BadRequestError) as too_long:
        await client.chat.completions.create(model=model, messages=[long_user])
    with pytest.raises(openai.BadRequestError) as with_budget:
        await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=50
        )
    status, completions_error = await post(
        vllm_upstream, "/v1/completions", {"model": model, "prompt": [1] * 31}
    )
    served = await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])

    prompt_tokens = len(vllm_upstream.tokenize_messages(model, [long_user]))
    assert too_long.value.status_code == 400
    assert too_long.value.body["message"] == (
        f"This model's maximum context length is 30 tokens. However, you requested {prompt_tokens} tokens "
        "in the messages, Please reduce the length of the messages."
    )
    hi_tokens = len(vllm_upstream.tokenize_messages(model, [{"role": "user", "content": "Hi"}]))
    assert with_budget.value.body["message"] == (
        f"This model's maximum context length is 30 tokens. However, you requested {hi_tokens + 50} tokens "
        f"({hi_tokens} in the messages, 50 in the completion). Please reduce the length of the messages or completion."
    )
    assert status == 400 and "maximum context length is 30 tokens" in completions_error["error"]["message"]
    assert served.choices[0].message.content == "Fits."


async def test_max_tokens_truncates_the_turn_and_reports_length(vllm_upstream, client):
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "The weather in Paris is sunny today."}])

    completion = await client.chat.completions.create(model=model, messages=[USER], max_tokens=3, **TRAINING)

    ids = token_ids(completion.choices[0].logprobs.content)
    assert completion.choices[0].finish_reason == "length" and len(ids) == 3
    assert eos_id(vllm_upstream) not in ids
    assert completion.choices[0].message.content == vllm_upstream.detokenize(model, ids)


async def test_the_same_request_twice_gives_the_same_tokens_and_logprobs(vllm_upstream, client):
    model = fresh_model("vllm")
    vllm_upstream.script(model, [{"text": "Sunny.", "reasoning": "Think.", "repeat": 2}])

    runs = [await client.chat.completions.create(model=model, messages=[USER], **TRAINING) for _ in range(2)]

    first, second = ([(e.token, e.logprob) for e in run.choices[0].logprobs.content] for run in runs)
    assert first == second
    assert len({logprob for _, logprob in first}) > 1  # not one constant


async def test_reasoning_parser_off_and_a_malformed_call_stay_in_the_content(vllm_upstream, client):
    model = fresh_model("vllm")
    vllm_upstream.configure(model, reasoning_parser=False)
    broken = scripted_call("get_weather", '{"city": "Par')
    vllm_upstream.script(
        model, [{"text": "Sunny.", "reasoning": "Hmm."}, {"text": "Calling.", "tool_calls": [broken]}]
    )

    thought = await client.chat.completions.create(model=model, messages=[USER])
    malformed = await client.chat.completions.create(model=model, messages=[USER], tools=[WEATHER_TOOL])

    assert thought.choices[0].message.content == "<think>\nHmm.\n</think>\n\nSunny."
    assert thought.choices[0].message.model_extra["reasoning_content"] is None
    assert malformed.choices[0].message.tool_calls == []
    assert malformed.choices[0].finish_reason == "stop"
    assert (
        malformed.choices[0].message.content
        == 'Calling.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par}\n</tool_call>'
    )


async def test_default_turn_scripted_errors_and_the_control_api(vllm_upstream, client):
    model = fresh_model("vllm")
    vllm_upstream.script(
        model, [{"status": 503, "retry_after": 1}, {"status": 500, "body": {"detail": "boom"}}]
    )

    with pytest.raises(openai.APIStatusError) as unavailable:
        await client.chat.completions.create(model=model, messages=[USER])
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model=model, messages=[USER])
    default = await client.chat.completions.create(model=model, messages=[USER])

    assert unavailable.value.status_code == 503 and unavailable.value.response.headers["Retry-After"] == "1"
    assert failed.value.body == {"detail": "boom"}
    assert default.choices[0].message.content == "ok"
    assert model in [entry.id async for entry in client.models.list()]
    with pytest.raises(ScriptedUpstreamError, match="unknown step keys"):
        vllm_upstream.script(model, [{"txt": "typo"}])
    with pytest.raises(ScriptedUpstreamError, match="error step takes no turn keys"):
        vllm_upstream.script(model, [{"status": 500, "text": "both"}])
    status, error = await post(vllm_upstream, "/detokenize", {"model": model, "tokens": [10**6]})
    assert status == 400 and "out of vocabulary" in error["error"]["message"]
