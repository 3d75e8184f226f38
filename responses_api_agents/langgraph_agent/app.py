"""The base of the LangGraph agents: a compiled LangGraph graph drives the policy model through our model
server, and the rollout is every model call the graph made, in order.

Compatible with NeMo Gym 0.7's langgraph_agent: the same folder, one entrypoint per graph
(`reflection_agent.py`, `orchestrator_agent.py`, `parallel_thinking_agent.py`, `rewoo_agent.py`), their config
keys, `/v1/responses` running the graph and `/run` = seed, graph, verify. Each graph node asks the model
through `ask`, which sends the task's `responses_create_params` with only `input` replaced to the model
server's `/v1/responses` (the core's `model_turn`: cookies threaded, the rollout's deadline, answers checked),
and records the call in the graph state. The response handed to `/verify` is the last call's, with `output`
= the output items of every call in order (token ids and all, as the model server sent them) and `usage`
summed over the calls.
"""

from __future__ import annotations

import operator
from abc import abstractmethod
from dataclasses import dataclass
from string import Formatter
from typing import Annotated, Any, ClassVar, Self, TypedDict

from fastapi import Request, Response
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph
from pydantic import PrivateAttr, model_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    input_items,
    summed_usage,
)
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.text.extraction import content_text

# Where a graph run finds its `GraphRun` in the LangGraph config every node receives.
GRAPH_RUN_KEY = "gym_graph_run"


class LangGraphAgentConfig(RolloutAgentConfig):
    """`resources_server` and `model_server`, as NeMo Gym's; each graph adds its own keys."""

    # A graph's prompt-template keys, each with the placeholders the graph fills in it.
    TEMPLATES: ClassVar[dict[str, frozenset[str]]] = {}

    @model_validator(mode="after")
    def _templates_fill(self) -> Self:
        for key, placeholders in self.TEMPLATES.items():
            check_template(getattr(self, key), key, placeholders)
        return self


class GraphState(TypedDict, total=False):
    """The state every graph shares: the task's text and the model's answers so far, one per call (appended,
    so the answers of branches running side by side are all kept, in branch order)."""

    task: str
    calls: Annotated[list[dict[str, Any]], operator.add]


@dataclass
class GraphRun:
    """What one graph run needs beside its state: the rollout (both servers' cookies) and the task's params."""

    rollout: Rollout
    params: dict[str, Any]


class LangGraphAgent(RolloutAgent):
    config: LangGraphAgentConfig

    _graph: CompiledStateGraph | None = PrivateAttr(default=None)

    @abstractmethod
    def build_graph(self) -> CompiledStateGraph:
        """The compiled graph; its nodes take (state, config) and call `ask` for every model call."""

    @abstractmethod
    def initial_state(self, task_input: list[dict[str, Any]]) -> dict[str, Any]:
        """The graph's input state for the task's input items (a string input is already one user message)."""

    def step_limit(self) -> int:
        """LangGraph's recursion limit for one run: above the most steps the configured graph can take."""
        return 25

    @property
    def graph(self) -> CompiledStateGraph:
        if self._graph is None:
            self._graph = self.build_graph()
        return self._graph

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The graph without seeding or verifying; the caller's cookies reach both servers."""
        return await self.loop_responses(
            request, response, body.model_dump(mode="json", exclude_unset=True), self._graph_rollout
        )

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        """One rollout: seed the session, run the graph, verify; the verify answer is returned as is."""
        rollout = self.seeded_loop_verified(request, body, self._graph_rollout)
        return Response(await self.as_rollout(rollout), media_type="application/json")

    # ---- the rollout ------------------------------------------------------------------------------------

    async def _graph_rollout(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        params = {**params, "input": input_items(params)}
        run_config: RunnableConfig = {
            "configurable": {GRAPH_RUN_KEY: GraphRun(rollout, params)},
            "recursion_limit": self.step_limit(),
        }
        final = await self.graph.ainvoke(self.initial_state(params["input"]), config=run_config)
        rollout.response = combined_response(final["calls"])
        return rollout

    async def ask(self, config: RunnableConfig, input_items: list[dict[str, Any]]) -> dict[str, Any]:
        """The model's answer to `input_items` as the whole input; the rest of the request is the task's. A
        failing call fails the rollout with the model server's status and reason."""
        run: GraphRun = config["configurable"][GRAPH_RUN_KEY]
        turn, run.rollout.model_cookies = await self.model_turn(
            self.config.model_server.name, {**run.params, "input": input_items}, run.rollout.model_cookies
        )
        return turn

    async def ask_once(self, config: RunnableConfig, prompt: str) -> dict[str, Any]:
        """The answer to one user message, `prompt` (the graphs' sub-questions)."""
        return await self.ask(config, [user_message(prompt)])


def combined_response(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The last answer with the output items of every answer, in order, and their summed usage."""
    if not turns:
        raise GymError(500, "graph_error", "the graph ended without calling the model")
    usage: dict[str, Any] | None = None
    for turn in turns:
        usage = summed_usage(usage, turn.get("usage"))
    output = [item for turn in turns for item in turn.get("output") or []]
    return {**turns[-1], "output": output, "usage": usage}


def text_of(turn: dict[str, Any]) -> str:
    """The text of the assistant messages of one answer (reasoning and tool calls left out)."""
    return "".join(
        part.get("text", "")
        for item in turn.get("output") or []
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    )


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "type": "message"}


def task_text(task_input: list[dict[str, Any]]) -> str:
    """The problem a graph solves: the text of the input's last user message; none is a 422."""
    for item in reversed(task_input):
        if item.get("role") == "user" and item.get("type", "message") == "message":
            if text := content_text(item.get("content")).strip():
                return text
    raise GymError(
        422,
        "invalid_request",
        "responses_create_params.input: the graph needs a user message with text to solve",
    )


def check_template(template: str, key: str, placeholders: frozenset[str]) -> None:
    """Refuse (at start) a configured prompt template that names a placeholder the graph does not fill."""
    named = {field for _, field, _, _ in Formatter().parse(template) if field is not None}
    unknown = named - placeholders
    if unknown:
        raise ValueError(
            f"{key} names {sorted(unknown)}, which this graph does not fill; use only "
            f"{sorted('{' + name + '}' for name in placeholders)} (write literal braces as {{{{ and }}}})"
        )
