"""Resources servers own the task side of a rollout: tools, per-rollout state, and the reward.

Subclass `SimpleResourcesServer`, declare request models for your tools and `verify`, and add one POST
route per tool in `setup_webserver()` after calling `super().setup_webserver()`.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from pydantic import BaseModel

from nemo_gym.config_types import BaseRunServerInstanceConfig
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.reward_profile import MetricsAggregationMixin
from nemo_gym.server_utils import SimpleServer, new_app


class BaseResourcesServerConfig(BaseRunServerInstanceConfig):
    pass


class BaseRunRequest(BaseModel):
    """A task row as sent to an agent's `/run`; the only required key is `responses_create_params`."""

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming


class BaseVerifyRequest(BaseRunRequest):
    response: NeMoGymResponse


class BaseVerifyResponse(BaseVerifyRequest):
    reward: float


class BaseSeedSessionRequest(BaseModel):
    pass


class BaseSeedSessionResponse(BaseModel):
    pass


class SimpleResourcesServer(MetricsAggregationMixin, SimpleServer):
    config: BaseResourcesServerConfig

    def setup_webserver(self) -> FastAPI:
        """Register the base routes; FastAPI reads body and response models from the (overridden) methods."""
        app = new_app()
        self.setup_session_middleware(app)
        app.post("/seed_session")(self.seed_session)
        app.post("/verify")(self.verify)
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def seed_session(self, request: Request, body: BaseSeedSessionRequest) -> BaseSeedSessionResponse:
        return BaseSeedSessionResponse()

    async def verify(self, request: Request, body: BaseVerifyRequest) -> BaseVerifyResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement verify()")
