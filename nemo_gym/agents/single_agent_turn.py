"""NeMo Gym 0.7's single-agent-turn episode: the protocol `environment_servers/single_agent_turn` serves
(and `single_agent_turn_legacy` behind flat rows).

One `/run` is one episode, step by step: open a resources session (typed seed), grant its tools to the
agent (`direct_http`: call the resources server's routes with the session's cookies; `mcp`: call them over
the server's MCP endpoint), open an agent session, run the agent's one `/v1/responses` turn under the
episode's rollout prefix, close the agent session (taking its observations and the resources cookies it
ended with), verify, and return the verify answer. Both sessions are registered for cleanup before they
are opened, so they are closed whatever happens. A failure names its stage and whether a retry can help
(timeouts, connection drops and 408/425/429/5xx answers can; anything else cannot).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import PrivateAttr, ValidationError

from nemo_gym.agents.rollout_agent import cookies_after
from nemo_gym.config.metrics_bodies import AggregateMetricsRequest
from nemo_gym.config.server_refs import AgentServerRef, ResourcesServerRef
from nemo_gym.config.token_id_capture import agent_token_capture
from nemo_gym.http.client import HTTPStatusError, RequestFailedError, checked_json, raise_for_status
from nemo_gym.http.errors import GymError
from nemo_gym.http.rollout_paths import rollout_path_prefix
from nemo_gym.serving.environment_server import (
    BaseEnvironmentServer,
    BaseEnvironmentServerConfig,
    CleanupContext,
    HandledEpisodeError,
)
from nemo_gym.wire.episodes import (
    FailureStage,
    SingleAgentTurnFailure,
    SingleAgentTurnRequest,
    SingleAgentTurnResponse,
    SingleAgentTurnResult,
    shortened_reason,
)
from nemo_gym.wire.responses import NeMoGymResponse
from nemo_gym.wire.sessions import (
    AgentCloseSessionResponse,
    DirectHTTPToolAccess,
    MCPToolAccess,
    ResourcesSeedSessionResponse,
    ToolAccess,
)

RETRYABLE_STATUSES = frozenset({408, 425, 429})
ToolTransport = Literal["direct_http", "mcp"]


class SingleAgentTurnEnvironmentServerConfig(BaseEnvironmentServerConfig):
    resources_server: ResourcesServerRef
    agent_server: AgentServerRef
    resources_tool_transports: list[ToolTransport] = []


class SingleAgentTurnEnvironmentServer(BaseEnvironmentServer):
    config: SingleAgentTurnEnvironmentServerConfig
    request_model = SingleAgentTurnRequest
    response_model = SingleAgentTurnResponse

    # Whether the agent's turn is called under `/training-token-capture`, so its model calls are recorded.
    _token_capture: bool = PrivateAttr(default=False)

    def setup_webserver(self) -> FastAPI:
        """Read once whether the deployment's `token_id_capture` covers this agent (a bad block fails the start)."""
        self._token_capture = agent_token_capture(
            self.server_client.global_config_dict, self.config.agent_server.name
        )
        return super().setup_webserver()

    @property
    def token_capture(self) -> bool:
        return self._token_capture

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Any:
        """Metrics are the resources server's: the request is forwarded to it."""
        return await checked_json(
            await self.server_client.post(self.config.resources_server.name, "/aggregate_metrics", json=body)
        )

    async def run(self, request: SingleAgentTurnRequest, cleanup: CleanupContext) -> SingleAgentTurnResponse:
        return await _Episode(self, request, cleanup).run()


class _Episode:
    """The state of one episode: the two sessions' ids and cookies, and how far it got."""

    def __init__(
        self,
        server: SingleAgentTurnEnvironmentServer,
        request: SingleAgentTurnRequest,
        cleanup: CleanupContext,
    ) -> None:
        self.server = server
        self.client = server.server_client
        self.request = request
        self.cleanup = cleanup
        self.resources = server.config.resources_server.name
        self.agent = server.config.agent_server.name
        self.resources_session_id = f"resources-session-{uuid.uuid4().hex}"
        self.agent_session_id = f"agent-session-{uuid.uuid4().hex}"
        self.resources_cookies: dict[str, str] = {}
        self.agent_cookies: dict[str, str] = {}
        self.partial_response: NeMoGymResponse | None = None

    @property
    def identity(self) -> dict[str, Any]:
        return {"episode_id": self.request.episode_id.model_dump(mode="json")}

    async def run(self) -> SingleAgentTurnResponse:
        self.cleanup.register_cleanup("resources session", self._close_resources_session)
        seeded = await self._stage("seed", self._seed_resources_session())
        grants = await self._stage("seed", self._tool_grants(seeded))
        agent_close = self.cleanup.register_cleanup("agent session", self._close_agent_session)
        await self._stage("agent", self._seed_agent_session(grants, seeded))
        self.partial_response = await self._stage("agent", self._agent_turn())
        closed = await self._stage("cleanup", agent_close.close())
        if closed.resources_cookies is not None:
            self.resources_cookies = dict(closed.resources_cookies)
        result = await self._stage("verification", self._verify())
        result.ng_agent_observations = closed.agent_observations
        return SingleAgentTurnResponse(
            episode_id=self.request.episode_id, task_id=self.request.task.task_id, result=result
        )

    async def _stage(self, stage: FailureStage, step: Any) -> Any:
        """Await one step; any error becomes this stage's failure."""
        try:
            return await step
        except HandledEpisodeError:
            raise
        except Exception as error:  # noqa: BLE001 - classified below, never lost
            raise HandledEpisodeError(self._failure(stage, error)) from error

    def _failure(self, stage: FailureStage, error: Exception) -> SingleAgentTurnFailure:
        return SingleAgentTurnFailure(
            failure_reason=shortened_reason(f"{stage} failed: {_described(error)}"),
            terminal=not _retryable(error),
            stage=stage,
            partial_response=self.partial_response,
        )

    # ---- the steps ------------------------------------------------------------------------------------

    async def _seed_resources_session(self) -> ResourcesSeedSessionResponse:
        task = self.request.task
        answer = await self.client.post(
            self.resources,
            "/seed_session",
            json={
                "resources_session_id": self.resources_session_id,
                **self.identity,
                "task_id": task.task_id.model_dump(mode="json"),
                "task_data": task.task_input.task_data,
            },
        )
        seeded = ResourcesSeedSessionResponse.model_validate(await checked_json(answer))
        self.resources_cookies = cookies_after(answer, {})
        if not self.resources_cookies:
            raise GymError(502, "protocol", f"resources server '{self.resources}' set no session cookie")
        if seeded.resources_session_id != self.resources_session_id:
            raise GymError(
                502,
                "protocol",
                f"resources server '{self.resources}' answered session {seeded.resources_session_id!r}, "
                f"not {self.resources_session_id!r}",
            )
        return seeded

    async def _tool_grants(self, seeded: ResourcesSeedSessionResponse) -> list[ToolAccess]:
        grants: list[ToolAccess] = []
        base_url = self.client.server_base_url(self.resources)
        for transport in self.server.config.resources_tool_transports:
            if transport == "direct_http":
                grants.append(
                    DirectHTTPToolAccess(
                        name=f"{self.resources}.direct_http",
                        required=True,
                        base_url=base_url,
                        cookies=self.resources_cookies,
                    )
                )
                continue
            tools = seeded.resources_tools
            if tools is None or tools.transport != "http":
                raise GymError(
                    422,
                    "protocol",
                    f"resources server '{self.resources}' gave no MCP endpoint over http for this session "
                    "(is expose_tools_over_mcp set?)",
                )
            grants.append(
                MCPToolAccess(
                    name=tools.server_name,
                    required=True,
                    connection={"url": f"{base_url}{tools.url_path}", "headers": tools.headers},
                )
            )
        return grants

    async def _seed_agent_session(
        self, grants: list[ToolAccess], seeded: ResourcesSeedSessionResponse
    ) -> None:
        answer = await self.client.post(
            self.agent,
            "/v1/agent_sessions",
            json={
                "agent_session_id": self.agent_session_id,
                **self.identity,
                "task_id": self.request.task.task_id.model_dump(mode="json"),
                "tool_accesses": [grant.model_dump(mode="json") for grant in grants],
                "sandbox_access": seeded.sandbox_access.model_dump(mode="json")
                if seeded.sandbox_access
                else None,
            },
        )
        await raise_for_status(answer)
        self.agent_cookies = cookies_after(answer, {})

    async def _agent_turn(self) -> NeMoGymResponse:
        params = self.request.task.task_input.responses_create_params
        prefix = rollout_path_prefix(
            self.request.episode_id.capture_key, token_capture=self.server.token_capture
        )
        answer = await self.client.post(
            self.agent,
            f"{prefix}/v1/responses",
            json=params.model_dump(mode="json", exclude_unset=True),
            cookies=self.agent_cookies,
        )
        self.agent_cookies = cookies_after(answer, self.agent_cookies)
        return NeMoGymResponse.model_validate(await checked_json(answer))

    async def _close_agent_session(self) -> AgentCloseSessionResponse:
        answer = await self.client.post(
            self.agent,
            "/v1/agent_sessions/close",
            json={"agent_session_id": self.agent_session_id, **self.identity},
            cookies=self.agent_cookies,
        )
        return AgentCloseSessionResponse.model_validate(await checked_json(answer))

    async def _verify(self) -> SingleAgentTurnResult:
        task_input = self.request.task.task_input
        body = {
            **task_input.task_data,
            "responses_create_params": task_input.responses_create_params.model_dump(
                mode="json", exclude_unset=True
            ),
            "response": self.partial_response.model_dump(mode="json", exclude_unset=True),
        }
        answer = await self.client.post(self.resources, "/verify", json=body, cookies=self.resources_cookies)
        return SingleAgentTurnResult.model_validate(await checked_json(answer))

    async def _close_resources_session(self) -> None:
        answer = await self.client.post(
            self.resources,
            "/close_session",
            json={"resources_session_id": self.resources_session_id, **self.identity},
            cookies=self.resources_cookies,
        )
        await raise_for_status(answer)


def _retryable(error: Exception) -> bool:
    if isinstance(error, HTTPStatusError):
        return error.status in RETRYABLE_STATUSES or error.status >= 500
    return isinstance(error, RequestFailedError | TimeoutError | ConnectionError)


def _described(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return f"the answer did not validate: {error.error_count()} problem(s), first: {error.errors()[0]}"
    if isinstance(error, GymError | HTTPStatusError | RequestFailedError):
        return str(error)
    return f"{type(error).__name__}: {error}"
