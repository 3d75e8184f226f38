"""openai_model: a model server that passes `/v1/responses` and `/v1/chat/completions` to an
OpenAI-compatible upstream (OpenAI itself, or any server speaking the same API).

Compatible with NeMo Gym's openai_model (same config keys, same upstream body: the caller's set fields
over `extra_body`, `model` forced to the served name). Different on purpose: calls are bounded (a deadline
and at most `max_retries` attempts, backoff honouring `Retry-After`) instead of retrying rate limits
forever; an upstream error reaches the caller with its own status and body instead of a flattened 500;
an answer that is not a valid response object is a 502 naming the problem; the key is kept out of reprs
and error bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field, PrivateAttr, SecretStr, ValidationError, field_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.errors import GymError
from nemo_gym.http_client import HTTPStatusError, default_retry_policy
from nemo_gym.openai_utils import (
    NeMoGymAsyncOpenAI,
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)

DEFAULT_MAX_RETRIES = 5
# Keys shorter than this are placeholders ("EMPTY", "dummy"); scrubbing them out of error bodies would
# only mangle unrelated text.
MIN_SCRUBBED_KEY_CHARS = 8
MAX_REPORTED_PROBLEMS = 3

AnswerModel = TypeVar("AnswerModel", bound=BaseModel)


class OpenAIModelConfig(BaseResponsesAPIModelConfig):
    openai_base_url: str = Field(description="the upstream's base URL, ending in /v1")
    openai_api_key: SecretStr = Field(description="sent as `Authorization: Bearer <key>`; never shown")
    openai_model: str = Field(description="the model name sent upstream, whatever the caller asked for")
    # Headers can carry credentials too (e.g. `api-key` for Azure), so they stay out of reprs.
    openai_default_headers: dict[str, str] = Field(default_factory=dict, repr=False)
    extra_body: dict[str, Any] = Field(default_factory=dict, description="defaults under every request")
    max_concurrent_requests: int | None = Field(
        default=None, ge=1, description="upstream calls in flight per server process; null = no cap"
    )
    max_retries: int = Field(
        default=DEFAULT_MAX_RETRIES, ge=1, description="attempts per call in all, first one included"
    )
    timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="deadline of one call, retries included; null = global_http_deadline_s",
    )

    @field_validator("openai_default_headers", "extra_body", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        """Shipped configs often write `extra_body: null`; it means "nothing to add"."""
        return {} if value is None else value


class OpenAIModel(SimpleResponsesAPIModel):
    config: OpenAIModelConfig

    _client: NeMoGymAsyncOpenAI | None = PrivateAttr(default=None)
    _semaphore: asyncio.Semaphore | None = PrivateAttr(default=None)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._client = self._make_client()
        if self.config.max_concurrent_requests is not None:
            self._semaphore = asyncio.Semaphore(self.config.max_concurrent_requests)
        return app

    def _make_client(self) -> NeMoGymAsyncOpenAI:
        """Built at setup, after `run_webserver()` applied the config's `global_http_*` knobs, so the
        default deadline is the deployment's and not the library's."""
        return NeMoGymAsyncOpenAI(
            base_url=self.config.openai_base_url,
            api_key=self.config.openai_api_key.get_secret_value(),
            default_headers=self.config.openai_default_headers,
            max_retries=self.config.max_retries,
            timeout=self.config.timeout_s or default_retry_policy().deadline_s,
        )

    @property
    def client(self) -> NeMoGymAsyncOpenAI:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        answer = await self._call_upstream(self.client.create_response, body)
        return self._validated(NeMoGymResponse, answer, "Responses API response")

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        answer = await self._call_upstream(self.client.create_chat_completion, body)
        return self._validated(NeMoGymChatCompletion, answer, "chat completion")

    # ---- upstream ---------------------------------------------------------------------------------------

    def upstream_body(self, body: BaseModel) -> dict[str, Any]:
        """Only what the caller set goes upstream (so the upstream's own defaults apply), over the
        configured `extra_body`, with the served model name whatever the caller asked for."""
        caller_fields = body.model_dump(mode="json", exclude_unset=True)
        return {**self.config.extra_body, **caller_fields, "model": self.config.openai_model}

    async def _call_upstream(self, create: Callable[..., Awaitable[Any]], body: BaseModel) -> Any:
        payload = self.upstream_body(body)
        limit = self._semaphore if self._semaphore is not None else contextlib.nullcontext()
        try:
            async with limit:
                return await create(**payload)
        except HTTPStatusError as error:
            # Re-raised as is: the error middleware answers the caller with the upstream's status and body.
            self._scrub(error)
            raise

    def _scrub(self, error: HTTPStatusError) -> None:
        """The upstream's error body goes to the caller and the logs: mask any echo of the key in it
        (the error object itself keeps no request headers)."""
        key = self.config.openai_api_key.get_secret_value()
        if len(key) >= MIN_SCRUBBED_KEY_CHARS:
            error.response_content = error.response_content.replace(key.encode(), b"****")

    def _validated(self, model: type[AnswerModel], answer: Any, what: str) -> AnswerModel:
        """A 2xx answer that is not what the API promises is the upstream's fault: 502, with the first
        problems named, instead of a bare 500 from deep inside the response serialisation."""
        try:
            return model.model_validate(answer)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc'])) or '<root>'}: {problem['msg']}"
                for problem in error.errors()[:MAX_REPORTED_PROBLEMS]
            )
            raise GymError(
                502,
                "bad_upstream_response",
                f"upstream {self.config.openai_base_url} returned an invalid {what} "
                f"({error.error_count()} problem(s)): {problems}",
            ) from None


if __name__ == "__main__":
    OpenAIModel.run_webserver()
