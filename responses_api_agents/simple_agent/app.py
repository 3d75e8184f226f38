"""SimpleAgent: the multi-turn tool-calling loop (model turn, run its tool calls, repeat), then verify.

Compatible with NeMo Gym's simple_agent (same routes, request and response shapes, cookie threading),
with these changes: the loop has a default step cap and stops after turns that make no progress; a tool
call the environment cannot serve (unknown tool, reserved route, bad arguments, a 4xx/5xx answer) is
fed back to the model as the tool's output instead of failing the rollout; a rollout has a deadline;
and `/run` runs the loop in-process instead of calling its own `/v1/responses` over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from nemo_gym.base_resources_server import BaseRunRequest
from nemo_gym.base_responses_api_agent import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.config_types import AggregateMetricsRequest, ModelServerRef, ResourcesServerRef
from nemo_gym.errors import GymError
from nemo_gym.http_client import default_retry_policy, get_response_json, raise_for_status, response_cookies
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

DEFAULT_MAX_STEPS = 50
# Routes of every resources server that a model must never reach by naming them as a tool.
RESERVED_ROUTES = frozenset({"seed_session", "verify", "aggregate_metrics"})
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
USAGE_COUNTS = (("input_tokens",), ("output_tokens",), ("total_tokens",))
USAGE_DETAIL_COUNTS = (
    ("input_tokens_details", "cached_tokens"),
    ("output_tokens_details", "reasoning_tokens"),
)


class SimpleAgentConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    max_steps: int | None = Field(
        default=None, ge=0, description=f"model calls per rollout; null or 0 means {DEFAULT_MAX_STEPS}"
    )
    max_idle_turns: int = Field(
        default=2,
        ge=1,
        description="consecutive turns with neither a message nor a tool call before stopping",
    )
    rollout_deadline_s: float | None = Field(
        default=None, gt=0, description="wall-clock budget of one rollout; default global_http_deadline_s"
    )
    max_concurrent_rollouts: int | None = Field(
        default=None,
        ge=1,
        description="rollouts this process runs at once; more wait their turn within their deadline. "
        "null = no limit",
    )


class SimpleAgentRunRequest(BaseRunRequest):
    """A task row: `responses_create_params` plus whatever fields its resources server reads."""

    model_config = ConfigDict(extra="allow")


@dataclass
class Rollout:
    """What the loop produced, plus the cookies of both servers so verify sees the same session."""

    response: dict[str, Any]
    resources_cookies: dict[str, str]
    model_cookies: dict[str, str] = field(default_factory=dict)


class SimpleAgent(SimpleResponsesAPIAgent):
    config: SimpleAgentConfig

    _rollout_slots: asyncio.Semaphore | contextlib.nullcontext = PrivateAttr(
        default_factory=contextlib.nullcontext
    )

    def setup_webserver(self) -> FastAPI:
        """A burst of rollouts far beyond what the CPU can start at once (say 10,000 arriving together) would
        otherwise begin all their first steps in one go, and hold the event loop long enough for timers of
        the early ones (a 10 s connect timeout) to fire; `max_concurrent_rollouts` keeps the rest queued."""
        if self.config.max_concurrent_rollouts is not None:
            self._rollout_slots = asyncio.Semaphore(self.config.max_concurrent_rollouts)
        return super().setup_webserver()

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """The loop without seeding or verifying; the caller's cookies reach both servers."""
        rollout = await self._as_rollout(
            self._loop(body.model_dump(mode="json", exclude_unset=True), dict(request.cookies))
        )
        for name, value in {**rollout.resources_cookies, **rollout.model_cookies}.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)

    async def run(self, request: Request, body: SimpleAgentRunRequest) -> Response:
        """One rollout: seed the session, run the loop, verify; the verify answer is returned as is."""
        return Response(await self._as_rollout(self._run(request, body)), media_type="application/json")

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Response:
        """Metrics are the resources server's business: forward the request to it."""
        answer = await self.server_client.post(
            self.config.resources_server.name, "/aggregate_metrics", json=body
        )
        await raise_for_status(answer)
        return Response(await answer.read(), media_type="application/json")

    # ---- the rollout ------------------------------------------------------------------------------------

    async def _run(self, request: Request, body: SimpleAgentRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        resources = self.config.resources_server.name
        seeded = await self.server_client.post(resources, "/seed_session", json=row, cookies=request.cookies)
        await raise_for_status(seeded)
        rollout = await self._loop(row["responses_create_params"], _cookies_of(seeded, dict(request.cookies)))
        verified = await self.server_client.post(
            resources,
            "/verify",
            json={**row, "response": rollout.response},
            cookies=rollout.resources_cookies,
        )
        await raise_for_status(verified)
        return await verified.read()

    async def _loop(self, params: dict[str, Any], cookies: dict[str, str]) -> Rollout:
        """`params` is the caller's freshly dumped body; it is read, never changed."""
        original_input = params.get("input", [])
        if isinstance(original_input, str):
            original_input = [{"role": "user", "content": original_input, "type": "message"}]
        declared_tools = {
            tool.get("name") for tool in params.get("tools") or [] if tool.get("type") == "function"
        }
        rollout = Rollout(response={}, resources_cookies=dict(cookies), model_cookies=dict(cookies))
        new_items: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        idle_turns = 0
        for _ in range(self.config.max_steps or DEFAULT_MAX_STEPS):
            turn = await self._model_turn({**params, "input": [*original_input, *new_items]}, rollout)
            output = turn.get("output") or []
            new_items.extend(output)
            usage = _summed_usage(usage, turn.get("usage"))
            rollout.response = turn
            if turn.get("incomplete_details"):
                break
            calls = [item for item in output if item.get("type") == "function_call"]
            has_message = any(item.get("type") == "message" for item in output)
            if not calls:
                idle_turns = 0 if has_message else idle_turns + 1
                if has_message or not output or idle_turns >= self.config.max_idle_turns:
                    break
                continue
            idle_turns = 0
            for call in calls:
                new_items.append(await self._tool_output(call, declared_tools, rollout))
        rollout.response = {**rollout.response, "output": new_items, "usage": usage}
        return rollout

    async def _model_turn(self, params: dict[str, Any], rollout: Rollout) -> dict[str, Any]:
        answer = await self.server_client.post(
            self.config.model_server.name, "/v1/responses", json=params, cookies=rollout.model_cookies
        )
        await raise_for_status(answer)
        rollout.model_cookies = _cookies_of(answer, rollout.model_cookies)
        turn = await get_response_json(answer)
        try:
            NeMoGymResponse.model_validate(turn)
        except ValidationError as error:
            raise GymError(
                502,
                "invalid_model_response",
                f"model server '{self.config.model_server.name}' answered something that is not a Response: "
                f"{error.error_count()} problem(s), first: {_first_problem(error)}",
            ) from error
        return turn

    async def _tool_output(
        self, call: dict[str, Any], declared_tools: set[str], rollout: Rollout
    ) -> dict[str, Any]:
        """Run one function call against the resources server; any refusal becomes the tool's output."""
        name = call.get("name", "")
        undeclared = bool(declared_tools) and name not in declared_tools
        if undeclared or name in RESERVED_ROUTES or not TOOL_NAME.match(name):
            available = ", ".join(sorted(declared_tools - RESERVED_ROUTES)) or "none"
            return _function_call_output(
                call, {"error": f"Unknown tool {name!r}. Available tools: {available}"}
            )
        try:
            arguments = orjson.loads(call.get("arguments") or "{}")
        except orjson.JSONDecodeError as error:
            return _function_call_output(call, {"error": f"Invalid tool call arguments: {error}"})
        if not isinstance(arguments, dict):
            return _function_call_output(
                call, {"error": "Invalid tool call arguments: expected a JSON object"}
            )
        answer = await self.server_client.post(
            self.config.resources_server.name, f"/{name}", json=arguments, cookies=rollout.resources_cookies
        )
        rollout.resources_cookies = _cookies_of(answer, rollout.resources_cookies)
        body = await answer.read()
        return {
            "type": "function_call_output",
            "call_id": call.get("call_id"),
            "output": body.decode(errors="replace"),
        }

    async def _as_rollout(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run `work` once a rollout slot is free (`max_concurrent_rollouts`), all within the rollout's
        deadline: waiting for the slot counts too, so nothing waits forever."""
        deadline_s = self.config.rollout_deadline_s or default_retry_policy().deadline_s
        rollout_deadline = asyncio.timeout(deadline_s)
        try:
            async with rollout_deadline, self._rollout_slots:
                return await work
        except TimeoutError as error:
            if not rollout_deadline.expired():
                raise  # a peer's call ran out of its own deadline: its error names the peer
            raise GymError(
                504, "timeout", f"the rollout did not finish within its {deadline_s:g}s deadline"
            ) from error
        finally:
            work.close()  # discards it quietly if the deadline came while it was still waiting


def _function_call_output(call: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": call.get("call_id"),
        "output": orjson.dumps(output).decode(),
    }


def _cookies_of(answer: Any, previous: dict[str, str]) -> dict[str, str]:
    """The cookies to send next: the previous ones updated with those this answer set."""
    return {**previous, **response_cookies(answer)}


def _summed_usage(total: dict[str, Any] | None, turn: dict[str, Any] | None) -> dict[str, Any] | None:
    if turn is None:
        return total
    if total is None:
        return copy.deepcopy(turn)
    for path in (*USAGE_COUNTS, *USAGE_DETAIL_COUNTS):
        _add_at(total, turn, path)
    return total


def _add_at(total: dict[str, Any], turn: dict[str, Any], path: tuple[str, ...]) -> None:
    *parents, leaf = path
    for key in parents:
        total[key] = total.get(key) or {}
        total, turn = total[key], turn.get(key) or {}
    total[leaf] = (total.get(leaf) or 0) + (turn.get(leaf) or 0)


def _first_problem(error: ValidationError) -> str:
    problem = error.errors()[0]
    return f"{'.'.join(map(str, problem['loc']))}: {problem['msg']}"


if __name__ == "__main__":
    SimpleAgent.run_webserver()
