"""`NeMoGymResponsesChatGenerator`: a Haystack chat generator whose every call is one `/v1/responses` turn
of a Gym model server, made by the agent running the rollout.

A serialized pipeline names this class as its Agent's `chat_generator`; the class has no address or key of
its own. The rollout in progress (`ModelTurns`, held in a context variable, so concurrent rollouts sharing
one pipeline never mix) makes the call, threads the model server's cookies, sums usage, and keeps every
turn's output items as they came (token ids included). A reply carries its turn's index in `meta`, so the
trajectory is rebuilt from those items rather than from Haystack's lossy messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson
from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage, ToolCall
from haystack.tools import ToolsType, flatten_tools_or_toolsets

from nemo_gym.openai_utils import NeMoGymResponse

TURN_META_KEY = "gym_turn"

ModelCall = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class ModelTurns:
    """The model turns of one rollout: how to make one, and the answers so far, in order."""

    call: ModelCall
    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)
    failure: BaseException | None = None


CURRENT_ROLLOUT: ContextVar[ModelTurns | None] = ContextVar("haystack_agent_rollout", default=None)


@component
class NeMoGymResponsesChatGenerator:
    """Haystack chat generator backed by the Gym model server of the agent that runs the pipeline."""

    def __init__(
        self, server_name: str = "policy_model", generation_kwargs: dict[str, Any] | None = None
    ) -> None:
        # `server_name` is kept for pipeline files written for NeMo Gym; the agent's model_server is used.
        self.server_name = server_name
        self.generation_kwargs = generation_kwargs or {}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self, server_name=self.server_name, generation_kwargs=self.generation_kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NeMoGymResponsesChatGenerator:
        return default_from_dict(cls, data)

    @component.output_types(replies=list[ChatMessage])
    def run(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: ToolsType | None = None,
    ) -> dict[str, list[ChatMessage]]:
        raise RuntimeError("NeMoGymResponsesChatGenerator runs inside a Gym rollout: use Agent.run_async")

    @component.output_types(replies=list[ChatMessage])
    async def run_async(
        self,
        messages: list[ChatMessage],
        generation_kwargs: dict[str, Any] | None = None,
        tools: ToolsType | None = None,
    ) -> dict[str, list[ChatMessage]]:
        rollout = CURRENT_ROLLOUT.get()
        if rollout is None:
            raise RuntimeError("NeMoGymResponsesChatGenerator called outside a Gym rollout")
        params = {
            **self.generation_kwargs,
            **(generation_kwargs or {}),
            **rollout.generation_kwargs,
            "input": [item for message in messages for item in input_items(message, rollout.turns)],
        }
        if declared := [function_tool(tool) for tool in flatten_tools_or_toolsets(tools)]:
            params["tools"] = declared
        try:
            turn = await rollout.call(params)
        except BaseException as error:
            rollout.failure = error  # Haystack wraps what a component raises; the agent re-raises this one
            raise
        rollout.turns.append(turn)
        return {"replies": [reply(turn, len(rollout.turns) - 1)]}


def function_tool(tool: Any) -> dict[str, Any]:
    """A Haystack tool as a Responses function tool declaration."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    }


def reply(turn: dict[str, Any], index: int) -> ChatMessage:
    """One Responses turn as Haystack's assistant message: its text, its function calls, its index."""
    output = turn.get("output") or []
    text = NeMoGymResponse.model_validate(turn).output_text
    calls = [
        ToolCall(tool_name=item["name"], arguments=_arguments(item.get("arguments")), id=item.get("call_id"))
        for item in output
        if item.get("type") == "function_call"
    ]
    return ChatMessage.from_assistant(text=text or None, tool_calls=calls, meta={TURN_META_KEY: index})


def input_items(message: ChatMessage, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A Haystack message as Responses input items; a reply of an earlier turn as that turn's own items."""
    if TURN_META_KEY in message.meta:
        return list(turns[message.meta[TURN_META_KEY]].get("output") or [])
    if message.tool_call_results:
        return [
            {
                "type": "function_call_output",
                "call_id": result.origin.id or "",
                "output": tool_text(result.result),
            }
            for result in message.tool_call_results
        ]
    if message.images or message.files:
        raise ValueError("haystack_agent passes text only: a message with images or files cannot be sent")
    return [{"type": "message", "role": message.role.value, "content": message.text or ""}]


def tool_text(result: Any) -> str:
    return result if isinstance(result, str) else "".join(getattr(part, "text", "") for part in result)


def _arguments(arguments: str | None) -> dict[str, Any]:
    """A call's JSON arguments as a dict; anything else is kept under `_raw` for the tool to refuse."""
    try:
        parsed = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {"_raw": arguments}
    return parsed if isinstance(parsed, dict) else {"_raw": arguments}
