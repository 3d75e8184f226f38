"""ReWOO (reasoning without observation): plan every step up front, with each step's result stored in a
variable `#E<n>` that later steps may use, then carry the steps out, then solve from the evidence
(NeMo Gym 0.7's rewoo_agent.py).

Graph: plan -> worker (once per planned step, in order) -> solve. The plan is read from lines
`Plan: <why> #E<n> = <Tool>[<input>]`; a step's input has the results of earlier variables substituted
before it is sent. As in NeMo Gym every tool is the model itself (`LLM[...]`): a step is one fresh model call
whose whole input is the step's input. A plan without such lines goes straight to `solve`, and at most
`max_plan_steps` steps are carried out.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import Field

from responses_api_agents.langgraph_agent.app import (
    GraphState,
    LangGraphAgent,
    LangGraphAgentConfig,
    task_text,
    text_of,
)

PLAN_STEP = re.compile(
    r"Plan:\s*(?P<why>.*?)\s*(?P<variable>#E\d+)\s*=\s*(?P<tool>\w+)\s*\[(?P<input>[^\]]*)\]"
)
VARIABLE = re.compile(r"#E\d+")
DEFAULT_PLAN_PROMPT = (
    "Plan how to solve the task below before solving it. Break it into steps; for each step write one line\n"
    "Plan: <what this step does and why> #E<n> = LLM[<instruction for a language model>]\n"
    "numbering the variables #E1, #E2, ... in order. The instruction of a later step may use the result of "
    "an earlier one by writing its variable, e.g. LLM[Given #E1, compute the total]. Write only the plan.\n\n"
    "Task: {task}"
)
DEFAULT_SOLVE_PROMPT = (
    "Solve the task below using the plan that was made for it and the evidence each step produced. "
    "Evidence can be wrong or beside the point, so check it before relying on it. Give the final answer "
    "inside <answer></answer> tags.\n\n{plan}\n\nTask: {task}"
)


class ReWOOAgentConfig(LangGraphAgentConfig):
    TEMPLATES = {"plan_prompt": frozenset({"task"}), "solve_prompt": frozenset({"plan", "task"})}

    max_plan_steps: int = Field(default=10, ge=0, description="planned steps carried out at most (ours)")
    plan_prompt: str = Field(default=DEFAULT_PLAN_PROMPT, description="{task} (ours)")
    solve_prompt: str = Field(default=DEFAULT_SOLVE_PROMPT, description="{plan}, {task} (ours)")


class ReWOOState(GraphState, total=False):
    steps: list[dict[str, str]]
    done: int
    results: dict[str, str]


class ReWOOAgent(LangGraphAgent):
    config: ReWOOAgentConfig

    def build_graph(self) -> CompiledStateGraph:
        graph = StateGraph(ReWOOState)
        graph.add_node("plan", self._plan)
        graph.add_node("worker", self._worker)
        graph.add_node("solve", self._solve)
        graph.add_edge(START, "plan")
        graph.add_conditional_edges("plan", self._next_step, ["worker", "solve"])
        graph.add_conditional_edges("worker", self._next_step, ["worker", "solve"])
        graph.add_edge("solve", END)
        return graph.compile()

    def initial_state(self, task_input: list[dict[str, Any]]) -> dict[str, Any]:
        return {"task": task_text(task_input), "done": 0, "results": {}}

    def step_limit(self) -> int:
        return self.config.max_plan_steps + 4

    async def _plan(self, state: ReWOOState, config: RunnableConfig) -> dict[str, Any]:
        call = await self.ask_once(config, self.config.plan_prompt.format(task=state["task"]))
        steps = [match.groupdict() for match in PLAN_STEP.finditer(text_of(call))]
        return {"calls": [call], "steps": steps[: self.config.max_plan_steps]}

    def _next_step(self, state: ReWOOState) -> str:
        return "worker" if state["done"] < len(state["steps"]) else "solve"

    async def _worker(self, state: ReWOOState, config: RunnableConfig) -> dict[str, Any]:
        step = state["steps"][state["done"]]
        call = await self.ask_once(config, substituted(step["input"], state["results"]))
        return {
            "calls": [call],
            "results": {**state["results"], step["variable"]: text_of(call)},
            "done": state["done"] + 1,
        }

    async def _solve(self, state: ReWOOState, config: RunnableConfig) -> dict[str, Any]:
        prompt = self.config.solve_prompt.format(plan=plan_with_evidence(state), task=state["task"])
        return {"calls": [await self.ask_once(config, prompt)]}


def substituted(text: str, results: dict[str, str]) -> str:
    """`text` with each variable of an earlier step replaced by that step's result (unknown ones kept)."""
    return VARIABLE.sub(lambda found: results.get(found.group(0), found.group(0)), text)


def plan_with_evidence(state: ReWOOState) -> str:
    """Every planned step with the input it was given and the evidence it produced."""
    return "\n\n".join(
        f"Plan: {step['why']}\n{step['variable']} = {step['tool']}[{substituted(step['input'], state['results'])}]\n"
        f"Evidence: {state['results'].get(step['variable'], '(none)')}"
        for step in state["steps"]
    )


if __name__ == "__main__":
    ReWOOAgent.run_webserver()
