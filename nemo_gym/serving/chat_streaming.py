"""`POST /v1/chat/completions` with `stream: true`: the request made into the strict params, and a finished
completion written as `chat.completion.chunk` events ending with `data: [DONE]`.

Per choice: a role delta, then a reasoning delta (under the key the message used, `reasoning_content` or
`reasoning`), a refusal delta, a content delta (carrying the choice's `logprobs`) and a tool-call delta,
each only when the message has it, then a finish chunk with `finish_reason`. The finish chunk's delta
also carries the message's training token fields (`prompt_token_ids`, `generation_token_ids`,
`generation_log_probs`, `routed_experts`) when the message has them, so a trainer reading the stream
gets what it would read from the non-stream answer. With `stream_options.include_usage`, a last chunk
with `choices: []` carries the usage.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from nemo_gym.serving.model_streaming import sse_data, sse_event

DONE = b"data: [DONE]\n\n"
REASONING_KEYS = ("reasoning_content", "reasoning")
TRAINING_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


def sanitize_streaming_chat_body(body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The body without `stream` and `stream_options`, and whether the client asked for a usage chunk."""
    body = copy.deepcopy(body)
    body.pop("stream", None)
    options = body.pop("stream_options", None)
    return body, isinstance(options, dict) and bool(options.get("include_usage"))


def synthesize_chat_completion_sse(
    completion: dict[str, Any], include_usage: bool = False
) -> Iterator[bytes]:
    """The chunk sequence of a finished completion (a JSON object)."""
    shared = {
        "id": completion.get("id"),
        "object": "chat.completion.chunk",
        "created": completion.get("created"),
        "model": completion.get("model"),
    }
    if completion.get("system_fingerprint") is not None:
        shared["system_fingerprint"] = completion["system_fingerprint"]
    for position, choice in enumerate(completion.get("choices") or []):
        for delta in _choice_deltas(position, choice):
            yield sse_data({**shared, "choices": [delta]})
    if include_usage:
        yield sse_data({**shared, "choices": [], "usage": completion.get("usage")})
    yield DONE


def _choice_deltas(position: int, choice: dict[str, Any]) -> Iterator[dict[str, Any]]:
    index = choice.get("index", position)
    message = choice.get("message") or {}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"index": index, "delta": delta, **extra, "finish_reason": finish_reason}

    yield chunk({"role": message.get("role") or "assistant", "content": ""})
    for key in REASONING_KEYS:
        if message.get(key):
            yield chunk({key: message[key]})
    if message.get("refusal"):
        yield chunk({"refusal": message["refusal"]})
    if message.get("content"):
        yield chunk({"content": message["content"]}, logprobs=choice.get("logprobs"))
    if message.get("tool_calls"):
        yield chunk(
            {
                "tool_calls": [
                    _tool_call_delta(order, call) for order, call in enumerate(message["tool_calls"])
                ]
            }
        )
    training = {field: message[field] for field in TRAINING_FIELDS if message.get(field) is not None}
    yield chunk(training, choice.get("finish_reason") or "stop")


def _tool_call_delta(order: int, call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "index": order,
        "id": call.get("id"),
        "type": call.get("type") or "function",
        "function": {"name": function.get("name"), "arguments": function.get("arguments") or ""},
    }


def chat_error_event(status: int, message: str) -> bytes:
    """The error event of a stream whose completion failed after it had started (NeMo Gym's shape)."""
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return sse_event(
        "error", {"error": {"message": f"HTTP {status}: {message}", "type": kind, "code": status}}
    )
