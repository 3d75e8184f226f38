"""vllm_model: the Responses API on top of an OpenAI-compatible Chat Completions server (vLLM).

`/v1/responses` converts the request to a chat completion (see conversion.py), calls the upstream's
`/chat/completions`, and converts the answer back into Responses output items. `/v1/chat/completions`
goes upstream with the same server defaults (served model, extra_body, chat_template_kwargs).

Compatible with NeMo Gym's vllm_model (same config keys and conversion rules). Different on purpose:
calls are bounded (deadline, `max_retries`), upstream errors keep their status, the session -> replica map
is bounded (LRU) instead of growing for the life of the process, and requests the conversion cannot
express are a 400 naming the item instead of being dropped.

Training mode (`return_token_id_information: true`: token ids and log-probs on the output items) is not
implemented yet; the server refuses to start with it rather than serve turns without the token data a
trainer relies on. It belongs in `_complete` (logprob flags and the `/tokenize` call, per replica) and in
`conversion.chat_completion_to_response` / `conversion.AssistantTurn` (attaching the token fields).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from typing import Any

import orjson
from fastapi import FastAPI, Request
from pydantic import Field, PrivateAttr, SecretStr, ValidationError, field_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.config_types import ConfigError
from nemo_gym.errors import GymError
from nemo_gym.http_client import HTTPStatusError, default_retry_policy
from nemo_gym.openai_utils import (
    NeMoGymAsyncOpenAI,
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.sessions import get_session_id
from responses_api_models.vllm_model import conversion

DEFAULT_MAX_RETRIES = 5
DEFAULT_MAX_TRACKED_SESSIONS = 100_000
# vLLM answers 400 with one of these when the prompt plus max_tokens does not fit the context window.
CONTEXT_LENGTH_MARKERS = ("context length", "max_tokens")
# Placeholder keys ("EMPTY", "dummy") are too short to be secrets; masking them would garble error text.
MIN_MASKED_KEY_CHARS = 8
MAX_REPORTED_PROBLEMS = 3


class VLLMModelConfig(BaseResponsesAPIModelConfig):
    """Settings of one vllm_model instance; README.md explains each key."""

    # Where and what to call.
    base_url: list[str] = Field(min_length=1)
    api_key: SecretStr
    model: str
    default_headers: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold credentials
    # How the upstream's chat template and reasoning parser behave.
    uses_reasoning_parser: bool
    uses_interleaved_reasoning: bool = True
    replace_developer_role_with_system: bool = False
    sequential_reasoning_allowed: bool = True
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # Training mode: accepted as a key, refused at startup until it is implemented.
    return_token_id_information: bool = False
    # Bounds: per call (attempts, deadline) and per process (calls in flight, remembered sessions).
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    max_concurrent_requests: int | None = Field(default=None, ge=1)
    max_tracked_sessions: int = Field(default=DEFAULT_MAX_TRACKED_SESSIONS, ge=1)

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_url_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("chat_template_kwargs", "extra_body", "default_headers", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        """The shipped YAML writes `extra_body: null` for "nothing to add"."""
        return {} if value is None else value


class ReplicaRouter:
    """Pins each session (one rollout) to one replica, so every turn of a rollout hits the replica that
    already holds its prefix in cache; new sessions are dealt round-robin. The pins are an LRU of bounded
    size: a session idle long enough to be evicted is simply dealt again."""

    def __init__(self, replica_count: int, max_sessions: int) -> None:
        self.replica_count = replica_count
        self.max_sessions = max_sessions
        self._pins: OrderedDict[str, int] = OrderedDict()
        self._dealt = 0

    def replica_for(self, session_id: str) -> int:
        if self.replica_count == 1:
            return 0
        replica = self._pins.get(session_id)
        if replica is not None:
            self._pins.move_to_end(session_id)
            return replica
        replica = self._dealt % self.replica_count
        self._dealt += 1
        self._pins[session_id] = replica
        if len(self._pins) > self.max_sessions:
            self._pins.popitem(last=False)
        return replica


def is_context_length_error(error: HTTPStatusError) -> bool:
    text = error.response_content.decode("utf-8", errors="replace").lower()
    return error.status == 400 and any(marker in text for marker in CONTEXT_LENGTH_MARKERS)


class VLLMModel(SimpleResponsesAPIModel):
    config: VLLMModelConfig

    _clients: list[NeMoGymAsyncOpenAI] = PrivateAttr(default_factory=list)
    _router: ReplicaRouter | None = PrivateAttr(default=None)
    _semaphore: asyncio.Semaphore | None = PrivateAttr(default=None)
    _reasoning: conversion.ReasoningHandling = PrivateAttr()
    _defaults: conversion.ServerDefaults = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """The conversion settings are fixed by the config, so they are made once."""
        config = self.config
        self._reasoning = conversion.ReasoningHandling(
            config.uses_reasoning_parser, config.uses_interleaved_reasoning
        )
        self._defaults = conversion.ServerDefaults(
            config.model,
            config.chat_template_kwargs,
            config.extra_body,
            config.replace_developer_role_with_system,
        )

    def setup_webserver(self) -> FastAPI:
        if self.config.return_token_id_information:
            raise ConfigError(
                "return_token_id_information: true (training mode) is not implemented by vllm_model yet; "
                "set it to false"
            )
        app = super().setup_webserver()
        # Built here, after `run_webserver()` applied the config's `global_http_*` knobs.
        self._clients = [self._make_client(url) for url in self.config.base_url]
        self._router = ReplicaRouter(len(self._clients), self.config.max_tracked_sessions)
        if self.config.max_concurrent_requests is not None:
            self._semaphore = asyncio.Semaphore(self.config.max_concurrent_requests)
        return app

    def _make_client(self, base_url: str) -> NeMoGymAsyncOpenAI:
        return NeMoGymAsyncOpenAI(
            base_url=base_url,
            api_key=self.config.api_key.get_secret_value(),
            default_headers=self.config.default_headers,
            max_retries=self.config.max_retries,
            timeout=self.config.timeout_s or default_retry_policy().deadline_s,
        )

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        try:
            chat_body = conversion.responses_to_chat_body(body, self._reasoning)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None
        completion = await self._complete(request, chat_body)
        try:
            answer = conversion.chat_completion_to_response(
                body,
                completion,
                served_model=self.config.model,
                uses_reasoning_parser=self.config.uses_reasoning_parser,
                created_at=time.time(),
            )
        except conversion.UpstreamReplyError as error:
            raise GymError(502, "bad_upstream_response", str(error)) from None
        return NeMoGymResponse.model_validate(answer)

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        return await self._complete(request, body.model_dump(mode="json", exclude_unset=True))

    # ---- upstream ---------------------------------------------------------------------------------------

    async def _complete(self, request: Request, chat_body: dict[str, Any]) -> NeMoGymChatCompletion:
        """One chat completion from the session's replica, with the two answers that are not generated:
        a forbidden continuation of an empty assistant turn, and a prompt that does not fit."""
        try:
            payload = conversion.apply_server_defaults(chat_body, self._defaults)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None
        if not self.config.sequential_reasoning_allowed and conversion.ends_with_empty_assistant_turn(
            payload["messages"]
        ):
            return self._empty_completion("content_filter")
        client = self._client_for(request)
        limit = self._semaphore if self._semaphore is not None else contextlib.nullcontext()
        try:
            async with limit:
                answer = await client.create_chat_completion(**payload)
        except HTTPStatusError as error:
            if is_context_length_error(error):
                return self._empty_completion("length")
            # Re-raised as is: the error middleware answers with the upstream's status and body.
            self._mask_key(error)
            raise
        except orjson.JSONDecodeError as error:
            raise GymError(
                502, "bad_upstream_response", f"upstream {client.base_url} sent invalid JSON: {error}"
            ) from None
        return self._parsed_completion(answer, client.base_url)

    def _client_for(self, request: Request) -> NeMoGymAsyncOpenAI:
        if self._router is None:
            raise RuntimeError("VLLMModel.setup_webserver() was not called")
        return self._clients[self._router.replica_for(get_session_id(request))]

    def _empty_completion(self, finish_reason: str) -> NeMoGymChatCompletion:
        return NeMoGymChatCompletion.model_validate(
            conversion.empty_chat_completion(self.config.model, finish_reason, int(time.time()))
        )

    def _mask_key(self, error: HTTPStatusError) -> None:
        """The upstream's error body reaches the caller and the logs; an echoed key must not."""
        key = self.config.api_key.get_secret_value()
        if len(key) >= MIN_MASKED_KEY_CHARS:
            error.response_content = error.response_content.replace(key.encode(), b"****")

    @staticmethod
    def _parsed_completion(answer: Any, base_url: str) -> NeMoGymChatCompletion:
        """A 2xx answer that is not a chat completion is the upstream's fault: a 502 naming the problems,
        not a 500 from deep inside the conversion."""
        try:
            return NeMoGymChatCompletion.model_validate(answer)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(map(str, problem['loc'])) or '<root>'}: {problem['msg']}"
                for problem in error.errors()[:MAX_REPORTED_PROBLEMS]
            )
            raise GymError(
                502,
                "bad_upstream_response",
                f"upstream {base_url} returned an invalid chat completion: {problems}",
            ) from None


if __name__ == "__main__":
    VLLMModel.run_webserver()
