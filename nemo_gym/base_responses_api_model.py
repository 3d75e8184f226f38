"""Model servers are OpenAI-compatible façades (`/v1/responses`, `/v1/chat/completions`) over an upstream."""

from __future__ import annotations

from fastapi import Body as Body
from fastapi import FastAPI, Request

from nemo_gym.config_types import BaseRunServerInstanceConfig
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.server_utils import SimpleServer, new_app


class BaseResponsesAPIModelConfig(BaseRunServerInstanceConfig):
    # NeMo Gym 0.7's routes that cannot carry policy tokens under its token_id_capture (not implemented here).
    token_id_capture_non_generating_requests: list[dict[str, str]] = []


class SimpleResponsesAPIModel(SimpleServer):
    config: BaseResponsesAPIModelConfig

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        self.setup_session_middleware(app)
        app.post("/v1/chat/completions")(self.chat_completions)
        app.post("/v1/responses")(self.responses)
        return app

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        raise NotImplementedError(f"{type(self).__name__} must implement chat_completions()")

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement responses()")
