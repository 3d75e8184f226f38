"""conversational_tool_use_simulation: a customer-service policy talks with a simulated customer and calls
generated tools whose results a simulator model writes; a judge grades the trajectory.

A reset/step environment (`nemo_gym.envkit.gymnasium_server`) for `gymnasium_agent` in user-simulator mode:
the reset observation is the customer's private brief (persona, goal, details), which the agent gives to
the user model as notes. Each policy turn is a step. Tool calls are checked against the task's tools and
answered by the tool-simulator model, shown the tool, the arguments and the session's earlier calls and
results (kept per session so results stay consistent). Each policy message to the customer is graded by
the judge on the trajectory so far; the step reward is the change of that grade, so an episode's summed
reward is its latest grade (1.0 pass, 0.0 fail) whenever it ends: the simulated user writing the stop
marker, or `max_agent_steps` policy turns (the step that reaches it grades and truncates the episode).

A judgment that cannot be had sets `info.judge_failure` (reward `judge_failure_reward`), never a silent 0.
A simulator that fails or answers malformed JSON gives the policy a tool error and is listed in
`info.tool_simulator_failures`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import Field, PrivateAttr

from nemo_gym.config_types import ModelServerRef
from nemo_gym.envkit.gymnasium_server import (
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    parse_metadata,
)
from nemo_gym.envkit.judged_env import PromptJudge
from nemo_gym.judge import (
    JudgeConfig,
    JudgeFailed,
    judge_failure_metrics,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from resources_servers.conversational_tool_use_simulation.simulation import (
    ConversationTask,
    ToolSpec,
    load_prompt,
    parse_arguments,
    parse_tool_result,
    parse_verdict,
    pretty,
    render_transcript,
    scenario_notes,
    tool_catalog,
)

FOLDER = Path(__file__).resolve().parent
JUDGE_FIELDS = ("policy", "scenario", "tools", "transcript")
SIMULATOR_FIELDS = (
    "policy",
    "scenario",
    "tool_name",
    "tool_description",
    "returns_schema",
    "arguments",
    "history",
)


class ConversationalToolUseConfig(JudgeConfig, GymnasiumServerConfig):
    judge_model_server: ModelServerRef
    judge_prompt_path: str = "prompts/judge.yaml"
    tool_simulator_model_server: ModelServerRef
    tool_simulator_responses_create_params: NeMoGymResponseCreateParamsNonStreaming = Field(
        default_factory=lambda: NeMoGymResponseCreateParamsNonStreaming(input=[])
    )
    tool_simulator_prompt_path: str = "prompts/tool_simulator.yaml"
    max_agent_steps: int = Field(default=30, ge=1, description="policy turns; the one reaching it is graded")


def without_text(response: NeMoGymResponse) -> str | None:
    return None if last_assistant_text(response) else "the tool simulator answered no text"


class ConversationalToolUseServer(GymnasiumServer):
    config: ConversationalToolUseConfig
    _judge: PromptJudge = PrivateAttr()
    _simulator: PromptJudge = PrivateAttr()
    _judge_prompt: str = PrivateAttr()
    _simulator_prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        config = self.config
        self._judge_prompt = load_prompt(FOLDER, config.judge_prompt_path, "judge_prompt_path", JUDGE_FIELDS)
        self._simulator_prompt = load_prompt(
            FOLDER, config.tool_simulator_prompt_path, "tool_simulator_prompt_path", SIMULATOR_FIELDS
        )
        self._judge = PromptJudge.of(self)
        # The tool simulator is called like a judge (same limits, deadline and failure records).
        simulator_config = JudgeConfig.model_validate(
            {
                **{key: getattr(config, key) for key in JudgeConfig.model_fields},
                "judge_model_server": config.tool_simulator_model_server,
                "judge_responses_create_params": config.tool_simulator_responses_create_params,
            }
        )
        self._simulator = PromptJudge.of(self, simulator_config, f"{config.name} tool simulator")
        return app

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        """The customer's brief is the observation: in user-simulator mode only the user model sees it."""
        task = parse_metadata(ConversationTask, metadata)
        state = self.episode_state(session_id)
        state.update(task=task, turns=0, events=[], grade=0.0, evaluations=[], simulator_failures=[])
        return scenario_notes(task.customer_scenario), {}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        state["turns"] += 1
        text = last_assistant_text(action)
        if text:
            state["events"].append({"kind": "agent_message", "text": text})
        calls = [item for item in action.output if getattr(item, "type", None) == "function_call"]
        tool_outputs = [await self._tool_result(state, call) for call in calls]
        out_of_turns = state["turns"] >= self.config.max_agent_steps
        info: dict[str, Any] = {"tool_outputs": tool_outputs}
        reward = 0.0
        if out_of_turns or not calls:
            reward = await self._grade(state, info)
        info.update(
            turns=state["turns"],
            events=list(state["events"]),
            tool_simulator_failures=list(state["simulator_failures"]),
            judge_evaluations=list(state["evaluations"]),
        )
        return None, reward, False, out_of_turns, info

    async def _tool_result(self, state: dict[str, Any], call: Any) -> dict[str, str]:
        task: ConversationTask = state["task"]
        tool = next((tool for tool in task.tools if tool.name == call.name), None)
        arguments: dict[str, Any] | None = None
        if tool is None:
            output = {
                "error": f"unknown tool {call.name!r}; available: {', '.join(t.name for t in task.tools)}"
            }
        else:
            arguments, problem = parse_arguments(tool, call.arguments)
            output = {"error": problem} if problem else await self._simulate(state, tool, arguments or {})
        state["events"].append(
            {"kind": "tool_call", "name": call.name, "arguments": call.arguments, "output": pretty(output)}
        )
        return {"call_id": call.call_id, "output": pretty(output)}

    async def _simulate(self, state: dict[str, Any], tool: ToolSpec, arguments: dict[str, Any]) -> dict:
        task: ConversationTask = state["task"]
        history = [e for e in state["events"] if e["kind"] == "tool_call"]
        prompt = self._simulator_prompt.format(
            policy=task.policy,
            scenario=pretty(task.customer_scenario.model_dump(exclude_none=True)),
            tool_name=tool.name,
            tool_description=tool.summary,
            returns_schema=pretty(tool.returns) if tool.returns else "(none given: any JSON object)",
            arguments=pretty(arguments),
            history="\n".join(f"{e['name']}({e['arguments']}) -> {e['output']}" for e in history) or "(none)",
        )
        try:
            answer = await self._simulator.ask(prompt, unusable=without_text)
        except JudgeFailed as failed:
            state["simulator_failures"].append({"tool": tool.name, **failed.failure.model_dump()})
            return {"error": f"tool {tool.name} is unavailable (simulator {failed.failure.kind})"}
        state["evaluations"].append(answer.evaluation)
        result, repaired, problem = parse_tool_result(tool, answer.text)
        if problem is not None:
            state["simulator_failures"].append({"tool": tool.name, "kind": "malformed", "message": problem})
            return {"error": f"tool {tool.name} failed: {problem}"}
        if repaired:
            state["simulator_failures"].append(
                {"tool": tool.name, "kind": "repaired", "message": "json-repair"}
            )
        return result or {}

    async def _grade(self, state: dict[str, Any], info: dict[str, Any]) -> float:
        """Judge the trajectory so far; the step's reward moves the episode's sum to the new grade."""
        task: ConversationTask = state["task"]
        prompt = self._judge_prompt.format(
            policy=task.policy,
            scenario=pretty(task.customer_scenario.model_dump(exclude_none=True)),
            tools=tool_catalog(task.tools),
            transcript=render_transcript(state["events"]),
        )
        try:
            judgment = await self._judge.ask(
                prompt, parse_verdict, missing="has no 'VERDICT: PASS' or 'VERDICT: FAIL' line"
            )
        except JudgeFailed as failed:
            grade = self.config.judge_failure_reward
            info.update(verdict=None, judge_output=None, judge_failure=failed.failure.model_dump())
        else:
            state["evaluations"].append(judgment.evaluation)
            judge_output, verdict = judgment.text, judgment.verdict
            grade = float(verdict == "pass")
            info.update(verdict=verdict, judge_output=judge_output, judge_failure=None)
        reward, state["grade"] = grade - state["grade"], grade
        info["graded_reward"] = grade
        return reward

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        rows = [[{**rollout, **(rollout.get("info") or {})} for rollout in task] for task in tasks]
        return {**super().compute_metrics(tasks), **judge_failure_metrics(rows)}


if __name__ == "__main__":
    ConversationalToolUseServer.run_webserver()
