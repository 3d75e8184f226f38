"""A LiteLLM proxy's `/responses` answer made into a valid Responses object. The proxy's known quirks:
`reasoning.effort: "none"` as a string, usage without its `*_tokens_details` (or in Chat Completions
names), reasoning items without `summary` or with `output_text` parts, and a call it downgraded to Chat
Completions answered with the `chat.completion` object itself. Everything else passes through untouched."""

from __future__ import annotations

import time
from typing import Any

from nemo_gym.http.upstream import bad_upstream_answer, validated_answer
from nemo_gym.openai_utils import NeMoGymChatCompletion, NeMoGymResponseCreateParamsNonStreaming
from responses_api_models.vllm_model import conversion

JSON = dict[str, Any]
CHAT_COMPLETION_OBJECT = "chat.completion"
# Responses usage name <- its Chat Completions name.
USAGE_RENAMES = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}
# Responses detail block <- (its Chat Completions block, the count in it, the names proxies give that count).
USAGE_DETAILS = {
    "input_tokens_details": (
        "prompt_tokens_details",
        "cached_tokens",
        ("cached_tokens", "cached_input_tokens", "cache_read_input_tokens"),
    ),
    "output_tokens_details": (
        "completion_tokens_details",
        "reasoning_tokens",
        ("reasoning_tokens", "reasoning_output_tokens"),
    ),
}


def _usage_detail(usage: JSON, chat_block: str, names: tuple[str, ...]) -> int:
    """The first count a proxy gave under any of `names`, in the Chat Completions block or at the top."""
    for source in (usage.get(chat_block), usage):
        if isinstance(source, dict):
            for name in names:
                if isinstance(source.get(name), int):
                    return source[name]
    return 0


def normalised_usage(usage: JSON) -> JSON:
    fixed = dict(usage)
    for name, chat_name in USAGE_RENAMES.items():
        if name not in fixed and chat_name in fixed:
            fixed[name] = fixed[chat_name]
    if "total_tokens" not in fixed:
        fixed["total_tokens"] = (fixed.get("input_tokens") or 0) + (fixed.get("output_tokens") or 0)
    for block, (chat_block, count, names) in USAGE_DETAILS.items():
        details = fixed.get(block)
        if not isinstance(details, dict):
            fixed[block] = {count: _usage_detail(usage, chat_block, names)}
        elif count not in details:
            fixed[block] = {**details, count: None}
    return fixed


def _normalised_item(item: Any) -> Any:
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return item
    fixed = {**item, "summary": item.get("summary") or []}
    if isinstance(item.get("content"), list):
        fixed["content"] = [
            {**part, "type": "reasoning_text"}
            if isinstance(part, dict) and part.get("type") == "output_text"
            else part
            for part in item["content"]
        ]
    return fixed


def normalised_response(
    answer: Any, request: NeMoGymResponseCreateParamsNonStreaming, served_model: str, base_url: str
) -> Any:
    """The proxy's answer as a Responses object (a non-object answer is left for validation to refuse)."""
    if not isinstance(answer, dict):
        return answer
    if answer.get("object") == CHAT_COMPLETION_OBJECT:
        return _from_chat_completion(answer, request, served_model, base_url)
    fixed = dict(answer)
    reasoning = fixed.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort") == "none":
        fixed["reasoning"] = {**reasoning, "effort": None}
    if isinstance(fixed.get("usage"), dict):
        fixed["usage"] = normalised_usage(fixed["usage"])
    if isinstance(fixed.get("output"), list):
        fixed["output"] = [_normalised_item(item) for item in fixed["output"]]
    return fixed


def _from_chat_completion(
    answer: JSON, request: NeMoGymResponseCreateParamsNonStreaming, served_model: str, base_url: str
) -> JSON:
    """A downgraded call's chat completion, converted as vllm_model converts one; the proxy's usage kept
    with its cache and reasoning counts."""
    completion = validated_answer(NeMoGymChatCompletion, answer, base_url, "chat completion")
    try:
        response = conversion.chat_completion_to_response(
            request, completion, served_model=served_model, uses_reasoning_parser=True, created_at=time.time()
        )
    except conversion.UpstreamReplyError as error:
        raise bad_upstream_answer(str(error)) from None
    if isinstance(answer.get("usage"), dict):
        response["usage"] = normalised_usage(answer["usage"])
    return response
