"""RemoteAgent: Gym runs the tool loop, a user-hosted agent service decides each step.

The service implements one route, `POST {agent_base_url}/v1/responses` (NeMo Gym 0.7's remote_agent
contract): it gets the task's request with the conversation so far as `input` and answers a Responses API
object. A `function_call` it leaves unanswered (no `function_call_output` with its `call_id` in the same
answer) is a call for Gym to run on the resources server; answered pairs are the service's own tool use
and pass through. An answer with an assistant message and no unanswered call ends the rollout. The
resources server, its cookies and the row's other fields never reach the service.

The transport to the service is `remote_service.RemoteService`; the plumbing around the loop (seeding,
tool calls, cookies, deadline, concurrency cap, verify, metrics proxy) is the core's `nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request, Response
from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    declared_tool_names,
    input_items,
    summed_usage,
)
from nemo_gym.config_types import ModelServerRef
from nemo_gym.http.client import default_retry_policy
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_agents.remote_agent.remote_service import (
    RETRYABLE_STATUSES,
    RemoteService,
    checked_base_url,
)

DEFAULT_MAX_STEPS = 50
RemoteAgentRunRequest = RolloutRunRequest


class RemoteAgentConfig(RolloutAgentConfig):
    agent_base_url: str = Field(
        description="where the service listens; Gym POSTs to <agent_base_url>/v1/responses"
    )
    model_server: ModelServerRef | None = Field(
        default=None, description="not used: the service calls whatever model it likes"
    )
    agent_api_key: SecretStr | None = Field(
        default=None, description="sent in agent_auth_header on every call to the service; never shown"
    )
    agent_auth_header: str = Field(
        default="Authorization",
        min_length=1,
        description="header carrying agent_api_key: `Authorization: Bearer <key>`, any other header the key alone",
    )
    concurrency: int = Field(
        default=32, ge=1, description="rollouts at once (NeMo Gym); max_concurrent_rollouts wins"
    )
    remote_responses_timeout_secs: float = Field(
        default=1800.0, gt=0, description="deadline of one call to the service, its retries included"
    )
    remote_max_attempts: int = Field(
        default=3,
        ge=1,
        description="attempts per call when the service cannot be reached or answers 408/429/5xx",
    )
    run_timeout_secs: float = Field(
        default=2100.0, gt=0, description="deadline of one rollout (NeMo Gym); rollout_deadline_s wins"
    )
    max_steps: int | None = Field(
        default=None,
        ge=0,
        description=f"calls to the service per rollout; null or 0 means {DEFAULT_MAX_STEPS}",
    )

    @field_validator("agent_base_url")
    @classmethod
    def _an_address_to_append_to(cls, url: str) -> str:
        return checked_base_url(url)

    @model_validator(mode="after")
    def _nemo_gym_bounds(self) -> RemoteAgentConfig:
        """NeMo Gym's names for the rollout bounds stand in for ours when ours are not set."""
        self.max_concurrent_rollouts = self.max_concurrent_rollouts or self.concurrency
        self.rollout_deadline_s = self.rollout_deadline_s or self.run_timeout_secs
        return self


class RemoteAgent(RolloutAgent):
    config: RemoteAgentConfig

    _service: RemoteService | None = PrivateAttr(default=None)

    @property
    def service(self) -> RemoteService:
        """Built on first use, after `run_webserver()` applied the deployment's HTTP defaults."""
        if self._service is None:
            policy = default_retry_policy().with_overrides(
                max_attempts=self.config.remote_max_attempts,
                deadline_s=self.config.remote_responses_timeout_secs,
                retry_statuses=RETRYABLE_STATUSES,
            )
            self._service = RemoteService(
                self.config.agent_base_url, self.config.agent_auth_header, self.config.agent_api_key, policy
            )
        return self._service

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The loop without seeding or verifying; the resources server's cookies are set on the answer (the
        service's own stay private to it)."""
        rollout = await self.as_rollout(
            self._loop(body.model_dump(mode="json", exclude_unset=True), self.session_rollout(request))
        )
        self.end_session_rollout(rollout)
        for name, value in rollout.resources_cookies.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)

    async def run(self, request: Request, body: RemoteAgentRunRequest) -> Response:
        """One rollout: seed the session, run the loop, verify; the verify answer is returned as is."""
        rollout = self.seeded_loop_verified(request, body, self._loop)
        return Response(await self.as_rollout(rollout), media_type="application/json")

    async def _loop(self, params: dict[str, Any], rollout: Rollout) -> Rollout:
        """Call the service, run the calls it left unanswered, call it again with their outputs; until it
        answers a message with no call left, stops early (`incomplete_details`), or `max_steps` calls.
        Fields the caller set to null are not sent: null means the default, and the service gets only
        what the task says."""
        params = {key: value for key, value in params.items() if value is not None}
        task_input = input_items(params)
        declared_tools = declared_tool_names(params)
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        service_cookies: dict[str, str] = {}
        for _ in range(self.config.max_steps or DEFAULT_MAX_STEPS):
            turn, service_cookies = await self.service.respond(
                {**params, "input": [*task_input, *new_items]}, service_cookies
            )
            output = turn.get("output") or []
            new_items.extend(output)
            usage = summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            if turn.get("incomplete_details"):
                break
            calls = unanswered_calls(output)
            if not calls and any(item.get("type") == "message" for item in output):
                break
            for call in calls:
                new_items.append(await self.tool_call_output(call, declared_tools, rollout))
        rollout.response = {**rollout.response, "output": new_items, "usage": usage}
        return rollout


def unanswered_calls(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `function_call`s of one answer that no `function_call_output` of it answers (the service's asks
    of Gym), in order; of calls sharing a `call_id`, the last one."""
    answered = {item.get("call_id") for item in output if item.get("type") == "function_call_output"}
    asked = {
        item.get("call_id"): item
        for item in output
        if item.get("type") == "function_call" and item.get("call_id") not in answered
    }
    return list(asked.values())


if __name__ == "__main__":
    RemoteAgent.run_webserver()
