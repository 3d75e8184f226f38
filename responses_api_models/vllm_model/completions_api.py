"""`use_completions_api`: a conversation sent to vLLM's `/v1/completions` as plain text (NeMo Gym 0.7's key).

A base (pretrained) checkpoint has no chat template, so its prompt is the request's own text: one user
message, optionally after one system message, joined by a blank line, with no markup added. Anything a
template would have to render (tools, earlier turns, audio, images) is refused with a 400 naming it,
rather than flattened into a prompt the model was never trained on. The answer's text becomes the
assistant message of a chat completion, so both routes and the training fields work as on the chat path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nemo_gym.http.errors import GymError
from nemo_gym.http.upstream import Upstream, bad_upstream_answer, validated_answer
from nemo_gym.openai_utils import NeMoGymChatCompletion
from responses_api_models.vllm_model import audio, conversion, tokens
from responses_api_models.vllm_model.client import VLLMClient, call_upstream
from responses_api_models.vllm_model.training import TrainingTurn, empty_completion, token_data_required

# What a system message and the user message are joined with (0.7 does the same).
MESSAGE_SEPARATOR = "\n\n"
TEXT_PART_TYPES = ("text", "input_text")
# Chat-only fields of the chat payload, which `/v1/completions` does not take (the prompt replaces them).
CHAT_ONLY_KEYS = frozenset(
    {
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "chat_template_kwargs",
        "continue_final_message",
        "add_generation_prompt",
        "reasoning_effort",
        "metadata",
        "store",
        "service_tier",
        "logprobs",
        "top_logprobs",
        "max_completion_tokens",
        "stream",
        "stream_options",
    }
)


def refused(field: str, reason: str) -> GymError:
    return GymError(400, "invalid_request", f"{field}: {reason} with use_completions_api (/v1/completions)")


def _part_text(part: Any, field: str) -> str:
    if isinstance(part, Mapping) and part.get("type") in TEXT_PART_TYPES:
        return str(part.get("text", ""))
    kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
    raise refused(field, f"content part type {kind!r} is not text; only text goes")


def _message_text(message: Mapping[str, Any], field: str) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_part_text(part, field) for part in content)
    raise refused(field, f"a {message.get('role')} message without text content cannot be a prompt")


def prompt_of(payload: Mapping[str, Any], field: str) -> str:
    """The prompt text of a chat payload: [user] or [system, user], texts joined by a blank line. `field`
    is what the caller calls the conversation (`input` on /v1/responses, `messages` on the chat route)."""
    if payload.get("tools"):
        raise refused("tools", "a raw prompt has no place for tool definitions")
    messages = payload.get("messages") or []
    roles = [message.get("role") for message in messages]
    if roles not in (["user"], ["system", "user"]):
        raise refused(
            field,
            f"the conversation must be one user message, optionally after one system message (got {roles})",
        )
    return MESSAGE_SEPARATOR.join(_message_text(message, field) for message in messages)


def refuse_audio(chat_body: Mapping[str, Any]) -> None:
    key = audio.audio_key_in(chat_body)
    if key is not None:
        raise refused(f"metadata.{key}", "audio is not supported; the prompt is text only")


def completion_body(payload: Mapping[str, Any], prompt: str, training: bool) -> dict[str, Any]:
    """The `/v1/completions` body of a chat payload that already has the server's defaults (served
    model, extra_body, sampling overrides): its sampling fields, the prompt, and the log-prob request."""
    body = {key: value for key, value in payload.items() if key not in CHAT_ONLY_KEYS}
    body["prompt"] = prompt
    if "max_tokens" not in body and payload.get("max_completion_tokens") is not None:
        body["max_tokens"] = payload["max_completion_tokens"]
    if payload.get("top_logprobs") is not None:
        body["logprobs"] = payload["top_logprobs"]  # an int here: how many alternatives per token
    elif payload.get("logprobs") is True:
        body["logprobs"] = 0
    if training:
        body.setdefault("logprobs", 0)
        body.update(return_tokens_as_token_ids=True, return_token_ids=True)
    return body


def answer_as_chat(answer: Any, base_url: str) -> tuple[NeMoGymChatCompletion, dict[str, Any]]:
    """The completion's text as a chat completion's assistant message (any `<think>` block stays in the
    text, as the model wrote it; the Responses conversion splits it off with `uses_reasoning_parser`),
    and the first choice, which holds the token data."""
    if (
        not isinstance(answer, dict)
        or not answer.get("choices")
        or not isinstance(answer["choices"][0], dict)
    ):
        raise bad_upstream_answer(f"upstream {base_url} sent a completion without choices")
    choice = answer["choices"][0]
    message = {"role": "assistant", "content": str(choice.get("text") or ""), "tool_calls": []}
    chat = conversion.completion_to_chat_completion(answer, message)
    return validated_answer(NeMoGymChatCompletion, chat, base_url, "chat completion"), choice


def generation_of(choice: dict[str, Any]) -> tuple[list[int], list[float]]:
    """Generated ids and log-probs; vLLM's inline `token_ids`, when sent, must be the same ids."""
    generated, log_probs = tokens.completion_generation(choice.get("logprobs"))
    inline = choice.get("token_ids")
    if inline is not None and inline != generated:
        raise tokens.MissingTokenData("the completion's token_ids disagree with its log-prob tokens")
    return generated, log_probs


async def completions_turn(
    upstream: Upstream,
    client: VLLMClient,
    payload: dict[str, Any],
    field: str,
    training: bool,
    propagate_context_overflow_errors: bool,
) -> TrainingTurn:
    """One generation through `/v1/completions`. In training mode the turn carries the prompt ids (the
    choice's `prompt_token_ids`, else `/tokenize` of the prompt), generated ids and log-probs."""
    prompt = prompt_of(payload, field)
    body = completion_body(payload, prompt, training)
    answer = await call_upstream(upstream, client.create_completion, body, propagate_context_overflow_errors)
    if answer is None:
        return TrainingTurn(empty_completion(payload["model"], "length"), [], [], [])
    completion, choice = answer_as_chat(answer, client.base_url)
    if not training:
        return TrainingTurn(completion, [], [], [])
    with token_data_required(client):
        generated, log_probs = generation_of(choice)
    prompt_ids = choice.get("prompt_token_ids")
    if prompt_ids is None:
        async with upstream.call():
            tokenized = await client.create_tokenize(model=payload["model"], prompt=prompt)
        prompt_ids = tokenized.get("tokens") if isinstance(tokenized, dict) else None
    if not isinstance(prompt_ids, list) or not all(isinstance(token, int) for token in prompt_ids):
        raise bad_upstream_answer(f"upstream {client.base_url} gave no prompt token ids (training mode)")
    return TrainingTurn(completion, prompt_ids, generated, log_probs)
