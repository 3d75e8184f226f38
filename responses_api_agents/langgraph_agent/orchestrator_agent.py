"""Orchestrator: split the problem into sub-tasks, hand each to a sub-agent, then combine their results
(NeMo Gym 0.7's orchestrator_agent.py; its key `max_subtasks`).

Graph: decompose -> one `subagent` per sub-task, run side by side (LangGraph `Send`) -> synthesize.
`decompose` asks for the sub-tasks as lines `SUBTASK <n>: <question>`; at most `max_subtasks` are kept, and
an answer without such lines makes the whole problem the one sub-task. Each sub-agent is a fresh model call
that sees only its sub-task; `synthesize` sees the problem and every sub-task with its result, in order.
"""

from __future__ import annotations

import operator
import re
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

SUBTASK_LINE = re.compile(r"^\s*SUBTASK\s+\d+\s*:\s*(.+?)\s*$", re.MULTILINE)
DEFAULT_DECOMPOSE_PROMPT = (
    "You lead a team that will solve the problem below. Split it into at most {max_subtasks} sub-tasks that "
    "team members can work on independently; each must make sense on its own, without the others. Write one "
    "per line as\nSUBTASK 1: <self-contained question>\nSUBTASK 2: <self-contained question>\n"
    "and nothing else. A problem too small to split is one sub-task: the problem itself.\n\nProblem: {task}"
)
DEFAULT_SUBTASK_PROMPT = "Work out the following fully and show how you got there.\n\nSub-task: {subtask}"
DEFAULT_SYNTHESIZE_PROMPT = (
    "Your team split a problem into sub-tasks and solved each. Use their results to answer the original "
    "problem: check they fit together, explain your reasoning, and give the final answer inside "
    "<answer></answer> tags.\n\nProblem: {task}\n\n{subtask_results}"
)


class OrchestratorAgentConfig(LangGraphAgentConfig):
    TEMPLATES = {
        "decompose_prompt": frozenset({"task", "max_subtasks"}),
        "subtask_prompt": frozenset({"subtask"}),
        "synthesize_prompt": frozenset({"task", "subtask_results"}),
    }

    max_subtasks: int = Field(default=5, ge=1, description="sub-tasks kept from the decomposition (NeMo Gym)")
    decompose_prompt: str = Field(
        default=DEFAULT_DECOMPOSE_PROMPT, description="{task}, {max_subtasks} (ours)"
    )
    subtask_prompt: str = Field(default=DEFAULT_SUBTASK_PROMPT, description="{subtask} (ours)")
    synthesize_prompt: str = Field(
        default=DEFAULT_SYNTHESIZE_PROMPT, description="{task}, {subtask_results} (ours)"
    )


class OrchestratorState(GraphState, total=False):
    subtasks: list[str]
    results: Annotated[list[tuple[int, str]], operator.add]


class OrchestratorAgent(LangGraphAgent):
    config: OrchestratorAgentConfig

    def build_graph(self) -> CompiledStateGraph:
        graph = StateGraph(OrchestratorState)
        graph.add_node("decompose", self._decompose)
        graph.add_node("subagent", self._subagent)
        graph.add_node("synthesize", self._synthesize)
        graph.add_edge(START, "decompose")
        graph.add_conditional_edges("decompose", self._dispatch, ["subagent"])
        graph.add_edge("subagent", "synthesize")
        graph.add_edge("synthesize", END)
        return graph.compile()

    def initial_state(self, task_input: list[dict[str, Any]]) -> dict[str, Any]:
        return {"task": task_text(task_input)}

    async def _decompose(self, state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        prompt = self.config.decompose_prompt.format(
            task=state["task"], max_subtasks=self.config.max_subtasks
        )
        call = await self.ask_once(config, prompt)
        subtasks = SUBTASK_LINE.findall(text_of(call))[: self.config.max_subtasks]
        return {"calls": [call], "subtasks": subtasks or [state["task"]]}

    def _dispatch(self, state: OrchestratorState) -> list[Send]:
        return [
            Send("subagent", {"index": index, "subtask": subtask})
            for index, subtask in enumerate(state["subtasks"])
        ]

    async def _subagent(self, branch: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        call = await self.ask_once(config, self.config.subtask_prompt.format(subtask=branch["subtask"]))
        return {"calls": [call], "results": [(branch["index"], text_of(call))]}

    async def _synthesize(self, state: OrchestratorState, config: RunnableConfig) -> dict[str, Any]:
        results = dict(state["results"])
        listed = "\n\n".join(
            f"Sub-task {index + 1}: {subtask}\nResult: {results.get(index, '(no result)')}"
            for index, subtask in enumerate(state["subtasks"])
        )
        prompt = self.config.synthesize_prompt.format(task=state["task"], subtask_results=listed)
        return {"calls": [await self.ask_once(config, prompt)]}


if __name__ == "__main__":
    OrchestratorAgent.run_webserver()
