"""LangChain DeepAgents as a Gym agent: a graph from `deepagents.create_deep_agent` runs the rollout, its
model is our model server, and its tools are the resources server's.

Compatible with NeMo Gym 0.7's langchain_deepagents_agent (same folder, config keys `system_prompt` and
`max_input_tokens`, `/run` = seed, graph, verify). Each function tool the task declares in
`responses_create_params.tools` becomes a LangChain tool that calls the resources server's route of that name
with the session's cookies (or the agent session's tool grant), beside DeepAgents' own tools (planning,
a scratch file system kept in the graph's state, sub-agents). The model is `GymChatModel` (chat_model.py).

The response handed to `/verify` is the last model answer's, with `output` = the main agent's conversation
after the task input: each model answer's own output items (token ids included) and each tool's result as a
`function_call_output`; `usage` is summed over every model call, sub-agents' included.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson
from deepagents import create_deep_agent
from fastapi import Request, Response
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.state import CompiledStateGraph
from pydantic import Field, PrivateAttr

from nemo_gym.agents.rollout_agent import (
    RESERVED_ROUTES,
    TOOL_NAME,
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    input_items,
    marked_incomplete,
    summed_usage,
)
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_agents.langchain_deepagents_agent.chat_model import (
    CURRENT_RUN,
    GYM_OUTPUT,
    GYM_TURN,
    DeepRun,
    GymChatModel,
    langchain_messages,
    tool_output_item,
)

DEFAULT_MAX_STEPS = 50
# DeepAgents' own tools (0.7; `write_todos` of earlier versions); a task tool of the same name would clash.
BUILTIN_TOOLS = frozenset(
    {"write_todos", "ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep", "task"}
)
# Compiled graphs kept per distinct tool list (building one costs milliseconds; datasets reuse few lists).
GRAPHS_KEPT = 32
# Request settings of the task that the graph decides for itself on every call.
GRAPH_SETTINGS = ("input", "tools", "tool_choice")


class DeepAgentsAgentConfig(RolloutAgentConfig):
    system_prompt: str | None = Field(
        default=None, description="instructions put before DeepAgents' own system prompt (NeMo Gym)"
    )
    max_input_tokens: int | None = Field(
        default=None,
        gt=0,
        description="the policy model's context window: DeepAgents summarizes the conversation before it is "
        "reached (NeMo Gym); null = DeepAgents' default",
    )
    max_steps: int | None = Field(
        default=None,
        ge=1,
        description=f"model calls of the main agent per rollout; null = {DEFAULT_MAX_STEPS}. At the cap the "
        "rollout ends `incomplete` and is verified as it stands (ours; NeMo Gym refuses the key)",
    )


class DeepAgentsAgent(RolloutAgent):
    config: DeepAgentsAgentConfig

    _graphs: OrderedDict[bytes, CompiledStateGraph] = PrivateAttr(default_factory=OrderedDict)
    _model: GymChatModel | None = PrivateAttr(default=None)

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The graph without seeding or verifying; the caller's cookies reach both servers."""
        return await self.loop_responses(
            request, response, body.model_dump(mode="json", exclude_unset=True), self._deep_rollout
        )

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        """One rollout: seed the session, run the graph, verify; the verify answer is returned as is."""
        rollout = self.seeded_loop_verified(request, body, self._deep_rollout)
        return Response(await self.as_rollout(rollout), media_type="application/json")

    # ---- the rollout ------------------------------------------------------------------------------------

    async def _deep_rollout(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        task_input = input_items(params)
        graph = self.graph_for(declared_tools(params))
        settings = {key: value for key, value in params.items() if key not in GRAPH_SETTINGS}
        run = DeepRun(self.model_turn, self.config.model_server.name, rollout, settings)
        token = CURRENT_RUN.set(run)
        try:
            final = await graph.ainvoke({"messages": langchain_messages(task_input)})
        except ContextOverflowError as error:
            raise GymError(
                400,
                "context_length_exceeded",
                f"the conversation does not fit max_input_tokens ({self.config.max_input_tokens}) even after "
                f"DeepAgents compacted it ({error})",
            ) from error
        finally:
            CURRENT_RUN.reset(token)
        rollout.response = rollout_response(run.turns, final["messages"])
        return rollout

    def graph_for(self, tools: list[dict[str, Any]]) -> CompiledStateGraph:
        """The DeepAgents graph offering `tools` (the task's function tools) beside its own."""
        key = orjson.dumps(tools, option=orjson.OPT_SORT_KEYS)
        graph = self._graphs.get(key)
        if graph is None:
            graph = self.build_agent([resources_tool(self, tool) for tool in tools])
            self._graphs[key] = graph
            if len(self._graphs) > GRAPHS_KEPT:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        return graph

    def build_agent(self, tools: list[BaseTool]) -> CompiledStateGraph:
        """The compiled DeepAgents graph; a subclass may add tools or sub-agents here."""
        limit = ModelCallLimitMiddleware(
            run_limit=self.config.max_steps or DEFAULT_MAX_STEPS, exit_behavior="end"
        )
        return create_deep_agent(
            model=self.chat_model, tools=tools, system_prompt=self.config.system_prompt, middleware=[limit]
        )

    @property
    def chat_model(self) -> GymChatModel:
        if self._model is None:
            profile = (
                {"max_input_tokens": self.config.max_input_tokens} if self.config.max_input_tokens else None
            )
            self._model = GymChatModel(profile=profile)
        return self._model


def declared_tools(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The task's function tools; a name no resources server route can answer is a 422 naming it."""
    tools = [tool for tool in params.get("tools") or [] if tool.get("type") == "function"]
    for index, tool in enumerate(tools):
        name = tool.get("name", "")
        reason = (
            "is a route of every resources server, not a tool"
            if name in RESERVED_ROUTES
            else "is a DeepAgents tool already"
            if name in BUILTIN_TOOLS
            else None
            if TOOL_NAME.match(name)
            else "is not a route name (letters, digits, _ . -)"
        )
        if reason:
            raise GymError(
                422, "invalid_request", f"responses_create_params.tools[{index}].name {name!r} {reason}"
            )
    return tools


def resources_tool(agent: RolloutAgent, tool: dict[str, Any]) -> StructuredTool:
    """A LangChain tool calling the resources server's route of the tool's name, in the current rollout's
    session; whatever the route answers (a refusal too) is the tool's result the model reads."""
    name = tool["name"]

    async def call(**arguments: Any) -> str:
        run = CURRENT_RUN.get()
        return (await agent.call_tool(run.rollout, name, arguments)).decode(errors="replace")

    schema = tool.get("parameters") or {"type": "object", "properties": {}}
    return StructuredTool(
        name=name, description=tool.get("description") or name, args_schema=schema, coroutine=call
    )


def rollout_response(turns: list[dict[str, Any]], messages: list[BaseMessage]) -> dict[str, Any]:
    """The last answer with the main agent's conversation after the task input as its output, usage summed
    over every model call; `incomplete` when the run stopped at the model-call cap."""
    if not turns:
        raise GymError(500, "graph_error", "the DeepAgents graph ended without calling the model")
    called = {
        item.get("call_id")
        for turn in turns
        for item in turn.get("output") or []
        if item.get("type") == "function_call"
    }
    output: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, AIMessage) and GYM_TURN in message.response_metadata:
            output.extend(message.response_metadata[GYM_OUTPUT])
        elif isinstance(message, ToolMessage) and message.tool_call_id in called:
            output.append(tool_output_item(message))
    usage: dict[str, Any] | None = None
    for turn in turns:
        usage = summed_usage(usage, turn.get("usage"))
    response = {**turns[-1], "output": output, "usage": usage}
    last = messages[-1] if messages else None
    if isinstance(last, AIMessage) and GYM_TURN not in last.response_metadata:
        message = "the agent reached max_steps model calls before it finished"
        return marked_incomplete(response, "max_steps", message)
    return response


if __name__ == "__main__":
    DeepAgentsAgent.run_webserver()
