"""NonExecutingSimpleAgent: one model call whose answer, tool calls included, goes straight to `/verify`.

For environments where the tool call is itself the answer (function-calling format, argument matching):
the tools of the task are offered to the model but never run. Compatible with NeMo Gym 0.7's
non_executing_simple_agent (same folder, config keys, routes and rollout shape); the plumbing (seeding,
model call, cookies, deadline, concurrency cap, verify, metrics proxy) is the core's
`nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    input_items,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

NonExecutingSimpleAgentRunRequest = RolloutRunRequest


class NonExecutingSimpleAgentConfig(RolloutAgentConfig):
    """`resources_server` and `model_server`, as NeMo Gym's; the rest is `RolloutAgentConfig`'s."""


class NonExecutingSimpleAgent(RolloutAgent):
    config: NonExecutingSimpleAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One model call; its answer is returned as is, with the cookies of the caller and the model."""
        rollout = await self.as_rollout(
            self._answer(
                body.model_dump(mode="json", exclude_unset=True), Rollout.starting(dict(request.cookies))
            )
        )
        for name, value in {**request.cookies, **rollout.model_cookies}.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)

    async def run(self, request: Request, body: NonExecutingSimpleAgentRunRequest) -> Response:
        """Seed the session, ask the model once, verify its answer; the verify answer is returned as is."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    async def _run(self, request: Request, body: NonExecutingSimpleAgentRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self._answer(row["responses_create_params"], await self.seeded_rollout(request, row))
        return await self.verified(row, rollout.response, rollout)

    async def _answer(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        """The model's one turn, unchanged: a function call in it is the answer, never executed."""
        params = {**params, "input": input_items(params)}
        rollout.response, rollout.model_cookies = await self.model_turn(
            self.config.model_server.name, params, rollout.model_cookies
        )
        return rollout


if __name__ == "__main__":
    NonExecutingSimpleAgent.run_webserver()
