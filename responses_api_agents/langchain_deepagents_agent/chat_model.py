"""The LangChain chat model a DeepAgents graph is given: each of its calls is one `/v1/responses` call of the
agent's model server, through the core's `model_turn` (cookies threaded, the rollout's deadline, answers
checked), never a provider client of its own.

The model's answer reaches LangChain as an `AIMessage` that also keeps the answer's output items as they
came (`GYM_OUTPUT`, token ids included). When the graph sends that message back in a later call the items
go back unchanged, so a model server that checks token continuity sees exactly what it produced. Which
rollout a call belongs to is the `CURRENT_RUN` context variable, set around one graph run (asyncio copies
it into the graph's tasks), so one model object serves every rollout at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import orjson
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool

from nemo_gym.agents.rollout_agent import Rollout, function_call_output

# response_metadata keys of an AIMessage made from a model answer: its output items, and its place in the run.
GYM_OUTPUT = "gym_output"
GYM_TURN = "gym_turn"
# additional_kwargs key keeping an input message's role where LangChain has no class of its own for it.
GYM_ROLE = "gym_role"
ModelTurn = Callable[[str, dict[str, Any], dict[str, str]], Awaitable[tuple[dict[str, Any], dict[str, str]]]]


@dataclass
class DeepRun:
    """One graph run: how to reach the model server, the rollout's cookies, the task's request settings,
    and every model answer in the order they came (sub-agents' included)."""

    model_turn: ModelTurn
    model_server: str
    rollout: Rollout
    settings: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)


CURRENT_RUN: ContextVar[DeepRun] = ContextVar("langchain_deepagents_agent_run")


class GymChatModel(BaseChatModel):
    """Chat model over the current run's model server (Responses API); async only."""

    @property
    def _llm_type(self) -> str:
        return "nemo-gym-responses"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ):
        raise NotImplementedError(
            "GymChatModel answers only async calls (ainvoke): the agent server is async"
        )

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any):
        """The tools as Responses function tools; LangChain's `tool_choice` spellings as the Responses ones."""
        bound: dict[str, Any] = {"tools": [responses_tool(tool) for tool in tools]}
        if tool_choice is not None:
            bound["tool_choice"] = responses_tool_choice(tool_choice)
        return self.bind(**bound, **kwargs)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        run = CURRENT_RUN.get()
        body = {**run.settings, "input": input_items(messages)}
        body.update({key: kwargs[key] for key in ("tools", "tool_choice") if kwargs.get(key) is not None})
        turn, run.rollout.model_cookies = await run.model_turn(
            run.model_server, body, run.rollout.model_cookies
        )
        run.turns.append(turn)
        return ChatResult(generations=[ChatGeneration(message=answer_message(turn, len(run.turns) - 1))])


def responses_tool(tool: Any) -> dict[str, Any]:
    function = convert_to_openai_tool(tool)["function"]
    return {
        "type": "function",
        "name": function["name"],
        "description": function.get("description", ""),
        "parameters": function.get("parameters") or {"type": "object", "properties": {}},
        "strict": False,
    }


def responses_tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    if choice in ("any", True):
        return "required"
    if isinstance(choice, str):
        return {"type": "function", "name": choice}
    return choice


def answer_message(turn: dict[str, Any], index: int) -> AIMessage:
    """The model's answer as LangChain sees it: its text, its function calls, and its items kept as they are.
    Arguments that are not a JSON object reach the tool as {}: its refusal (the resources server's 422, or a
    DeepAgents tool's schema check) is what the model reads, instead of the rollout failing."""
    output = turn.get("output") or []
    text = "".join(
        part.get("text", "")
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    )
    calls = [
        tool_call(name=item.get("name", ""), args=_arguments(item.get("arguments")), id=item.get("call_id"))
        for item in output
        if item.get("type") == "function_call"
    ]
    return AIMessage(
        content=text,
        tool_calls=calls,
        id=turn.get("id"),
        response_metadata={GYM_OUTPUT: output, GYM_TURN: index},
    )


def _arguments(text: Any) -> dict[str, Any]:
    try:
        parsed = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def langchain_messages(items: list[dict[str, Any]]) -> list[BaseMessage]:
    """The task's input items as the graph's first messages; items that are not plain messages (earlier
    function calls, reasoning) ride along unchanged and go back to the model as they came."""
    messages: list[BaseMessage] = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "function_call_output":
            messages.append(
                ToolMessage(content=_text(item.get("output")), tool_call_id=item.get("call_id") or "")
            )
        elif kind == "function_call":
            call = tool_call(
                name=item.get("name", ""), args=_arguments(item.get("arguments")), id=item.get("call_id")
            )
            messages.append(AIMessage(content="", tool_calls=[call], response_metadata={GYM_OUTPUT: [item]}))
        elif kind != "message" or (role == "assistant" and not isinstance(item.get("content"), str)):
            messages.append(AIMessage(content="", response_metadata={GYM_OUTPUT: [item]}))
        elif role == "assistant":
            messages.append(AIMessage(content=item["content"]))
        elif role in ("system", "developer"):
            messages.append(
                SystemMessage(content=item.get("content") or "", additional_kwargs={GYM_ROLE: role})
            )
        else:
            messages.append(HumanMessage(content=item.get("content") or ""))
    return messages


def input_items(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """The graph's messages as Responses input items for one model call."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AIMessage):
            items.extend(_assistant_items(message))
        elif isinstance(message, ToolMessage):
            items.append(tool_output_item(message))
        elif isinstance(message, SystemMessage):
            role = message.additional_kwargs.get(GYM_ROLE, "system")
            items.append({"role": role, "content": message.content, "type": "message"})
        else:
            items.append({"role": "user", "content": message.content, "type": "message"})
    return items


def _assistant_items(message: AIMessage) -> list[dict[str, Any]]:
    kept = message.response_metadata.get(GYM_OUTPUT)
    if kept is not None:
        return list(kept)
    items = (
        [{"role": "assistant", "content": _text(message.content), "type": "message"}]
        if message.content
        else []
    )
    return items + [
        {
            "type": "function_call",
            "call_id": call["id"],
            "name": call["name"],
            "arguments": orjson.dumps(call["args"]).decode(),
        }
        for call in message.tool_calls
    ]


def tool_output_item(message: ToolMessage) -> dict[str, Any]:
    return function_call_output({"call_id": message.tool_call_id}, _text(message.content))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str | dict)
        )
    return "" if content is None else str(content)
