"""VerifiersAgent: a Verifiers (PrimeIntellect `verifiers`) environment runs as a Gym agent.

Each `/run` is one Verifiers rollout of the row's prompt: the environment's own loop (its turns, its tools,
its stop conditions) calls the policy through an OpenAI client pointed at our model server's
`/v1/chat/completions`, and the environment's rubric scores it; the reward is the rubric's. The rollout
comes back as a Gym response (`trajectory.py`). No resources server takes part: the environment is both
the loop and the verifier, as in NeMo Gym.

The environment is a Python module exposing `load_environment(**vf_env_args)`, named by `vf_env_id` (in
the config, or per row): a module defined locally (`letter_count_env.py` here) or an installed package.
Environments Hub ids need the Prime hub to be installed from, which this deployment does not reach; they
are refused in one line.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from typing import Any

import httpx
import verifiers as vf
from fastapi import Request, Response
from openai import APIStatusError, APITimeoutError, AsyncOpenAI
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator
from verifiers.clients import NeMoRLChatCompletionsClient

from nemo_gym.agents.rollout_agent import RolloutAgent, RolloutAgentConfig, RolloutRunRequest, text_prompt
from nemo_gym.config_types import AggregateMetricsRequest, ResourcesServerRef
from nemo_gym.http.client import default_retry_policy
from nemo_gym.http.deadlines import DEADLINE_HEADER, announced, remaining_s
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_agents.verifiers_agent.trajectory import output_items

# A placeholder the OpenAI client insists on; our model servers hold the real upstream key themselves.
MODEL_SERVER_API_KEY = "unused"


def environment_refusal(vf_env_id: str) -> str | None:
    """Why `vf_env_id` cannot be loaded here, in one line; None when its module is importable."""
    if not vf_env_id:
        return "vf_env_id is empty: name a Verifiers environment module in the config or in the row"
    if "/" in vf_env_id:
        return (
            f"vf_env_id {vf_env_id!r} is an Environments Hub id; Hub environments are installed from the Prime "
            "hub, which this deployment does not reach: install the environment's package and name its module"
        )
    module = vf_env_id.replace("-", "_")
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or not a module name at all
        found = False
    if not found:
        return (
            f"vf_env_id {vf_env_id!r}: no module {module!r} is installed (Hub environments need the Prime hub); "
            "install its package or name a locally defined environment module"
        )
    return None


class VerifiersAgentConfig(RolloutAgentConfig):
    resources_server: ResourcesServerRef | None = Field(
        default=None, description="not used: the Verifiers environment's rubric scores the rollout"
    )
    model_name: str = Field(default="", description="the `model` sent with each chat completion")
    vf_env_id: str = Field(
        default="", description="module of the Verifiers environment; a row may name another"
    )
    vf_env_args: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of load_environment"
    )
    group_size: int = Field(
        default=1, ge=1, le=1, description="rollouts per /run: one (the collector repeats)"
    )
    max_concurrent_generation: int = Field(
        default=-1,
        description="rollouts generating at once (-1: no cap); the cap max_concurrent_rollouts sets",
    )
    max_concurrent_scoring: int = Field(
        default=-1,
        description="each rollout is scored inside its own run, so at most one at a time per rollout",
    )
    max_tokens: int = Field(default=8192, gt=0, description="max_tokens of each model call")
    temperature: float = Field(
        default=1.0, ge=0, description="unless the row's responses_create_params set it"
    )
    top_p: float = Field(
        default=1.0, gt=0, le=1, description="unless the row's responses_create_params set it"
    )

    @field_validator("vf_env_id")
    @classmethod
    def _loadable(cls, value: str) -> str:
        if value and (refusal := environment_refusal(value)):
            raise ValueError(refusal)
        return value

    @model_validator(mode="after")
    def _generation_cap(self) -> VerifiersAgentConfig:
        """NeMo Gym's cap on rollouts generating at once is the cap every Gym agent has."""
        if self.max_concurrent_rollouts is None and self.max_concurrent_generation > 0:
            self.max_concurrent_rollouts = self.max_concurrent_generation
        return self


class VerifiersAgentRunRequest(RolloutRunRequest):
    """A row as NeMo Gym's Verifiers rows are: the prompt plus what the environment's rubric reads."""

    model_config = ConfigDict(extra="allow")
    task_idx: int = 0
    vf_env_id: str | None = None
    answer: str = ""
    task: str = "default"
    example_id: int | str = 0
    info: dict[str, Any] = Field(default_factory=dict)


class VerifiersAgent(RolloutAgent):
    config: VerifiersAgentConfig

    _environments: dict[str, Any] = PrivateAttr(default_factory=dict)
    _loading: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)

    def setup_webserver(self):
        """The configured environment is loaded before the server answers, so a broken one stops the start."""
        if self.config.vf_env_id:
            self._environments[self.config.vf_env_id] = self._load(self.config.vf_env_id)
        return super().setup_webserver()

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One rollout of the configured environment on `body`'s prompt, without an answer to score."""
        row = VerifiersAgentRunRequest(responses_create_params=body)
        result = await self.as_rollout(self._rollout(row))
        return NeMoGymResponse.model_validate(result["response"])

    async def run(self, request: Request, body: VerifiersAgentRunRequest) -> dict[str, Any]:
        """One rollout, scored by the environment's rubric: the row, `response`, `reward`, `metrics`."""
        return await self.as_rollout(self._rollout(body))

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Any:
        """No resources server to ask: the rewards are summarised here."""
        return await super(RolloutAgent, self).aggregate_metrics(body)

    async def _rollout(self, row: VerifiersAgentRunRequest) -> dict[str, Any]:
        vf_env_id = row.vf_env_id or self.config.vf_env_id
        environment = await self._environment(vf_env_id)
        params = row.responses_create_params
        prompt = [
            # Verifiers' chat messages have no developer role; in chat it is the system role.
            {**message, "role": "system"} if message["role"] == "developer" else message
            for message in text_prompt(params.model_dump(mode="json", exclude_unset=True).get("input", []))
        ]
        sampling_args = {
            "max_tokens": params.max_output_tokens or self.config.max_tokens,
            "temperature": self.config.temperature if params.temperature is None else params.temperature,
            "top_p": self.config.top_p if params.top_p is None else params.top_p,
        }
        rollout_input = vf.RolloutInput(
            prompt=prompt, answer=row.answer, info=row.info, example_id=row.example_id
        )
        async with self._model_client() as openai_client:
            client = ModelServerClient(openai_client)
            (outcome,) = await environment.run_group(
                group_inputs=[rollout_input],
                client=client,
                model=self.config.model_name,
                sampling_args=sampling_args,
                state_columns=["trajectory"],
            )
        if outcome.get("error") is not None:
            raise self._failure(outcome["error"], client.failure)
        reward = outcome.get("reward")
        if reward is None:
            raise GymError(502, "reward_not_computed", f"the rubric of {vf_env_id!r} gave no reward")
        metrics = outcome.get("metrics") or {}
        response = {
            "id": f"verifiers-{vf_env_id}-{row.task_idx}",
            "created_at": time.time(),
            "model": self.config.model_name,
            "output": output_items(outcome.get("completion") or [], outcome.get("trajectory") or []),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [{"type": "function", **tool.model_dump()} for tool in environment.tool_defs or []],
            "usage": _usage(outcome.get("token_usage")),
            "status": "incomplete" if outcome.get("is_truncated") else "completed",
            "env_id": vf_env_id,
            "group_id": str(row.task_idx),
            "reward": reward,
            "metrics": metrics,
        }
        NeMoGymResponse.model_validate(response)  # a conversion bug fails here, not at the trainer
        return {**row.model_dump(mode="json"), "response": response, "reward": reward, "metrics": metrics}

    async def _environment(self, vf_env_id: str) -> Any:
        """The environment `vf_env_id` names, loaded once (in a thread: loading builds its dataset)."""
        if vf_env_id in self._environments:
            return self._environments[vf_env_id]
        if refusal := environment_refusal(vf_env_id):
            raise GymError(422, "unknown_environment", refusal)
        async with self._loading:
            if vf_env_id not in self._environments:
                self._environments[vf_env_id] = await asyncio.to_thread(self._load, vf_env_id)
        return self._environments[vf_env_id]

    def _load(self, vf_env_id: str) -> Any:
        try:
            return vf.load_environment(vf_env_id, **self.config.vf_env_args)
        except Exception as error:
            raise GymError(
                422, "unloadable_environment", f"vf_env_id {vf_env_id!r} did not load: {error}"
            ) from error

    def _model_client(self) -> AsyncOpenAI:
        """An OpenAI client for the model server, bounded by what is left of the rollout's deadline: no
        retries of its own (the model server retries its upstream), the budget announced to the server."""
        seconds = remaining_s() or default_retry_policy().deadline_s
        return AsyncOpenAI(
            base_url=self.server_client.server_base_url(self.config.model_server.name).rstrip("/") + "/v1",
            api_key=MODEL_SERVER_API_KEY,
            max_retries=0,
            timeout=seconds,
            default_headers={DEADLINE_HEADER: announced(seconds)},
            http_client=httpx.AsyncClient(trust_env=False, timeout=seconds),
        )

    def _failure(self, error: Any, model_failure: Exception | None) -> GymError:
        """The error that ended the rollout inside Verifiers (serialized there, so the model call's own
        failure is read from the client): a model server's refusal keeps its status, a model call out of
        time is a 504, anything else a 502."""
        model_server = self.config.model_server.name
        if isinstance(model_failure, APITimeoutError):
            return GymError(
                504, "timeout", f"model server {model_server!r} did not answer within the deadline"
            )
        if isinstance(model_failure, APIStatusError):
            return GymError(
                model_failure.status_code,
                "model_error",
                f"model server {model_server!r} refused a turn: {model_failure.message}",
                cause=model_failure.body,  # the model server's own error, its upstream's cause inside
            )
        return GymError(502, "rollout_failed", f"the Verifiers rollout failed: {error}")


class ModelServerClient(NeMoRLChatCompletionsClient):
    """Verifiers' client for NeMo Gym model servers, keeping the exception a failed model call raised
    (Verifiers stores only its text in the rollout)."""

    failure: Exception | None = None

    async def get_native_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().get_native_response(*args, **kwargs)
        except (APIStatusError, APITimeoutError) as error:
            self.failure = error
            raise


def _usage(token_usage: dict[str, float] | None) -> dict[str, int] | None:
    if not token_usage:
        return None
    input_tokens, output_tokens = (
        int(token_usage.get("input_tokens", 0)),
        int(token_usage.get("output_tokens", 0)),
    )
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


if __name__ == "__main__":
    VerifiersAgent.run_webserver()
