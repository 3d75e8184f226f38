"""toolsandbox: ToolSandbox-style stateful tool use with a simulated user (a reset/step environment).

Each episode holds its own sandbox world (contacts, messages, reminders, device settings; `world.py`). The
policy works on it through tool calls; its text replies go to a simulated user that gymnasium_agent's
user-simulator mode plays from the notes `/reset` answers (the row's `user_notes`), and that user ends the
episode with the stop marker. After every step the trajectory so far is graded (`grading.py`): milestone
similarity, 0 once a minefield is met. A step's reward is the change of that grade, so the rewards of the
steps taken add up to the grade of the trajectory however the episode ends (user stop, the agent's
`max_steps`, or this server's message cap), even though the agent sends no step after the user stops.
`/verify` grades a finished conversation (the row and the whole `response`) on a fresh world, without an
episode: toolsandbox_agent calls it at the end, and it re-grades recorded rollouts.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field

from nemo_gym.envkit.gymnasium_server import (
    EnvStepRequest,
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    parse_metadata,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.toolsandbox.grading import Evaluation, Milestone, Snapshot, evaluate
from resources_servers.toolsandbox.world import World, call_tool

DEFAULT_MAX_MESSAGES = 30
MESSAGES_PER_TOOL_CALL = 2  # the call and its result
MESSAGES_PER_REPLY = 2  # the agent's reply and the user's answer


class ToolSandboxConfig(GymnasiumServerConfig):
    max_messages: int | None = Field(
        default=None, ge=1, description="overrides each task's message cap (NeMo Gym's key); None: the task's"
    )
    grading_timeout_s: float = Field(
        default=30.0, gt=0, description="deadline of one grading of a trajectory"
    )


class ToolSandboxTask(BaseModel):
    """The row fields of a task (besides `responses_create_params`, which holds the agent's prompt and tools)."""

    task_idx: int | None = None
    scenario: str | None = None
    user_notes: str = Field(min_length=1)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    current_time: float = 1_767_225_600.0  # 2026-01-01 00:00 UTC
    milestones: list[Milestone] = Field(min_length=1)
    minefields: list[Milestone] = Field(default_factory=list)
    max_messages: int = Field(default=DEFAULT_MAX_MESSAGES, ge=1)


class ToolSandboxVerifyRequest(EnvStepRequest):
    """A task row and the whole conversation to grade (`response.output`: every item of the episode)."""


class ToolSandboxServer(GymnasiumServer):
    config: ToolSandboxConfig

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        """A fresh world from the row; the observation is the simulated user's notes (hidden from the policy)."""
        task = parse_metadata(ToolSandboxTask, metadata)
        world = World.from_row(task.initial_state, task.current_time)
        state = self.episode_state(session_id)
        state.update(
            task=task,
            world=world,
            trajectory=[Snapshot(world.snapshot())],
            messages=0,
            granted=0.0,
            cap=self.config.max_messages or task.max_messages,
        )
        return task.user_notes, {"scenario": task.scenario}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        played = play_turn(state["world"], state["trajectory"], action.output)
        state["messages"] += played.messages
        info: dict[str, Any] = {"tool_outputs": played.tool_outputs, "tool_errors": played.tool_errors}
        task: ToolSandboxTask = state["task"]
        evaluation = await self._graded(state["trajectory"], task, info)
        if evaluation is None:
            return None, 0.0, False, True, info
        reward = evaluation.reward - state["granted"]
        state["granted"] = evaluation.reward
        info.update(grade_info(evaluation))
        truncated = state["messages"] >= state["cap"]
        if truncated:
            info["message_cap_reached"] = state["cap"]
        return None, reward, False, truncated, info

    async def verify(self, body: ToolSandboxVerifyRequest) -> dict[str, Any]:
        """Grade a finished conversation without an episode: a fresh world from the row, the response's
        tool calls and replies played on it in order (tool outputs, user turns and anything else skipped),
        then the same grading as the steps, so the reward equals the sum of the step rewards."""
        row = body.model_dump(mode="json", exclude={"response"})
        task = parse_metadata(ToolSandboxTask, body.model_extra or {})
        world = World.from_row(task.initial_state, task.current_time)
        trajectory = [Snapshot(world.snapshot())]
        play_turn(world, trajectory, body.response.output)
        info: dict[str, Any] = {}
        evaluation = await self._graded(trajectory, task, info)
        graded = (
            {"reward": 0.0, **info}
            if evaluation is None
            else {"reward": evaluation.reward, **grade_info(evaluation)}
        )
        return {**row, "response": body.response.model_dump(mode="json"), **graded}

    def setup_webserver(self) -> FastAPI:
        """The reset/step routes, plus a stateless `/verify` that grades a whole recorded conversation."""
        app = super().setup_webserver()
        app.post("/verify")(self.verify)
        return app

    async def _graded(
        self, trajectory: list[Snapshot], task: ToolSandboxTask, info: dict[str, Any]
    ) -> Evaluation | None:
        """The trajectory's grade within `grading_timeout_s`; past it None, and `info` says why (the sample
        is masked, not scored 0)."""
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(evaluate, list(trajectory), task.milestones, task.minefields),
                self.config.grading_timeout_s,
            )
        except TimeoutError:
            info.update(
                mask_sample=True,
                grading_failure=f"grading did not finish within {self.config.grading_timeout_s:g}s",
            )
            return None


@dataclass
class PlayedTurn:
    tool_outputs: list[dict[str, str]] = field(default_factory=list)
    tool_errors: int = 0
    messages: int = 0


def play_turn(world: World, trajectory: list[Snapshot], output: list[Any]) -> PlayedTurn:
    """Run a model turn's tool calls on `world` and record its text replies, extending `trajectory` with a
    snapshot per call that ran and per non-empty reply; other items (tool outputs, user turns) are skipped."""
    played = PlayedTurn()
    for item in output:
        kind = getattr(item, "type", None)
        if kind == "function_call":
            result = call_tool(world, item.name, item.arguments)
            played.tool_outputs.append({"call_id": item.call_id, "output": result.output})
            played.tool_errors += result.error
            played.messages += MESSAGES_PER_TOOL_CALL
            if result.trace is not None:
                trajectory.append(Snapshot(world.snapshot(), traces=[result.trace]))
        elif kind == "message" and getattr(item, "role", None) == "assistant":
            text = "".join(getattr(part, "text", "") or "" for part in item.content)
            if text.strip():
                trajectory.append(Snapshot(world.snapshot(), reply=text))
                played.messages += MESSAGES_PER_REPLY
    return played


def grade_info(evaluation: Evaluation) -> dict[str, Any]:
    return {
        "similarity": evaluation.reward,
        "milestone_similarity": evaluation.milestone_similarity,
        "milestone_mapping": [list(pair) for pair in evaluation.milestone_mapping],
        "minefield_similarities": evaluation.minefield_similarities,
        "minefield_hit": evaluation.minefield_hit,
    }


if __name__ == "__main__":
    ToolSandboxServer.run_webserver()
