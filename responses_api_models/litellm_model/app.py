"""litellm_model: openai_model in front of a LiteLLM proxy (`/v1/responses`, `/v1/chat/completions`).

NeMo Gym's litellm_model keys are openai_model's. Before serving, the proxy must say on
`/health/readiness/details` that it runs LiteLLM 1.83.0 or later (version_check.py), since two earlier
releases stole credentials; the key goes there as `Authorization: Bearer` and `x-litellm-key` (model
calls send the bearer token only). A `/responses` answer is normalised from the proxy's known quirks
(normalise.py) before it is checked like openai_model's.
"""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, Request
from pydantic import Field

from nemo_gym.http.client import close_global_aiohttp_client
from nemo_gym.http.upstream import validated_answer
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from responses_api_models.litellm_model.normalise import normalised_response
from responses_api_models.litellm_model.version_check import check_proxy_version
from responses_api_models.openai_model.app import OpenAIModel, OpenAIModelConfig

logger = logging.getLogger("litellm_model")
LITELLM_KEY_HEADER = "x-litellm-key"


class LiteLLMModelConfig(OpenAIModelConfig):
    verify_proxy_version: bool = Field(
        default=True,
        description="check the proxy's LiteLLM version before serving; false only for a proxy that hides "
        "/health/readiness/details and whose version you have checked yourself",
    )


class LiteLLMModel(OpenAIModel):
    config: LiteLLMModelConfig

    def setup_webserver(self) -> FastAPI:
        """The version is checked here, before the server listens, so an unsafe proxy stops the start with
        one line (a config error) instead of failing the first call."""
        app = super().setup_webserver()
        if self.config.verify_proxy_version:
            version = asyncio.run(self._proxy_version())
            logger.info("LiteLLM proxy version %s is safe to use", ".".join(map(str, version)))
        return app

    async def _proxy_version(self) -> tuple[int, int, int]:
        key = self.config.openai_api_key.get_secret_value()
        headers = {
            **self.config.openai_default_headers,
            "Authorization": f"Bearer {key}",
            LITELLM_KEY_HEADER: key,
        }
        try:
            return await check_proxy_version(self.config.openai_base_url, headers)
        finally:
            await close_global_aiohttp_client()  # this loop ends here; serving runs on another

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        client = self.client_for(request)
        answer = await self._call_upstream(client.create_response, body)
        fixed = normalised_response(answer, body, self.config.openai_model, client.base_url)
        return validated_answer(NeMoGymResponse, fixed, client.base_url, "Responses API response")


if __name__ == "__main__":
    LiteLLMModel.run_webserver()
