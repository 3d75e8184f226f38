"""ToolSimulationAgent: rollouts whose tools are never run, for next-action (pivot) training.

A pivot row holds a conversation cut at one decision point, the earlier tool results recorded in it; the
policy's next action is what `/verify` grades. With the default `max_steps: 1` this is NeMo Gym 0.7's
tool_simulation_agent: one model call, no `/seed_session`, its answer verified as it is. With
`max_steps` above 1 and a `tool_simulation_model`, a tool call of the policy is answered by that model
instead of the environment, and the policy goes on, so a pivot can be rolled out past its first action.
The plumbing (model calls, cookies, deadline, concurrency cap, verify, metrics proxy) is the core's
`nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from pydantic import Field, field_validator, model_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    declared_tool_names,
    function_call_output,
    input_items,
    summed_usage,
    tool_call_refusal,
)
from nemo_gym.config_types import ModelServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_agents.tool_simulation_agent.simulation import (
    DEFAULT_TOOL_SIMULATION_PROMPT,
    marked_unusable,
    simulated_output,
    simulation_request,
)

ToolSimulationAgentRunRequest = RolloutRunRequest


class ToolSimulationAgentConfig(RolloutAgentConfig):
    max_steps: int = Field(
        default=1, ge=1, description="policy model calls per rollout; 1 or null = NeMo Gym's single step"
    )
    tool_simulation_model: ModelServerRef | None = Field(
        default=None, description="the model server that answers the policy's tool calls (max_steps > 1)"
    )
    tool_simulation_prompt: str = Field(
        default=DEFAULT_TOOL_SIMULATION_PROMPT,
        min_length=1,
        description="system prompt of the simulator; the tools, the conversation and the call follow it",
    )

    @field_validator("max_steps", mode="before")
    @classmethod
    def _null_is_one_step(cls, steps: object) -> object:
        """NeMo Gym's configs may say `max_steps: null`; its agent makes one call whatever they say."""
        return 1 if steps is None else steps

    @model_validator(mode="after")
    def _a_simulator_for_more_steps(self) -> ToolSimulationAgentConfig:
        if self.max_steps > 1 and self.tool_simulation_model is None:
            raise ValueError(
                f"max_steps is {self.max_steps} but tool_simulation_model is not set: name the model server "
                "that answers tool calls ({type: responses_api_models, name: ...}) or set max_steps: 1"
            )
        return self


class ToolSimulationAgent(RolloutAgent):
    config: ToolSimulationAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The rollout without verifying; the caller's and the models' cookies are set on the answer."""
        params = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self.as_rollout(self._loop(params, Rollout.starting(dict(request.cookies))))
        for name, value in {**request.cookies, **rollout.model_cookies}.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)

    async def run(self, request: Request, body: ToolSimulationAgentRunRequest) -> Response:
        """Roll the row out and verify it; the verify answer is returned as is. No `/seed_session`: no
        tool of the environment is called (NeMo Gym)."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    async def _run(self, request: Request, body: ToolSimulationAgentRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self._loop(row["responses_create_params"], Rollout.starting(dict(request.cookies)))
        return await self.verified(row, rollout.response, rollout)

    async def _loop(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        """Policy turns, each tool call answered by the simulator, until a turn calls no tool, the model
        stops early, a simulated answer is unusable or `max_steps` turns were made. With one step the
        policy's turn is the response, unchanged."""
        task_input = input_items(params)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        simulator_cookies: dict[str, str] = {}
        for step in range(1, self.config.max_steps + 1):
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name,
                {**params, "input": [*task_input, *new_items]},
                rollout.model_cookies,
            )
            output = turn.get("output") or []
            new_items.extend(output)
            usage = summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            calls = [item for item in output if item.get("type") == "function_call"]
            if step == self.config.max_steps or turn.get("incomplete_details") or not calls:
                break
            answers, simulator_cookies, problem = await self._tool_answers(
                params, [*task_input, *new_items], calls, simulator_cookies
            )
            new_items.extend(answers)
            if problem is not None:
                rollout.response = marked_unusable(turn, problem)
                break
        if self.config.max_steps > 1:
            rollout.response = {**rollout.response, "output": new_items, "usage": usage}
        return rollout

    async def _tool_answers(
        self,
        params: dict[str, Any],
        conversation: list[dict[str, Any]],
        calls: list[dict[str, Any]],
        cookies: dict[str, str],
    ) -> tuple[list[dict[str, Any]], dict[str, str], str | None]:
        """A `function_call_output` for each call, in order: a refusal for a call that may not run, else the
        simulator's answer (each simulation sees the answers before it). Also the simulator's cookies
        after them, and, when an answer is unusable, why: the answers stop before that call."""
        simulator = self.config.tool_simulation_model
        assert simulator is not None, "the config refuses max_steps > 1 without a tool_simulation_model"
        answers: list[dict[str, Any]] = []
        for call in calls:
            answer = tool_call_refusal(call, declared_tool_names(params))
            if answer is None:
                asked = simulation_request(
                    self.config.tool_simulation_prompt, params, [*conversation, *answers], call
                )
                turn, cookies = await self.model_turn(simulator.name, asked, cookies)
                text, problem = simulated_output(turn)
                if problem is not None:
                    return answers, cookies, problem
                answer = function_call_output(call, text)
            answers.append(answer)
        return answers, cookies, None


if __name__ == "__main__":
    ToolSimulationAgent.run_webserver()
