"""openai_model: a model server that passes `/v1/responses` and `/v1/chat/completions` to an
OpenAI-compatible upstream (OpenAI itself, or any server speaking the same API).

Compatible with NeMo Gym's openai_model (same config keys, same upstream body: the caller's set fields
over `extra_body`, `model` forced to the served name). Different on purpose: calls are bounded (a deadline
and at most `max_attempts` attempts, backoff honouring `Retry-After`) instead of retrying rate limits
forever; an upstream error reaches the caller with its own status and body instead of a flattened 500;
an answer that is not a valid response object is a 502 naming the problem; the key is kept out of reprs
and error bodies.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.http.upstream import NeMoGymAsyncOpenAI, Upstream, UpstreamCallConfig, validated_answer
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)


class OpenAIModelConfig(BaseResponsesAPIModelConfig, UpstreamCallConfig):
    openai_base_url: str = Field(description="the upstream's base URL, ending in /v1")
    openai_api_key: SecretStr = Field(description="sent as `Authorization: Bearer <key>`; never shown")
    openai_model: str = Field(description="the model name sent upstream, whatever the caller asked for")
    # Headers can carry credentials too (e.g. `api-key` for Azure), so they stay out of reprs.
    openai_default_headers: dict[str, str] = Field(default_factory=dict, repr=False)
    extra_body: dict[str, Any] = Field(default_factory=dict, description="defaults under every request")

    @field_validator("openai_default_headers", "extra_body", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        """Shipped configs often write `extra_body: null`; it means "nothing to add"."""
        return {} if value is None else value


class OpenAIModel(SimpleResponsesAPIModel):
    config: OpenAIModelConfig

    _upstream: Upstream = PrivateAttr()
    _client: NeMoGymAsyncOpenAI | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        config = self.config
        self._upstream = Upstream(config, config.openai_api_key, config.openai_default_headers)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Built here, after `run_webserver()` applied the config's `global_http_*` knobs, so the default
        # deadline is the deployment's and not the library's.
        self._client = self._upstream.client(NeMoGymAsyncOpenAI, self.config.openai_base_url)
        return app

    @property
    def client(self) -> NeMoGymAsyncOpenAI:
        if self._client is None:
            self._client = self._upstream.client(NeMoGymAsyncOpenAI, self.config.openai_base_url)
        return self._client

    def client_for(self, request: Request) -> NeMoGymAsyncOpenAI:
        """The client that carries `request` upstream: the one client here; a subclass may add headers
        of the request's own (switchyard_model's session id)."""
        return self.client

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        client = self.client_for(request)
        answer = await self._call_upstream(client.create_response, body)
        return validated_answer(NeMoGymResponse, answer, client.base_url, "Responses API response")

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        client = self.client_for(request)
        answer = await self._call_upstream(client.create_chat_completion, body)
        return validated_answer(NeMoGymChatCompletion, answer, client.base_url, "chat completion")

    # ---- upstream ---------------------------------------------------------------------------------------

    def upstream_body(self, body: BaseModel) -> dict[str, Any]:
        """Only what the caller set goes upstream (so the upstream's own defaults apply), over the
        configured `extra_body`, with the served model name whatever the caller asked for."""
        caller_fields = body.model_dump(mode="json", exclude_unset=True)
        return {**self.config.extra_body, **caller_fields, "model": self.config.openai_model}

    async def _call_upstream(self, create: Callable[..., Awaitable[Any]], body: BaseModel) -> Any:
        payload = self.upstream_body(body)
        async with self._upstream.call():
            return await create(**payload)


if __name__ == "__main__":
    OpenAIModel.run_webserver()
