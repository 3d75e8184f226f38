"""Anthropic Messages <-> Responses, so that every model server answers `POST /v1/messages` (the `claude`
CLI, the `anthropic` client) with its own `responses()`.

Request: `system` -> `instructions`; each message's blocks -> Responses items in order (text and images
of a turn -> one message; `tool_use` -> `function_call`; `tool_result` -> `function_call_output`, its
images following as a user message; `thinking` -> `reasoning` with the signature as
`encrypted_content`; `redacted_thinking` -> `reasoning` with only `encrypted_content`); client tools ->
function tools; `tool_choice` auto/any/tool/none -> auto/required/that function/none;
`disable_parallel_tool_use` -> `parallel_tool_calls: false`; `max_tokens` -> `max_output_tokens`;
`thinking` -> `reasoning` (a summary asked for; the budget picks the effort); `metadata.user_id` ->
`user`. `top_k` and `stop_sequences` have no Responses counterpart and are not applied.

Response: `reasoning` -> `thinking` (summaries joined, `encrypted_content` as the signature) or
`redacted_thinking` (no summary); message text and refusals -> `text`; `function_call` -> `tool_use`
(its arguments parsed; arguments that are not a JSON object are passed as `{"arguments": <text>}`);
`stop_reason` from the incomplete reason (`max_tokens`, `refusal`) or the presence of a tool call.
Streams are the Messages event sequence of the finished message. A training-mode model server's token
fields (`prompt_token_ids`, `generation_token_ids`, `generation_log_probs`, from the turn's last output item
that has them) go on the message as top-level keys, and in a stream on its `message_delta` event, so a
relay in front of a CLI can keep them; Anthropic clients ignore the extra keys.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from typing import Any

import orjson

from nemo_gym.serving.model_streaming import sse_event
from nemo_gym.serving.token_capture import TOKEN_FIELDS
from nemo_gym.wire.anthropic import (
    SUPPORTED_ANTHROPIC_IMAGE_MEDIA_TYPES,
    AnthropicBase64Source,
    AnthropicCountTokensRequest,
    AnthropicImageBlock,
    AnthropicMessageParam,
    AnthropicMessagesRequest,
    AnthropicRedactedThinkingBlock,
    AnthropicTextBlock,
    AnthropicThinkingBlock,
    AnthropicThinkingConfig,
    AnthropicToolChoice,
    AnthropicToolResultBlock,
    AnthropicToolUseBlock,
)
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

__all__ = ["SUPPORTED_ANTHROPIC_IMAGE_MEDIA_TYPES", "AnthropicConverter", "anthropic_error_body"]

# Thinking budgets (tokens) up to which a Responses reasoning effort is asked; above the last, "high".
EFFORT_BUDGETS = ((2048, "low"), (8192, "medium"))
# A rough count for `count_tokens`: about four characters of JSON per token.
CHARS_PER_TOKEN = 4
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, message: str, server: str) -> dict[str, Any]:
    """Anthropic's error shape; the inner object also has Gym's `status` and `server`."""
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": message, "status": status, "server": server}}


class AnthropicConverter:
    """Stateless; NeMo Gym's name and methods."""

    # ---- request -------------------------------------------------------------------------------------

    def anthropic_request_to_responses(
        self, request: AnthropicMessagesRequest | dict[str, Any]
    ) -> NeMoGymResponseCreateParamsNonStreaming:
        """The Responses params of a Messages request; a dict is validated first (a `ValidationError`
        names what is wrong)."""
        if not isinstance(request, AnthropicMessagesRequest):
            request = AnthropicMessagesRequest.model_validate(request)
        params: dict[str, Any] = {
            "model": request.model,
            "input": self._input_items(request.messages),
            "max_output_tokens": request.max_tokens,
        }
        instructions = _system_text(request.system)
        if instructions:
            params["instructions"] = instructions
        for key in ("temperature", "top_p"):
            if getattr(request, key) is not None:
                params[key] = getattr(request, key)
        tools = [_function_tool(tool) for tool in request.tools or [] if tool.type in (None, "custom")]
        if tools:
            params["tools"] = tools
        if request.tool_choice is not None:
            params["tool_choice"] = _tool_choice(request.tool_choice)
            if request.tool_choice.disable_parallel_tool_use:
                params["parallel_tool_calls"] = False
        reasoning = _reasoning(request.thinking)
        if reasoning is not None:
            params["reasoning"] = reasoning
        if request.metadata is not None and request.metadata.user_id:
            params["user"] = request.metadata.user_id
        return NeMoGymResponseCreateParamsNonStreaming.model_validate(params)

    def _input_items(self, messages: list[AnthropicMessageParam]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message.content, str):
                items.append({"type": "message", "role": message.role, "content": message.content})
                continue
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, AnthropicTextBlock | AnthropicImageBlock):
                    parts.append(_part(block, message.role))
                    continue
                items.extend(_message(message.role, parts))
                parts = []
                items.extend(_block_items(block))
            items.extend(_message(message.role, parts))
        return items

    def count_tokens(self, request: AnthropicCountTokensRequest) -> dict[str, int]:
        """An estimate (characters / 4 of the request's JSON): no tokenizer of the served model is at hand."""
        text = orjson.dumps(request.model_dump(mode="json", exclude_none=True, exclude={"model"}))
        return {"input_tokens": math.ceil(len(text) / CHARS_PER_TOKEN)}

    # ---- response ------------------------------------------------------------------------------------

    def responses_to_anthropic_response(
        self, response: NeMoGymResponse | dict[str, Any], model: str
    ) -> dict[str, Any]:
        """The Messages answer of a finished Responses answer."""
        if isinstance(response, NeMoGymResponse):
            response = response.model_dump(mode="json", by_alias=True)
        content: list[dict[str, Any]] = []
        for item in response.get("output") or []:
            content.extend(_content_blocks(item))
        usage = response.get("usage") or {}
        return {
            **_training_tokens(response),
            "id": f"msg_{response.get('id') or ''}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": _stop_reason(response, content),
            "stop_sequence": None,
            "usage": {
                "input_tokens": usage.get("input_tokens", 0),
                "output_tokens": usage.get("output_tokens", 0),
            },
        }

    def anthropic_response_to_sse(self, message: dict[str, Any]) -> Iterator[bytes]:
        """The Messages event sequence of a finished message."""
        tokens = {name: message[name] for name in TOKEN_FIELDS if name in message}
        shell = {key: value for key, value in message.items() if key not in tokens}
        shell |= {"content": [], "stop_reason": None, "stop_sequence": None}
        shell["usage"] = {**message["usage"], "output_tokens": 0}
        yield sse_event("message_start", {"type": "message_start", "message": shell})
        yield sse_event("ping", {"type": "ping"})
        for index, block in enumerate(message["content"]):
            yield sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": _empty(block)},
            )
            for delta in _deltas(block):
                yield sse_event(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                )
            yield sse_event("content_block_stop", {"type": "content_block_stop", "index": index})
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]}
        usage = {"output_tokens": message["usage"]["output_tokens"]}
        # The turn's training tokens ride on the event that ends the generation (clients ignore the keys).
        yield sse_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage, **tokens})
        yield sse_event("message_stop", {"type": "message_stop"})

    def error_event(self, error_body: dict[str, Any]) -> bytes:
        """The event ending a stream whose answer failed after the stream had started."""
        return sse_event("error", error_body)


# ---- request helpers ---------------------------------------------------------------------------------


def _training_tokens(response: dict[str, Any]) -> dict[str, Any]:
    """The token fields of the turn (on its last output item that has them, as a training-mode model
    server puts them), to go on the Messages answer as they go on the Responses one; none when absent."""
    for item in reversed(response.get("output") or []):
        if isinstance(item, dict) and item.get("generation_token_ids") is not None:
            return {name: item.get(name) for name in TOKEN_FIELDS}
    return {}


def _system_text(system: str | list[AnthropicTextBlock] | None) -> str:
    if isinstance(system, list):
        return "\n\n".join(block.text for block in system if block.text)
    return system or ""


def _part(block: AnthropicTextBlock | AnthropicImageBlock, role: str) -> dict[str, Any]:
    if isinstance(block, AnthropicTextBlock):
        return {"type": "output_text" if role == "assistant" else "input_text", "text": block.text}
    source = block.source
    url = (
        f"data:{source.media_type};base64,{source.data}"
        if isinstance(source, AnthropicBase64Source)
        else source.url
    )
    return {"type": "input_image", "image_url": url, "detail": "auto"}


def _message(role: str, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The message item of a turn's consecutive text and image blocks (none for no blocks). Assistant
    text goes as plain text, the form a Responses input takes for an earlier assistant turn."""
    if not parts:
        return []
    if role == "assistant":
        return [
            {
                "type": "message",
                "role": "assistant",
                "content": "".join(part.get("text", "") for part in parts),
            }
        ]
    return [{"type": "message", "role": role, "content": parts}]


def _block_items(
    block: AnthropicToolUseBlock
    | AnthropicToolResultBlock
    | AnthropicThinkingBlock
    | AnthropicRedactedThinkingBlock,
) -> list[dict[str, Any]]:
    if isinstance(block, AnthropicToolUseBlock):
        arguments = orjson.dumps(block.input).decode()
        return [{"type": "function_call", "call_id": block.id, "name": block.name, "arguments": arguments}]
    if isinstance(block, AnthropicToolResultBlock):
        return _tool_result_items(block)
    if isinstance(block, AnthropicThinkingBlock):
        summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
        return [
            {
                "type": "reasoning",
                "id": _reasoning_id(block.thinking),
                "summary": summary,
                "encrypted_content": block.signature or None,
            }
        ]
    return [
        {"type": "reasoning", "id": _reasoning_id(block.data), "summary": [], "encrypted_content": block.data}
    ]


def _tool_result_items(block: AnthropicToolResultBlock) -> list[dict[str, Any]]:
    content = block.content
    blocks = [AnthropicTextBlock(type="text", text=content)] if isinstance(content, str) else content
    text = "\n".join(part.text for part in blocks if isinstance(part, AnthropicTextBlock))
    if block.is_error:
        text = f"Error: {text}" if text else "Error"
    output = [{"type": "function_call_output", "call_id": block.tool_use_id, "output": text}]
    images = [_part(part, "user") for part in blocks if isinstance(part, AnthropicImageBlock)]
    return output + _message("user", images)


def _reasoning_id(text: str) -> str:
    """A stable id for a thinking block (Responses reasoning items need one; Anthropic's have none)."""
    return "rs_" + hashlib.sha256(text.encode()).hexdigest()[:24]


def _function_tool(tool: Any) -> dict[str, Any]:
    function = {
        "type": "function",
        "name": tool.name,
        "parameters": tool.input_schema or {"type": "object", "properties": {}},
    }
    if tool.description:
        function["description"] = tool.description
    return function


def _tool_choice(choice: AnthropicToolChoice) -> Any:
    if choice.type == "tool":
        return {"type": "function", "name": choice.name or ""}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def _reasoning(thinking: AnthropicThinkingConfig | None) -> dict[str, Any] | None:
    if thinking is None or thinking.type == "disabled":
        return None
    if thinking.budget_tokens is None:
        return {"summary": "auto"}
    effort = next((name for limit, name in EFFORT_BUDGETS if thinking.budget_tokens <= limit), "high")
    return {"effort": effort, "summary": "auto"}


# ---- response helpers --------------------------------------------------------------------------------


def _content_blocks(item: dict[str, Any]) -> list[dict[str, Any]]:
    kind = item.get("type", "message")
    if kind == "reasoning":
        texts = [str(part.get("text") or "") for part in item.get("summary") or [] if isinstance(part, dict)]
        signature = item.get("encrypted_content") or ""
        if not texts and signature:
            return [{"type": "redacted_thinking", "data": signature}]
        return [{"type": "thinking", "thinking": "\n\n".join(texts), "signature": signature}] if texts else []
    if kind == "function_call":
        return [
            {
                "type": "tool_use",
                "id": item.get("call_id") or item.get("id") or "",
                "name": item.get("name"),
                "input": _tool_input(item.get("arguments")),
            }
        ]
    if kind == "message" and item.get("role", "assistant") == "assistant":
        content = item.get("content")
        if isinstance(content, str):
            return [{"type": "text", "text": content}] if content else []
        return [
            {
                "type": "text",
                "text": part.get("text") if part.get("type") == "output_text" else part.get("refusal", ""),
            }
            for part in content or []
            if isinstance(part, dict) and part.get("type") in ("output_text", "refusal")
        ]
    return []


def _tool_input(arguments: Any) -> dict[str, Any]:
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"arguments": arguments}


def _stop_reason(response: dict[str, Any], content: list[dict[str, Any]]) -> str:
    reason = (response.get("incomplete_details") or {}).get("reason")
    if reason == "max_output_tokens":
        return "max_tokens"
    if reason == "content_filter":
        return "refusal"
    return "tool_use" if any(block["type"] == "tool_use" for block in content) else "end_turn"


def _empty(block: dict[str, Any]) -> dict[str, Any]:
    kind = block["type"]
    if kind == "text":
        return {"type": "text", "text": ""}
    if kind == "thinking":
        return {"type": "thinking", "thinking": "", "signature": ""}
    if kind == "tool_use":
        return {**block, "input": {}}
    return block


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        return [{"type": "text_delta", "text": block["text"]}]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": block["thinking"]}]
        return deltas + (
            [{"type": "signature_delta", "signature": block["signature"]}] if block["signature"] else []
        )
    if kind == "tool_use":
        return [{"type": "input_json_delta", "partial_json": orjson.dumps(block["input"]).decode()}]
    return []
