"""Parallel thinking: several independent lines of reasoning on the same problem, then one answer made
from all of them (NeMo Gym 0.7's parallel_thinking_agent.py; its keys `num_parallel_paths` and
`perspective_prompts`).

Graph: `num_parallel_paths` `think` branches run side by side (LangGraph `Send`), each a fresh model call
with its own perspective -> aggregate. Branch i takes `perspective_prompts[i]`; branches beyond the list
take `fallback_perspective`. `aggregate` sees the problem and every branch's reasoning, in branch order.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send
from pydantic import Field

from responses_api_agents.langgraph_agent.app import (
    GraphState,
    LangGraphAgent,
    LangGraphAgentConfig,
    task_text,
    text_of,
)

DEFAULT_PERSPECTIVES = [
    "Reason forward from what is given, one justified step at a time.",
    "List every possible case and rule out the ones that contradict the facts.",
    "Start from what the answer must satisfy and work back to the facts.",
    "Write down how the parts relate to each other, then check each candidate answer against all of them.",
]
DEFAULT_FALLBACK_PERSPECTIVE = "Solve the problem carefully in your own way."
DEFAULT_BRANCH_PROMPT = "{perspective}\n\nProblem: {task}"
DEFAULT_AGGREGATE_PROMPT = (
    "The problem below was worked on {num_paths} times independently; the attempts follow. Compare them: "
    "where they agree, that is likely right; where they differ, decide which reasoning holds up. Then give "
    "the final answer inside <answer></answer> tags.\n\n{paths}\n\nProblem: {task}"
)


class ParallelThinkingAgentConfig(LangGraphAgentConfig):
    TEMPLATES = {
        "branch_prompt": frozenset({"perspective", "task"}),
        "aggregate_prompt": frozenset({"num_paths", "paths", "task"}),
    }

    num_parallel_paths: int = Field(default=4, ge=1, description="branches of reasoning (NeMo Gym)")
    perspective_prompts: list[str] = Field(
        default=DEFAULT_PERSPECTIVES, description="the perspective of branch i (NeMo Gym)"
    )
    fallback_perspective: str = Field(
        default=DEFAULT_FALLBACK_PERSPECTIVE, description="the perspective of branches past the list (ours)"
    )
    branch_prompt: str = Field(default=DEFAULT_BRANCH_PROMPT, description="{perspective}, {task} (ours)")
    aggregate_prompt: str = Field(
        default=DEFAULT_AGGREGATE_PROMPT, description="{num_paths}, {paths}, {task} (ours)"
    )


class ParallelThinkingState(GraphState, total=False):
    paths: Annotated[list[tuple[int, str]], operator.add]


class ParallelThinkingAgent(LangGraphAgent):
    config: ParallelThinkingAgentConfig

    def build_graph(self) -> CompiledStateGraph:
        graph = StateGraph(ParallelThinkingState)
        graph.add_node("think", self._think)
        graph.add_node("aggregate", self._aggregate)
        graph.add_conditional_edges(START, self._branches, ["think"])
        graph.add_edge("think", "aggregate")
        graph.add_edge("aggregate", END)
        return graph.compile()

    def initial_state(self, task_input: list[dict[str, Any]]) -> dict[str, Any]:
        return {"task": task_text(task_input)}

    def perspectives(self) -> list[str]:
        listed = self.config.perspective_prompts[: self.config.num_parallel_paths]
        return listed + [self.config.fallback_perspective] * (self.config.num_parallel_paths - len(listed))

    def _branches(self, state: ParallelThinkingState) -> list[Send]:
        return [
            Send("think", {"index": index, "perspective": perspective, "task": state["task"]})
            for index, perspective in enumerate(self.perspectives())
        ]

    async def _think(self, branch: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        prompt = self.config.branch_prompt.format(perspective=branch["perspective"], task=branch["task"])
        call = await self.ask_once(config, prompt)
        return {"calls": [call], "paths": [(branch["index"], text_of(call))]}

    async def _aggregate(self, state: ParallelThinkingState, config: RunnableConfig) -> dict[str, Any]:
        paths = "\n\n".join(f"Attempt {index + 1}:\n{text}" for index, text in sorted(state["paths"]))
        prompt = self.config.aggregate_prompt.format(
            num_paths=len(state["paths"]), paths=paths, task=state["task"]
        )
        return {"calls": [await self.ask_once(config, prompt)]}


if __name__ == "__main__":
    ParallelThinkingAgent.run_webserver()
