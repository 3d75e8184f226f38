"""Reflection: draft an answer, critique it, revise it, until the answer is marked final or the critiques
run out (NeMo Gym 0.7's reflection_agent.py; its key `max_reflections`).

Graph: generate -> (answer final, or `max_reflections` critiques made? end) -> reflect -> generate -> ...
`generate` sends the conversation so far; its answer (the model's own output items) joins the conversation.
`reflect` sends the conversation plus `reflection_prompt`; the critique it gets back joins the conversation
as the user's next message, so the following `generate` revises against it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import Field

from responses_api_agents.langgraph_agent.app import (
    GraphState,
    LangGraphAgent,
    LangGraphAgentConfig,
    text_of,
    user_message,
)

DEFAULT_REFLECTION_PROMPT = (
    "Review the answer you just gave as a strict grader would: point out every error, gap or unjustified "
    "step you can find, and say how to fix each one. Do not write the corrected answer yet."
)


class ReflectionAgentConfig(LangGraphAgentConfig):
    max_reflections: int = Field(default=2, ge=0, description="critiques at most; NeMo Gym's default 2")
    reflection_prompt: str = Field(
        default=DEFAULT_REFLECTION_PROMPT, description="the request for a critique of the last answer (ours)"
    )
    final_answer_marker: str = Field(
        default="<answer>",
        description="an answer containing this text is final: no more critiques (NeMo Gym)",
    )


class ReflectionState(GraphState, total=False):
    conversation: list[dict[str, Any]]
    reflections: int
    final: bool


class ReflectionAgent(LangGraphAgent):
    config: ReflectionAgentConfig

    def build_graph(self) -> CompiledStateGraph:
        graph = StateGraph(ReflectionState)
        graph.add_node("generate", self._generate)
        graph.add_node("reflect", self._reflect)
        graph.add_edge(START, "generate")
        graph.add_conditional_edges("generate", self._after_generate, ["reflect", END])
        graph.add_edge("reflect", "generate")
        return graph.compile()

    def initial_state(self, task_input: list[dict[str, Any]]) -> dict[str, Any]:
        return {"conversation": list(task_input), "reflections": 0, "final": False}

    def step_limit(self) -> int:
        return 2 * self.config.max_reflections + 3

    async def _generate(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        call = await self.ask(config, state["conversation"])
        answer = call.get("output") or []
        return {
            "calls": [call],
            "conversation": [*state["conversation"], *answer],
            "final": self.config.final_answer_marker in text_of(call),
        }

    async def _reflect(self, state: ReflectionState, config: RunnableConfig) -> dict[str, Any]:
        call = await self.ask(config, [*state["conversation"], user_message(self.config.reflection_prompt)])
        return {
            "calls": [call],
            "conversation": [*state["conversation"], user_message(text_of(call))],
            "reflections": state["reflections"] + 1,
        }

    def _after_generate(self, state: ReflectionState) -> str:
        if state["final"] or state["reflections"] >= self.config.max_reflections:
            return END
        return "reflect"


if __name__ == "__main__":
    ReflectionAgent.run_webserver()
