"""A Verifiers rollout (its completion messages and per-turn token ids) as Gym Responses output items.

Verifiers speaks chat messages: an assistant turn (text and/or tool calls), the tool results its environment
computed, and user messages a multi-turn environment adds. Each becomes the Gym item a `/v1/responses` model
turn would have produced; the token ids of an assistant turn go on that turn's last item, as Gym agents keep
them, so a trainer reads them the same way from every agent.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson

TOKEN_FIELDS = (
    ("prompt_ids", "prompt_token_ids"),
    ("completion_ids", "generation_token_ids"),
    ("completion_logprobs", "generation_log_probs"),
)


def as_dict(message: Any) -> dict[str, Any]:
    """A Verifiers message (a pydantic model, or already a dict) as a plain dict."""
    return message.model_dump() if hasattr(message, "model_dump") else dict(message)


def text_of(content: Any) -> str:
    """Message content as text: strings as they are, text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) and "text" in part for part in content):
        return "".join(part["text"] for part in content)
    return orjson.dumps(content, default=str).decode()


def turn_tokens(trajectory: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """The token ids of each assistant turn, in order (None for a turn the model server gave none)."""
    tokens: list[dict[str, Any] | None] = []
    for step in trajectory:
        step_tokens = step.get("tokens") if isinstance(step, dict) else None
        for message in (step.get("completion") or []) if isinstance(step, dict) else []:
            if as_dict(message).get("role") == "assistant":
                tokens.append(step_tokens)
    return tokens


def output_items(completion: list[Any], trajectory: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rollout's completion as Gym output items, in the order the messages came."""
    tokens = iter(turn_tokens(trajectory))
    ids = itertools.count(1)
    items: list[dict[str, Any]] = []
    for message in map(as_dict, completion):
        role = message.get("role")
        if role == "assistant":
            items.extend(_assistant_items(message, next(tokens, None), ids))
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id") or "",
                    "output": text_of(message.get("content")),
                }
            )
        else:
            items.append(
                {"type": "message", "role": role or "user", "content": text_of(message.get("content"))}
            )
    return items


def _assistant_items(
    message: dict[str, Any], tokens: dict[str, Any] | None, ids: itertools.count
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = text_of(message.get("content"))
    if text or not message.get("tool_calls"):
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{next(ids)}",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for call in message.get("tool_calls") or []:
        call = orjson.loads(call) if isinstance(call, str) else as_dict(call)  # serialized calls come as JSON
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{next(ids)}",
                "call_id": call.get("id") or "",
                "name": call.get("name") or "",
                "arguments": text_of(call.get("arguments")) or "{}",
                "status": "completed",
            }
        )
    if tokens:
        items[-1] |= {gym: list(tokens.get(verifiers) or []) for verifiers, gym in TOKEN_FIELDS}
    return items
