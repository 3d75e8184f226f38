"""nemo_gym.wire.chat_completions: a completion keeps an assistant message's token data (the training
variant) and vLLM's extras; the request params keep an assistant turn's token data, drop unknown keys, pass
content parts they do not type on, and refuse what cannot be served."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from nemo_gym.wire.chat_completions import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymChatCompletionMessage,
    NeMoGymChatCompletionMessageForTraining,
    NeMoGymChoice,
)

TOKENS = {
    "prompt_token_ids": [1, 2, 3],
    "generation_token_ids": [4, 5],
    "generation_log_probs": [-0.5, -0.25],
}


def dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_unset=True)


def chat_completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": {"content": [{"token": "token_id:4", "logprob": -0.5, "top_logprobs": []}]},
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def test_chat_completion_with_training_message() -> None:
    tool_call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": "hi", "tool_calls": [tool_call], **TOKENS}
    completion = NeMoGymChatCompletion.model_validate(chat_completion(message))
    parsed = completion.choices[0].message
    assert type(parsed) is NeMoGymChatCompletionMessageForTraining
    assert parsed.generation_token_ids == TOKENS["generation_token_ids"]
    assert parsed.tool_calls[0].function.name == "f"
    assert completion.choices[0].logprobs.content[0].logprob == -0.5
    assert dump(completion) == chat_completion(message)

    plain = {"role": "assistant", "content": "hi", "reasoning_content": "because"}
    completion = NeMoGymChatCompletion.model_validate(chat_completion(plain))
    assert type(completion.choices[0].message) is NeMoGymChatCompletionMessage
    assert dump(completion) == chat_completion(plain)


def test_chat_create_params_keep_assistant_token_fields_and_ignore_unknown_keys() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "u"}}],
        },
        {"role": "assistant", "content": "hello", **TOKENS},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": "ok"},
    ]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = {"messages": messages, "tools": tools, "max_tokens": 5, "top_k": 20}
    params = NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(body)
    assert dump(params) == {"messages": messages, "tools": tools, "max_tokens": 5}
    assert params.parallel_tool_calls is True
    with pytest.raises(ValidationError, match="role"):
        NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(
            {"messages": [{"role": "robot", "content": ""}]}
        )


def test_a_completions_identifying_constants_are_dumped_even_when_defaulted() -> None:
    message = NeMoGymChatCompletionMessage(content="hi")
    completion = NeMoGymChatCompletion(
        id="c", choices=[NeMoGymChoice(index=0, message=message)], created=1, model="m"
    )
    dumped = dump(completion)
    assert (dumped["object"], dumped["choices"][0]["message"]) == (
        "chat.completion",
        {"content": "hi", "role": "assistant"},
    )
    assert (
        type(NeMoGymChatCompletion.model_validate(dumped).choices[0].message) is NeMoGymChatCompletionMessage
    )


def test_text_and_image_parts_are_checked_and_other_parts_pass_through() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    params = NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(
        {"messages": [{"role": "user", "content": [audio], "weight": 2}]}
    )
    assert dump(params) == {"messages": [{"role": "user", "content": [audio]}]}
    with pytest.raises(ValidationError, match="image_url.url"):
        NeMoGymChatCompletionCreateParamsNonStreaming.model_validate(
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}
        )


def test_streaming_partial_token_data_and_a_missing_role_are_refused() -> None:
    create = NeMoGymChatCompletionCreateParamsNonStreaming.model_validate
    with pytest.raises(ValidationError, match="stream"):
        create({"messages": [], "stream": True})
    with pytest.raises(ValidationError, match="generation_token_ids"):
        create({"messages": [{"role": "assistant", "content": "a", "prompt_token_ids": [1]}]})
    with pytest.raises(ValidationError, match="A chat message needs a 'role' of 'developer', 'system'"):
        create({"messages": [{"content": "x"}]})
