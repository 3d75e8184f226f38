"""What the three generation stages of conversational tool use share: a model-only agent whose `/run`
makes a few prompted model calls, reads JSON out of the answers and returns the row with `response` (the
last useful model answer), `reward`, `result` and `generation_trace` (every call, request and answer).

A generator answer is read as NeMo Gym's stages read it, more forgivingly: one code fence unwrapped, strict
JSON, else json-repair's mending (the call is then marked `repaired`); an answer nothing can be made of is
a marked failure in the trace (`parse_error`), never an empty success. A result with nothing generated
scores 0.0 with `generation_failure` saying why; anything else scores 1.0.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
from fastapi import Request, Response
from pydantic import BaseModel, Field

from nemo_gym.agents.rollout_agent import RolloutAgent, RolloutAgentConfig, RolloutRunRequest
from nemo_gym.config_types import AggregateMetrics, ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.reward_profile import AggregateMetricsBody, AggregateMetricsMixin
from resources_servers.conversational_tool_use_simulation.simulation import read_json


class GenerationAgentConfig(RolloutAgentConfig):
    resources_server: ResourcesServerRef | None = Field(
        default=None, description="unused: generation talks to model servers only"
    )
    model_server: ModelServerRef = Field(description="the generator's model server")


class GenerationCall(BaseModel):
    """One generator call as the trace keeps it."""

    phase: str
    request: dict[str, Any]
    response: dict[str, Any]
    text: str
    parsed_value: Any = None
    repaired: bool = False
    parse_error: str | None = None


class GenerationAgent(RolloutAgent):
    """Base of the generation stages: subclasses write `generate(row, cookies)`."""

    config: GenerationAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One call of the generator's model server, passed through with the caller's cookies."""
        return await self.passed_through(request, response, body)

    async def run(self, request: Request, body: RolloutRunRequest) -> Response:
        row = body.model_dump(mode="json", exclude_unset=True)
        result = await self.as_rollout(self.generate(row, dict(request.cookies)))
        return Response(orjson.dumps(result), media_type="application/json")

    async def generate(self, row: dict[str, Any], cookies: dict[str, str]) -> dict[str, Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement generate()")

    async def aggregate_metrics(self, body: AggregateMetricsBody) -> AggregateMetrics:
        """No environment to ask: the statistics of the rollouts' own rewards."""
        return await AggregateMetricsMixin.aggregate_metrics(self, body)

    async def call(
        self, server: ModelServerRef, phase: str, messages: list[dict[str, str]], cookies: dict[str, str]
    ) -> GenerationCall:
        """One generator call: `messages` only (sampling belongs to the model server's config)."""
        params = {"input": [{**message, "type": "message"} for message in messages]}
        turn, cookies_after = await self.model_turn(server.name, params, cookies)
        cookies.update(cookies_after)
        text = NeMoGymResponse.model_validate(turn).output_text
        return GenerationCall(phase=phase, request=params, response=turn, text=text)


def parsed(call: GenerationCall, expected: type | tuple[type, ...], what: str) -> GenerationCall:
    """`call` with its answer read as JSON of type `expected`, or with the reason it cannot be."""
    value, repaired = read_json(call.text)
    call.repaired = repaired
    if not isinstance(value, expected) or (repaired and not value):
        call.parse_error = f"the answer is not {what}" + (" (even after json-repair)" if repaired else "")
        return call
    call.parsed_value = value
    return call


def rollout_rng(seed: int | None, row: dict[str, Any], *identity_keys: str) -> random.Random:
    """The rollout's random source: with `seed`, one fixed by the seed and the row's identity (so a retried
    rollout draws the same), else a fresh unseeded one."""
    if seed is None:
        return random.Random()
    identity = {key: row.get(key) for key in ("id", "_ng_task_index", "_ng_rollout_index", *identity_keys)}
    return random.Random(f"{seed}:{orjson.dumps(identity, option=orjson.OPT_SORT_KEYS).decode()}")


def generation_result(
    row: dict[str, Any],
    response: dict[str, Any] | None,
    result: dict[str, Any],
    trace: dict[str, Any],
    failure: str | None,
) -> dict[str, Any]:
    """The row with the stage's answer; a stage that generated nothing is scored 0.0 and says why."""
    answer = {**row, "response": response, "reward": 0.0 if failure else 1.0, "result": result}
    answer["generation_trace"] = trace
    if failure:
        answer["generation_failure"] = failure
    return answer
