"""GymnasiumAgent: drives a reset/step environment (`nemo_gym.envkit.gymnasium_server`) turn by turn.

`/run`: POST the row to the environment's `/reset` and add the observation to the prompt as a user message;
then up to `max_steps` times: one model call, POST row + that reply to `/step`, add the reward to the sum,
stop when the step says terminated or truncated, else add the step's `info.tool_outputs` as
`function_call_output` items and its observation as a user message. An episode still running after
`max_steps` is truncated. The answer is `{responses_create_params (with the reset observation), response
(the last reply, output = everything added after the prompt, usage summed), reward, terminated, truncated,
info (of the last step)}`.

User-simulator mode (`user_model_server` set): a second model plays the user. The environment's
observations become private notes for it instead of messages to the policy; after each policy turn without
tool calls the simulated user answers, and its reply is the policy's next user message. A reply containing
`user_stop_marker` ends the episode (terminated, `info.user_stopped`); rewards still come from the steps.
Each user-model call (request and answer) is kept in the answer's `user_model_calls`, so replay_model can
play the user's side offline.
If the prompt does not end with a user message, the simulated user opens the conversation.

Compatible with NeMo Gym's gymnasium_agent (config keys, routes, request and answer shapes, cookie
threading). Like simple_agent it builds on `nemo_gym.agents.rollout_agent` for the model calls (the user model's
too), the cookies, usage sums, the rollout deadline and `max_concurrent_rollouts`; an environment answer
that is not a valid reset/step answer is a 502 naming the problem; the user-simulator mode is new.
"""

from __future__ import annotations

from typing import Any, TypeVar

from fastapi import Request, Response
from pydantic import BaseModel, Field, TypeAdapter, ValidationError, model_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    cookies_after,
    summed_usage,
)
from nemo_gym.config_types import ModelServerRef
from nemo_gym.envkit.gymnasium_server import EnvResetResponse, EnvStepResponse, EnvToolOutput
from nemo_gym.http.client import checked_json
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.validation_errors import first_problem
from responses_api_agents.gymnasium_agent.user_simulator import (
    DEFAULT_STOP_MARKER,
    DEFAULT_USER_SYSTEM_PROMPT,
    SimulatedUser,
    assistant_text,
)

EnvAnswer = TypeVar("EnvAnswer", bound=BaseModel)
TOOL_OUTPUTS = TypeAdapter(list[EnvToolOutput])


class GymnasiumAgentConfig(RolloutAgentConfig):
    max_steps: int = Field(default=10, ge=1, description="model turns per episode; then it is truncated")
    user_model_server: ModelServerRef | None = Field(default=None, description="plays the user if set")
    user_system_prompt: str = Field(
        default=DEFAULT_USER_SYSTEM_PROMPT, description="the simulated user's prompt; {stop_marker} filled in"
    )
    user_responses_create_params: dict[str, Any] = Field(
        default_factory=dict, description="sampling settings of the user model's calls (no `input`)"
    )
    user_stop_marker: str = Field(default=DEFAULT_STOP_MARKER, min_length=1)

    @model_validator(mode="after")
    def _user_params_are_create_params(self) -> GymnasiumAgentConfig:
        if "input" in self.user_responses_create_params:
            raise ValueError("user_responses_create_params: the agent writes the user model's input itself")
        NeMoGymResponseCreateParamsNonStreaming.model_validate(
            {**self.user_responses_create_params, "input": ""}
        )
        return self


class SimulatedUserAgentConfig(GymnasiumAgentConfig):
    """For agents whose environments always talk with a simulated user (toolsandbox_agent,
    conversational_tool_use): the user is the policy's own model unless `user_model_server` names another
    (self-play, NeMo Gym's default for them)."""

    @model_validator(mode="after")
    def _user_defaults_to_the_policy(self) -> SimulatedUserAgentConfig:
        if self.user_model_server is None:
            self.user_model_server = self.model_server
        return self


class GymnasiumRunResponse(BaseModel):
    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    response: NeMoGymResponse
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    user_model_calls: list[dict[str, Any]] = Field(default_factory=list)


class GymnasiumAgent(RolloutAgent):
    config: GymnasiumAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One model call, passed through with the caller's cookies."""
        return await self.passed_through(request, response, body)

    async def run(self, request: Request, body: RolloutRunRequest) -> GymnasiumRunResponse:
        row = body.model_dump(mode="json", exclude_unset=True)
        return await self.as_rollout(self._episode(row, Rollout.starting(dict(request.cookies))))

    def ends_before_step(self, output: list[dict[str, Any]]) -> bool:
        """Whether a model turn ends the episode without reaching the environment: never here; an agent
        built on this one may stop on, say, a turn that holds nothing to act on."""
        return False

    async def _episode(self, row: dict[str, Any], rollout: Rollout) -> GymnasiumRunResponse:
        params = row["responses_create_params"]
        prompt, user = await self._open(row, rollout)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        step, reward = EnvStepResponse(), 0.0
        stopped: str | None = None  # the info flag of who ended the episode, when not the environment
        for _ in range(self.config.max_steps):
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name,
                {**params, "input": [*prompt, *new_items]},
                rollout.model_cookies,
            )
            rollout.response = turn
            output = turn.get("output") or []
            new_items.extend(output)
            usage = summed_usage(usage, turn.get("usage"))
            if self.ends_before_step(output):
                stopped = "policy_stopped"
                break
            step = await self._env_call("/step", {**row, "response": turn}, rollout, EnvStepResponse)
            reward += step.reward
            if step.terminated or step.truncated:
                break
            new_items.extend(self._tool_outputs(step))
            if user is None:
                if step.observation:
                    new_items.append(_user_message(step.observation))
                continue
            user.note(step.observation)
            if any(item.get("type") == "function_call" for item in output):
                continue  # the policy is still working with its tools; the user waits
            user.heard(assistant_text(output))
            reply = await self._user_turn(user)
            new_items.append(_user_message(reply))
            if user.stops(reply):
                stopped = "user_stopped"
                break
        return GymnasiumRunResponse(
            responses_create_params={**params, "input": prompt},
            response={**rollout.response, "output": new_items, "usage": usage},
            reward=reward,
            terminated=step.terminated or stopped is not None,
            truncated=step.truncated or not (step.terminated or stopped),
            info={**step.info, stopped: True} if stopped else step.info,
            user_model_calls=user.calls if user else [],
        )

    async def _open(
        self, row: dict[str, Any], rollout: Rollout
    ) -> tuple[list[dict[str, Any]], SimulatedUser | None]:
        """Reset the environment; answer the prompt the policy starts from, and the simulated user if any."""
        prompt = row["responses_create_params"]["input"]
        prompt = [_user_message(prompt)] if isinstance(prompt, str) else list(prompt)
        reset = await self._env_call("/reset", row, rollout, EnvResetResponse)
        if self.config.user_model_server is None:
            if reset.observation:
                prompt.append(_user_message(reset.observation))
            return prompt, None
        user = SimulatedUser.joining(
            prompt, self.config.user_system_prompt, self.config.user_stop_marker, rollout.model_cookies
        )
        user.note(reset.observation)
        if not prompt or prompt[-1].get("role") != "user":
            prompt.append(_user_message(await self._user_turn(user)))
        return prompt, user

    async def _user_turn(self, user: SimulatedUser) -> str:
        """The simulated user's next message (the user model's output text)."""
        params = {**self.config.user_responses_create_params, "input": user.model_input()}
        turn, user.cookies = await self.model_turn(self.config.user_model_server.name, params, user.cookies)
        user.called(params, turn)
        text = NeMoGymResponse.model_validate(turn).output_text
        user.said(text)
        return text

    async def _env_call(
        self, path: str, body: dict[str, Any], rollout: Rollout, model: type[EnvAnswer]
    ) -> EnvAnswer:
        name = self.config.resources_server.name
        answer = await self.server_client.post(name, path, json=body, cookies=rollout.resources_cookies)
        rollout.resources_cookies = cookies_after(answer, rollout.resources_cookies)
        return _validated(model, await checked_json(answer), f"environment '{name}' at {path}")

    def _tool_outputs(self, step: EnvStepResponse) -> list[dict[str, Any]]:
        where = f"environment '{self.config.resources_server.name}' in info.tool_outputs"
        outputs = _validated(TOOL_OUTPUTS, step.info.get("tool_outputs") or [], where)
        return [{"type": "function_call_output", **output.model_dump()} for output in outputs]


def _user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "type": "message"}


def _validated(model: Any, value: Any, source: str) -> Any:
    """`value` as `model` (a pydantic model or TypeAdapter); a peer's malformed answer is a 502."""
    validate = model.validate_python if isinstance(model, TypeAdapter) else model.model_validate
    try:
        return validate(value)
    except ValidationError as error:
        raise GymError(
            502,
            "invalid_peer_response",
            f"{source} answered something unexpected: {error.error_count()} problem(s), "
            f"first: {first_problem(error)}",
        ) from error


if __name__ == "__main__":
    GymnasiumAgent.run_webserver()
