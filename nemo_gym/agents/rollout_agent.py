"""The base of agents that run rollouts against one resources server and one policy model server.

Every such agent needs the same plumbing around its own loop: a model call that carries the model server's
cookies from one turn to the next and refuses an answer that is not a Response, usage summed over turns,
a wall-clock deadline per rollout, an optional cap on rollouts running at once, the cookies of both
servers kept apart (`Rollout`), and `/aggregate_metrics` forwarded to the resources server. Agent folders
(simple_agent, gymnasium_agent) subclass `RolloutAgent` and write only their loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from fastapi import FastAPI, Request, Response
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError

from nemo_gym.agents.sessions import DEFAULT_RECEIPT_WINDOW_S, AgentSession, AgentSessionTable
from nemo_gym.config.metrics_bodies import AggregateMetricsRequest
from nemo_gym.config.server_refs import ModelServerRef, ResourcesServerRef
from nemo_gym.http.client import (
    checked_json,
    default_retry_policy,
    raise_for_status,
    request,
    response_cookies,
)
from nemo_gym.http.deadlines import bounded, budget
from nemo_gym.http.errors import GymError
from nemo_gym.http.in_process import LocalResponse
from nemo_gym.http.mcp_tool_calls import call_mcp_tool
from nemo_gym.http.rollout_paths import with_current_rollout_prefix
from nemo_gym.serving.agent_server import BaseResponsesAPIAgentConfig, SimpleResponsesAPIAgent
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.rows import BaseRunRequest
from nemo_gym.wire.sessions import (
    AgentCloseSessionRequest,
    AgentCloseSessionResponse,
    AgentSeedSessionRequest,
    AgentSeedSessionResponse,
    DirectHTTPToolAccess,
    MCPToolAccess,
    ToolAccess,
)
from nemo_gym.wire.validation_errors import first_problem

USAGE_COUNTS = (("input_tokens",), ("output_tokens",), ("total_tokens",))
# What `text_prompt` passes on: chat roles, and content parts that are text.
TEXT_ROLES = frozenset({"system", "developer", "user", "assistant"})
TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
USAGE_DETAIL_COUNTS = (
    ("input_tokens_details", "cached_tokens"),
    ("output_tokens_details", "reasoning_tokens"),
)
# Routes of every resources server that a model must never reach by naming them as a tool.
RESERVED_ROUTES = frozenset({"seed_session", "verify", "aggregate_metrics"})
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class RolloutAgentConfig(BaseResponsesAPIAgentConfig):
    resources_server: ResourcesServerRef
    model_server: ModelServerRef
    rollout_deadline_s: float | None = Field(
        default=None, gt=0, description="wall-clock budget of one rollout; default global_http_deadline_s"
    )
    max_concurrent_rollouts: int | None = Field(
        default=None,
        ge=1,
        description="rollouts this process runs at once; more wait their turn within their deadline. "
        "null = no limit",
    )
    tool_accesses: list[ToolAccess] = Field(
        default=[], description="tool grants of every agent session; a seed's grant of the same name wins"
    )
    session_close_retry_window_seconds: float = Field(
        default=DEFAULT_RECEIPT_WINDOW_S,
        gt=0,
        description="how long a closed agent session's receipt is kept",
    )


class RolloutRunRequest(BaseRunRequest):
    """A task row: `responses_create_params` plus whatever fields its resources server reads."""

    model_config = ConfigDict(extra="allow")


@dataclass
class Rollout:
    """What the loop produced, plus the cookies of both servers so each sees its own session throughout."""

    response: dict[str, Any]
    resources_cookies: dict[str, str]
    model_cookies: dict[str, str] = field(default_factory=dict)
    # In an agent session, tools are called where the session's grant says, not at `resources_server`.
    tool_grant: DirectHTTPToolAccess | MCPToolAccess | None = None
    agent_session: AgentSession | None = None

    @classmethod
    def starting(cls, cookies: dict[str, str]) -> Rollout:
        """A rollout whose first calls to both servers carry the caller's cookies."""
        return cls(response={}, resources_cookies=dict(cookies), model_cookies=dict(cookies))


class RolloutAgent(SimpleResponsesAPIAgent):
    config: RolloutAgentConfig

    _rollout_slots: asyncio.Semaphore | contextlib.nullcontext = PrivateAttr(
        default_factory=contextlib.nullcontext
    )
    _agent_sessions: AgentSessionTable | None = PrivateAttr(default=None)

    @property
    def agent_sessions(self) -> AgentSessionTable:
        if self._agent_sessions is None:
            self._agent_sessions = AgentSessionTable(
                self.config.tool_accesses, receipt_window_s=self.config.session_close_retry_window_seconds
            )
        return self._agent_sessions

    async def seed_agent_session(
        self, request: Request, body: AgentSeedSessionRequest
    ) -> AgentSeedSessionResponse:
        """Open an agent session; its state lives in this process, so the agent must run one worker."""
        if (self.config.num_workers or 1) != 1:
            raise GymError(500, "unsupported", "Agent sessions require num_workers=1")
        self.check_session_grants(self.agent_sessions.effective_accesses(body.tool_accesses), body)
        return self.agent_sessions.seed(body, request.session)

    async def close_agent_session(
        self, request: Request, body: AgentCloseSessionRequest
    ) -> AgentCloseSessionResponse:
        return self.agent_sessions.close(body, request.session)

    def check_session_grants(self, accesses: list[ToolAccess], body: AgentSeedSessionRequest) -> None:
        """Refuse (422) grants this agent's loop cannot use; by default the loop calls its tools through one
        grant (direct HTTP or MCP) and uses no sandbox."""
        problems = []
        if len(accesses) > 1:
            problems.append(f"at most one tool grant, got {[grant.name for grant in accesses]}")
        if body.sandbox_access is not None:
            problems.append(f"{type(self).__name__} takes no sandbox_access")
        if problems:
            raise GymError(422, "unsupported_grant", "; ".join(problems))

    def session_rollout(self, request: Request) -> Rollout:
        """The rollout a `/v1/responses` call starts: inside the agent session its cookie names (tools
        go to the session's grant), or with the caller's cookies."""
        session = self.agent_sessions.active(request.session)
        rollout = Rollout.starting(dict(request.cookies))
        if session is not None:
            rollout.agent_session = session
            rollout.tool_grant = session.tool_grant
            rollout.resources_cookies = dict(session.resources_cookies)
        return rollout

    @staticmethod
    def end_session_rollout(rollout: Rollout) -> None:
        """Keep the resources cookies the session's tools answered with, for its close receipt."""
        if rollout.agent_session is not None:
            rollout.agent_session.resources_cookies = dict(rollout.resources_cookies)

    async def call_tool(self, rollout: Rollout, name: str, arguments: dict[str, Any]) -> bytes:
        """One tool call: over the session's grant (direct HTTP or MCP), or to the configured resources
        server; the answer whatever its status (a refusal is the tool's output), the cookies it set kept."""
        grant = rollout.tool_grant
        if isinstance(grant, MCPToolAccess):
            return (await call_mcp_tool(grant, name, arguments)).encode()
        if grant is None:
            answer = await self.server_client.post(
                self.config.resources_server.name,
                f"/{name}",
                json=arguments,
                cookies=rollout.resources_cookies,
            )
        else:
            answer = await request(
                "POST",
                f"{str(grant.base_url).rstrip('/')}/{name}",
                json=arguments,
                cookies=rollout.resources_cookies,
                headers=grant.headers,
            )
        rollout.resources_cookies = cookies_after(answer, rollout.resources_cookies)
        return await answer.read()

    async def tool_call_output(
        self, call: dict[str, Any], declared_tools: set[str], rollout: Rollout
    ) -> dict[str, Any]:
        """Run one function call (`call_tool`); a call that may not run (`tool_call_refusal`) and any
        refusal of the tool become the tool's output, so the loop goes on."""
        refusal = tool_call_refusal(call, declared_tools)
        if refusal is not None:
            return refusal
        body = await self.call_tool(rollout, call["name"], orjson.loads(call["arguments"] or "{}"))
        return function_call_output(call, body.decode(errors="replace"))

    def setup_webserver(self) -> FastAPI:
        """A burst of rollouts far beyond what the CPU can start at once (say 10,000 arriving together) would
        otherwise begin all their first steps in one go, and hold the event loop long enough for timers of
        the early ones (a 10 s connect timeout) to fire; `max_concurrent_rollouts` keeps the rest queued."""
        if self.config.max_concurrent_rollouts is not None:
            self._rollout_slots = asyncio.Semaphore(self.config.max_concurrent_rollouts)
        return super().setup_webserver()

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Response:
        """Metrics are the resources server's business: forward the request to it."""
        answer = await self.server_client.post(
            self.config.resources_server.name, "/aggregate_metrics", json=body
        )
        await raise_for_status(answer)
        return Response(await answer.read(), media_type="application/json")

    def resources_server_for(self, row: dict[str, Any]) -> str:
        """The resources server instance that seeds and verifies `row`: the configured one. An agent that
        serves the rows of several environments overrides it to pick one per row."""
        return self.config.resources_server.name

    async def seeded_rollout(self, request: Request, row: dict[str, Any]) -> Rollout:
        """`POST /seed_session` on the resources server with the whole row and the caller's cookies; the
        rollout starts with the cookies that answer set."""
        seeded = await self.server_client.post(
            self.resources_server_for(row), "/seed_session", json=row, cookies=request.cookies
        )
        await raise_for_status(seeded)
        return Rollout.starting(cookies_after(seeded, dict(request.cookies)))

    async def seeded_loop_verified(
        self,
        request: Request,
        body: RolloutRunRequest,
        loop: Callable[[dict[str, Any], Rollout], Awaitable[Rollout]],
    ) -> bytes:
        """The rollout of an agent that seeds, runs `loop` (given the row's `responses_create_params` and the
        seeded rollout) and verifies: the verify answer's bytes. Run it within `as_rollout`."""
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await loop(row["responses_create_params"], await self.seeded_rollout(request, row))
        return await self.verified(row, rollout.response, rollout)

    async def verified(self, row: dict[str, Any], response: dict[str, Any], rollout: Rollout) -> bytes:
        """The resources server's `/verify` answer (its bytes) for `row` and `response`, sent with the
        rollout's resources cookies (kept updated); a non-2xx answer raises `HTTPStatusError`. With
        `skip_verification`, the row and response scored `skip_verification_reward` instead."""
        if self.config.skip_verification:
            skipped = {"reward": self.config.skip_verification_reward, "verification_skipped": True}
            return orjson.dumps({**row, "response": response, **skipped})
        answer = await self.server_client.post(
            self.resources_server_for(row),
            "/verify",
            json={**row, "response": response},
            cookies=rollout.resources_cookies,
        )
        rollout.resources_cookies = cookies_after(answer, rollout.resources_cookies)
        await raise_for_status(answer)
        return await answer.read()

    async def model_turn(
        self, server: str, params: dict[str, Any], cookies: dict[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """One `/v1/responses` call of model server `server`: its answer (refused with a 502 unless it is a
        Response) and the cookies to send that server next."""
        path = with_current_rollout_prefix("/v1/responses")  # the rollout's identity travels on
        answer = await self.server_client.post(server, path, json=params, cookies=cookies)
        cookies = cookies_after(answer, cookies)
        turn = await checked_json(answer)
        try:
            NeMoGymResponse.model_validate(turn)
        except ValidationError as error:
            raise GymError(
                502,
                "invalid_model_response",
                f"model server '{server}' answered something that is not a Response: "
                f"{error.error_count()} problem(s), first: {first_problem(error)}",
            ) from error
        return turn, cookies

    async def passed_through(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """`/v1/responses` as one call of `model_server`, within the rollout deadline: the caller's cookies
        go with it, and those the model server sets are set on `response`."""
        answer, cookies = await self.as_rollout(
            self.model_turn(
                self.config.model_server.name,
                body.model_dump(mode="json", exclude_unset=True),
                dict(request.cookies),
            )
        )
        for name, value in cookies.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(answer)

    async def as_rollout(self, work: Coroutine[Any, Any, Any]) -> Any:
        """Run `work` once a rollout slot is free (`max_concurrent_rollouts`), all within the rollout's
        deadline: waiting for the slot counts too, so nothing waits forever. The deadline is the
        configured one, or what the caller said it has left when that is less; the calls `work` makes
        carry what remains of it."""
        deadline_s = bounded(self.config.rollout_deadline_s or default_retry_policy().deadline_s)
        rollout_deadline = asyncio.timeout(deadline_s)
        try:
            # The calls get the same budget: one that hangs until the end fails with a 504 of its own
            # naming that call, or the timer ends the rollout first; either way the caller hears by then.
            async with rollout_deadline:
                with budget(deadline_s):
                    async with self._rollout_slots:
                        return await work
        except TimeoutError as error:
            if not rollout_deadline.expired():
                raise  # a peer's call ran out of its own deadline: its error names the peer
            raise GymError(
                504, "timeout", f"the rollout did not finish within its {round(deadline_s, 2):g}s deadline"
            ) from error
        finally:
            work.close()  # discards it quietly if the deadline came while it was still waiting

    async def loop_responses(
        self,
        request: Request,
        response: Response,
        params: dict[str, Any],
        loop: Callable[[dict[str, Any], Rollout], Awaitable[Rollout]],
    ) -> NeMoGymResponse:
        """`/v1/responses` of an agent whose rollout is `loop`: the loop on `params` without seeding or
        verifying, within the rollout deadline and inside the agent session when one is open; the cookies
        both servers set go back to the caller."""
        rollout = await self.as_rollout(loop(params, self.session_rollout(request)))
        self.end_session_rollout(rollout)
        for name, value in {**rollout.resources_cookies, **rollout.model_cookies}.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(rollout.response)


def cookies_after(answer: aiohttp.ClientResponse | LocalResponse, previous: dict[str, str]) -> dict[str, str]:
    """The cookies to send next: the previous ones updated with those this answer set."""
    return {**previous, **response_cookies(answer)}


def input_items(params: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's `input` as a list of items: a string is one user message (the Responses API allows both)."""
    given = params.get("input", [])
    return [{"role": "user", "content": given, "type": "message"}] if isinstance(given, str) else given


def declared_tool_names(params: dict[str, Any]) -> set[str]:
    """The names of the function tools a request offers; empty when it declares none."""
    return {tool.get("name") for tool in params.get("tools") or [] if tool.get("type") == "function"}


def tool_call_refusal(call: dict[str, Any], declared_tools: set[str]) -> dict[str, Any] | None:
    """The `function_call_output` refusing a call that may not run, or None when it may: a name that is
    not declared (when tools are declared), a resources server route or not a tool name at all, and
    arguments that are not a JSON object."""
    name = call.get("name") or ""
    undeclared = bool(declared_tools) and name not in declared_tools
    if undeclared or name in RESERVED_ROUTES or not TOOL_NAME.match(name):
        available = ", ".join(sorted(declared_tools - RESERVED_ROUTES)) or "none"
        return tool_error_output(call, f"Unknown tool {name!r}. Available tools: {available}")
    try:
        arguments = orjson.loads(call.get("arguments") or "{}")
    except orjson.JSONDecodeError as error:
        return tool_error_output(call, f"Invalid tool call arguments: {error}")
    if not isinstance(arguments, dict):
        return tool_error_output(call, "Invalid tool call arguments: expected a JSON object")
    return None


def function_call_output(call: dict[str, Any], output: str) -> dict[str, Any]:
    """The item answering `call` with `output`."""
    return {"type": "function_call_output", "call_id": call.get("call_id"), "output": output}


def tool_error_output(call: dict[str, Any], message: str) -> dict[str, Any]:
    return function_call_output(call, orjson.dumps({"error": message}).decode())


def marked_incomplete(response: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """`response` as a rollout that ended before an answer: `status: incomplete`, with NeMo Gym 0.7's
    `ng_termination_reason` and `ng_termination_message` in its metadata, so a trainer can tell it apart."""
    metadata = {
        **(response.get("metadata") or {}),
        "ng_termination_reason": reason,
        "ng_termination_message": message,
    }
    return {**response, "status": "incomplete", "metadata": metadata}


def summed_usage(total: dict[str, Any] | None, turn: dict[str, Any] | None) -> dict[str, Any] | None:
    """`total` (changed in place, or a copy of `turn` if it is the first) plus one turn's usage."""
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


def text_prompt(prompt: str | list[dict[str, Any]]) -> list[dict[str, str]]:
    """A Responses `input` as the `{role, content}` text messages a chat-speaking framework (Verifiers,
    Haystack) starts from. Anything such a framework cannot carry faithfully (an item that is not a
    message, an image or file part, a role chat does not have) is refused with a 422 naming the item,
    rather than dropped or reworded."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    messages = []
    for index, item in enumerate(prompt):
        where = f"responses_create_params.input[{index}]"
        if item.get("type", "message") != "message" or item.get("role") not in TEXT_ROLES:
            kind = f"type {item.get('type')!r} role {item.get('role')!r}"
            raise GymError(
                422, "unsupported_input", f"{where}: only text messages can be passed on, got {kind}"
            )
        content = item.get("content")
        if isinstance(content, list) and all(part.get("type") in TEXT_PARTS for part in content):
            content = "".join(part.get("text") or "" for part in content)
        if not isinstance(content, str):
            raise GymError(422, "unsupported_input", f"{where}.content: only text can be passed on")
        messages.append({"role": item["role"], "content": content})
    return messages
