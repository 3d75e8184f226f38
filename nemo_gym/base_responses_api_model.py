"""Model servers are OpenAI-compatible façades (`/v1/responses`, `/v1/chat/completions`) over an upstream."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import Body as Body
from fastapi import FastAPI, Request
from pydantic import BaseModel, ConfigDict

from nemo_gym.config.token_id_capture import token_id_capture_config
from nemo_gym.config_types import BaseRunServerInstanceConfig
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.server_utils import SimpleServer, new_app
from nemo_gym.token_capture import CaptureFiles, TokenCaptureMiddleware, captured_routes

logger = logging.getLogger("nemo_gym.token_capture")


class NonGeneratingRequest(BaseModel):
    """A route of this server whose answer carries no policy tokens, so training-token capture skips it."""

    model_config = ConfigDict(extra="forbid")

    method: str
    path: str


class BaseResponsesAPIModelConfig(BaseRunServerInstanceConfig):
    token_id_capture_non_generating_requests: list[NonGeneratingRequest] = []


class SimpleResponsesAPIModel(SimpleServer):
    config: BaseResponsesAPIModelConfig

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        self.setup_session_middleware(app)
        self.setup_token_capture(app)
        app.post("/v1/chat/completions")(self.chat_completions)
        app.post("/v1/responses")(self.responses)
        return app

    def setup_token_capture(self, app: FastAPI) -> None:
        """With the deployment's `token_id_capture` enabled, record the calls that ask for capture."""
        capture = token_id_capture_config(self.server_client.global_config_dict)
        if not capture.enabled:
            return
        directory = Path(capture.dir)
        directory.mkdir(parents=True, exist_ok=True)  # an unwritable place fails the start, not each call
        skipped = [
            (route.method, route.path) for route in self.config.token_id_capture_non_generating_requests
        ]
        files = CaptureFiles(directory, captured_routes(skipped))
        app.add_middleware(TokenCaptureMiddleware, files=files, server_label=self.server_label)
        logger.info(
            "%s: training-token capture records into %s/<rollout key>.jsonl%s",
            self.config.name,
            directory,
            " (call indices count per worker process)" if (self.config.num_workers or 1) > 1 else "",
        )

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        raise NotImplementedError(f"{type(self).__name__} must implement chat_completions()")

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement responses()")
