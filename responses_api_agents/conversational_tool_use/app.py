"""ConversationalToolUseAgent: the simulation stage of NeMo Gym 0.7's conversational tool-use workflow.

A customer-service policy talks with a simulated customer and calls tools whose results a simulator model
writes (`resources_servers/conversational_tool_use_simulation`). Like toolsandbox_agent, this is
gymnasium_agent's user-simulator mode (that folder owns the loop and the simulated user): a policy message
goes to the customer, whose reply is the next user turn, until the customer writes the stop marker or
`max_agent_steps` policy turns are used. It adds NeMo Gym's keys and row conventions:

- `max_agent_steps` (default 50) counts policy turns; tool outputs and customer turns do not count;
- the first customer message: a row may give it as a user message in `responses_create_params.input` or
  as a top-level `initial_user_message` (copied in; when both are there they must agree); with neither,
  `seed_first_user_message: true` has the simulated customer open the conversation, and `false` refuses
  the row (422);
- the result is the row with gymnasium_agent's answer merged in (`responses_create_params` with the
  opening turns, `response`, `reward`, `terminated`, `truncated`, `info`, `user_model_calls`).

The three generation stages that build the rows this agent plays live beside it
(`domain_generation.py`, `policy_tool_generation.py`, `scenario_generation.py`; see README.md).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request, Response
from pydantic import Field, model_validator

from nemo_gym.agents.rollout_agent import Rollout, RolloutRunRequest
from nemo_gym.http.errors import GymError
from responses_api_agents.gymnasium_agent.app import GymnasiumAgent, SimulatedUserAgentConfig
from responses_api_agents.gymnasium_agent.user_simulator import message_text


class ConversationalToolUseAgentConfig(SimulatedUserAgentConfig):
    max_agent_steps: int = Field(
        default=50, ge=1, description="policy turns per conversation (NeMo Gym's key); then it is truncated"
    )
    seed_first_user_message: bool = Field(
        default=True, description="the simulated customer opens when the row has no user message"
    )

    @model_validator(mode="after")
    def _steps_are_agent_steps(self) -> ConversationalToolUseAgentConfig:
        """gymnasium_agent's `max_steps` is set from this agent's `max_agent_steps` (NeMo Gym's key)."""
        self.max_steps = self.max_agent_steps
        return self


class ConversationalToolUseAgent(GymnasiumAgent):
    config: ConversationalToolUseAgentConfig

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        row = self._with_opening(body.model_dump(mode="json", exclude_unset=True))
        episode = await self.as_rollout(self._episode(row, Rollout.starting(dict(request.cookies))))
        result = {**row, **episode.model_dump(mode="json")}
        return Response(orjson.dumps(result), media_type="application/json")

    def _with_opening(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row whose prompt holds the customer's first message, when the row gives one."""
        params = row["responses_create_params"]
        prompt = params.get("input") or []
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt, "type": "message"}]
        given = [message_text(item) for item in prompt if item.get("role") == "user"]
        opening = row.get("initial_user_message")
        if opening is not None:
            if not isinstance(opening, str) or not opening.strip():
                raise GymError(422, "invalid_row", "initial_user_message: must be a non-empty string")
            if given and given[0] != opening:
                raise GymError(
                    422,
                    "invalid_row",
                    "initial_user_message: differs from the first user message of responses_create_params.input",
                )
            if not given:
                prompt = [*prompt, {"role": "user", "content": opening, "type": "message"}]
        elif not given and not self.config.seed_first_user_message:
            raise GymError(
                422,
                "invalid_row",
                "responses_create_params.input: no user message and no initial_user_message, and "
                "seed_first_user_message is false (set it true to let the simulated customer open)",
            )
        return {**row, "responses_create_params": {**params, "input": prompt}}


if __name__ == "__main__":
    ConversationalToolUseAgent.run_webserver()
