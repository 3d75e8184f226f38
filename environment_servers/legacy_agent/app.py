"""legacy_agent: the environment server in front of an agent written for NeMo Gym 0.4.

It relays: `/run` goes to the agent's `/run` with the caller's body, headers and cookies, and the agent's
answer (status, body, headers, every Set-Cookie) comes back as it was, so the agent's wire contract is
exactly 0.4's. `/aggregate_metrics` goes to the agent too. The episode limits of other environment
servers are accepted in its config for compatibility, and warned about, since a relay enforces none.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request, Response
from pydantic import ConfigDict, PositiveFloat, PositiveInt, model_validator

from nemo_gym.config_types import AgentServerRef, BaseRunServerInstanceConfig
from nemo_gym.http.client import RetryPolicy, default_retry_policy
from nemo_gym.http.deadlines import DEADLINE_HEADER
from nemo_gym.server_utils import SimpleServer, new_app

logger = logging.getLogger("nemo_gym.legacy_agent")

# Hop-by-hop and framing headers, which belong to each connection rather than to the message; the
# caller's deadline is announced afresh by the relay's own call.
SKIPPED_HEADERS = frozenset(
    {
        "connection",
        "content-encoding",
        "content-length",
        "cookie",
        "host",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
        DEADLINE_HEADER.lower(),
    }
)
# The agent's own deadline ends a rollout; the relay waits a little longer so the agent's answer gets through.
RELAY_DEADLINE_MARGIN_S = 30.0
NO_EFFECT_SETTINGS = (
    "max_concurrent_episodes",
    "queue_timeout_seconds",
    "default_episode_timeout_seconds",
    "cleanup_timeout_seconds",
)


class LegacyAgentEnvironmentServerConfig(BaseRunServerInstanceConfig):
    model_config = ConfigDict(extra="forbid")

    agent_server: AgentServerRef
    max_concurrent_episodes: PositiveInt | None = None
    queue_timeout_seconds: PositiveFloat | None = None
    default_episode_timeout_seconds: PositiveFloat | None = 21600
    cleanup_timeout_seconds: PositiveFloat = 180

    @model_validator(mode="after")
    def _warn_about_settings_without_effect(self) -> LegacyAgentEnvironmentServerConfig:
        given = sorted(self.model_fields_set & set(NO_EFFECT_SETTINGS))
        if given:
            logger.warning("%s: %s has no effect on a legacy_agent relay", self.name, ", ".join(given))
        return self


class LegacyAgentEnvironmentServer(SimpleServer):
    config: LegacyAgentEnvironmentServerConfig

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        app.post("/run")(self.run)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def run(self, request: Request) -> Response:
        return await self._relay(request, "/run")

    async def aggregate_metrics(self, request: Request) -> Response:
        return await self._relay(request, "/aggregate_metrics")

    async def _relay(self, request: Request, path: str) -> Response:
        answer = await self.server_client.post(
            self.config.agent_server.name,
            path,
            data=await request.body(),
            headers={name: value for name, value in request.headers.items() if name not in SKIPPED_HEADERS},
            cookies=dict(request.cookies),
            retry_policy=RetryPolicy(
                max_attempts=1, deadline_s=default_retry_policy().deadline_s + RELAY_DEADLINE_MARGIN_S
            ),
        )
        body = await answer.read()
        response = Response(body, status_code=answer.status)
        for name, value in answer.headers.items():
            if name.lower() not in SKIPPED_HEADERS:
                response.headers.append(name, value)
        return response


if __name__ == "__main__":
    LegacyAgentEnvironmentServer.run_webserver()
