"""ToolSandboxAgent: the conversation loop of ToolSandbox, where a text reply goes to a simulated user.

A plain tool loop ends when the model stops calling tools; in ToolSandbox that reply is addressed to the
user, who answers, and the episode goes on. This agent is gymnasium_agent in its user-simulator mode (that
folder owns the loop and the simulated user) with NeMo Gym 0.7's toolsandbox_agent keys and result shape:

- the simulated user is on by default, played by the policy's own model server (self-play) unless
  `user_model_server` names another;
- a model turn with neither a tool call nor an assistant message ends the episode (`info.policy_stopped`):
  there is nothing for the environment or the user to act on;
- once the episode is over, the whole conversation goes to the resources server's `/verify`, whose answer
  (the row, `response`, `reward`) is the result, with `response` carrying `env_id`, `group_id` (the row's
  `task_idx`) and `contains_transitions`, plus gymnasium_agent's `terminated`, `truncated`, `info` and
  `user_model_calls` (so replay_model can play the user's side offline);
- `return_transitions: true` makes `response.output` one snapshot of the conversation per step (a list of
  lists) instead of one flat list; `/verify` always grades the flat list.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from fastapi import Request, Response
from pydantic import Field

from nemo_gym.agents.rollout_agent import Rollout, RolloutRunRequest
from nemo_gym.http.errors import GymError
from responses_api_agents.gymnasium_agent.app import GymnasiumAgent, SimulatedUserAgentConfig


class ToolSandboxAgentConfig(SimulatedUserAgentConfig):
    max_steps: int = Field(default=30, ge=1, description="model turns per episode; then it is truncated")
    return_transitions: bool = Field(
        default=False, description="response.output as one conversation snapshot per step (list of lists)"
    )


class ToolSandboxAgent(GymnasiumAgent):
    config: ToolSandboxAgentConfig

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        row = body.model_dump(mode="json", exclude_unset=True)
        result = await self.as_rollout(self._verified_episode(row, Rollout.starting(dict(request.cookies))))
        return Response(orjson.dumps(result), media_type="application/json")

    def ends_before_step(self, output: list[dict[str, Any]]) -> bool:
        """A turn with no tool call and no assistant message has nothing to act on: the episode ends."""
        return not any(
            item.get("type") == "function_call"
            or (item.get("type", "message") == "message" and item.get("role") == "assistant")
            for item in output
        )

    async def _verified_episode(self, row: dict[str, Any], rollout: Rollout) -> dict[str, Any]:
        episode = await self._episode(row, rollout)
        played = {**row, "responses_create_params": episode.responses_create_params.model_dump(mode="json")}
        flat = episode.response.model_dump(mode="json")
        output = flat["output"]
        if self.config.return_transitions:
            output = transitions(played["responses_create_params"]["input"], output)
        response = {
            **flat,
            "output": output,
            "env_id": f"toolsandbox-{uuid.uuid4().hex}",
            "group_id": str(row.get("task_idx", "")),
            "contains_transitions": self.config.return_transitions,
        }
        verdict = orjson.loads(await self.verified(played, flat, rollout))
        if not isinstance(verdict, dict):
            raise GymError(
                502, "invalid_verify_response", "the resources server's /verify answer is not an object"
            )
        return {
            **verdict,
            "response": response,
            "terminated": episode.terminated,
            "truncated": episode.truncated,
            "info": episode.info,
            "user_model_calls": episode.user_model_calls,
        }


def transitions(prompt: list[dict[str, Any]], items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The conversation as the policy saw it after each step: the prompt and every item up to the end of
    that step (a step is a run of model items, then a run of tool outputs and user messages)."""
    last = len(items) - 1
    ends = [
        index
        for index, item in enumerate(items)
        if index == last or (_added_by_agent(item) and not _added_by_agent(items[index + 1]))
    ]
    return [[*prompt, *items[: index + 1]] for index in ends]


def _added_by_agent(item: dict[str, Any]) -> bool:
    return item.get("type") == "function_call_output" or item.get("role") == "user"


if __name__ == "__main__":
    ToolSandboxAgent.run_webserver()
