"""Agent servers run rollouts: `/run` does one (seed, model/tool loop, verify); `/v1/responses` the loop only."""

from __future__ import annotations

from fastapi import Body as Body
from fastapi import Depends, FastAPI, Request, Response
from pydantic import Field, PrivateAttr

from nemo_gym.agents.sessions import AGENT_SESSION_COOKIE_KEY as AGENT_SESSION_COOKIE_KEY
from nemo_gym.config.metrics_bodies import AggregateMetrics as AggregateMetrics
from nemo_gym.config.metrics_bodies import AggregateMetricsRequest as AggregateMetricsRequest
from nemo_gym.config.server_instances import BaseRunServerInstanceConfig
from nemo_gym.config.token_id_capture import agent_token_capture
from nemo_gym.envkit.reward_profile import AggregateMetricsMixin
from nemo_gym.http.rollout_paths import capture_key_of_run, enter_rollout, rollout_key_of
from nemo_gym.serving.servers import SimpleServer, new_app
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.rows import BaseRunRequest as BaseRunRequest
from nemo_gym.wire.rows import BaseVerifyResponse as BaseVerifyResponse
from nemo_gym.wire.sessions import AgentCloseSessionRequest as AgentCloseSessionRequest
from nemo_gym.wire.sessions import AgentCloseSessionResponse as AgentCloseSessionResponse
from nemo_gym.wire.sessions import AgentSeedSessionRequest as AgentSeedSessionRequest
from nemo_gym.wire.sessions import AgentSeedSessionResponse as AgentSeedSessionResponse


class BaseResponsesAPIAgentConfig(BaseRunServerInstanceConfig):
    skip_verification: bool = Field(
        default=False, description="NeMo Gym 0.7: no /verify; the result scores skip_verification_reward"
    )
    skip_verification_reward: float = Field(default=0.0, description="the reward of a rollout not verified")
    token_id_capture: bool = Field(
        default=False,
        description="opt this agent's rollouts into the top-level token_id_capture block (when enabled, "
        "its environment server asks the model servers to record each model call's token ids)",
    )


class SimpleResponsesAPIAgent(AggregateMetricsMixin, SimpleServer):
    config: BaseResponsesAPIAgentConfig

    # Whether the deployment's `token_id_capture` covers this agent's rollouts.
    _token_capture: bool = PrivateAttr(default=False)

    def setup_webserver(self) -> FastAPI:
        self._token_capture = agent_token_capture(self.server_client.global_config_dict, self.config.name)
        app = new_app()
        self.setup_session_middleware(app)
        app.post("/v1/responses")(self.responses)
        # Only a captured agent pays for reading the rollout's identity out of each /run body.
        capture = [Depends(self._captured_without_prefix)] if self._token_capture else []
        app.post("/run", dependencies=capture)(self.run)
        app.post("/v1/agent_sessions")(self.seed_agent_session)
        app.post("/v1/agent_sessions/close")(self.close_agent_session)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def _captured_without_prefix(self, request: Request) -> None:
        """A captured agent's `/run` called without a rollout prefix (a 0.4-style collector or trainer, a
        legacy_agent relay) records its model calls under the key the body names, as under a prefix."""
        if rollout_key_of(request) is not None:
            return
        try:
            key = capture_key_of_run(await request.json())
        except ValueError:
            return  # not JSON: the route's own validation answers
        if key is not None:
            enter_rollout(key, token_capture=True)

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement responses()")

    async def run(self, request: Request, body: BaseRunRequest) -> BaseVerifyResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    async def seed_agent_session(
        self, request: Request, body: AgentSeedSessionRequest
    ) -> AgentSeedSessionResponse:
        """NeMo Gym 0.7's agent session, opened by an environment server before the episode's turn."""
        raise NotImplementedError(f"{type(self).__name__} does not support agent sessions")

    async def close_agent_session(
        self, request: Request, body: AgentCloseSessionRequest
    ) -> AgentCloseSessionResponse:
        raise NotImplementedError(f"{type(self).__name__} does not support agent sessions")
