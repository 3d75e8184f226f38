"""vllm_model: the Responses API on top of an OpenAI-compatible Chat Completions server (vLLM).

`/v1/responses` converts the request to a chat completion (see conversion.py), calls the upstream's
`/chat/completions`, and converts the answer back into Responses output items. `/v1/chat/completions`
goes upstream with the same server defaults (served model, extra_body, chat_template_kwargs).

Compatible with NeMo Gym's vllm_model (same config keys and conversion rules). Different on purpose:
calls are bounded (deadline, `max_attempts`), upstream errors keep their status, and requests the
conversion cannot express are a 400 naming the item instead of being dropped.

Training mode (`return_token_id_information: true`, training.py) puts the prompt ids, generated ids and
log-probs of each model call on the turn's last output item (on the chat route, on the assistant
message), every prompt an exact extension of the previous turn's.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.http.errors import GymError
from nemo_gym.http.sessions import get_session_id
from nemo_gym.http.upstream import (
    Upstream,
    UpstreamCallConfig,
    bad_upstream_answer,
    validated_answer,
)
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.text.redaction import without_url_passwords
from responses_api_models.vllm_model import audio, completions_api, conversion
from responses_api_models.vllm_model.chat_params import VLLMChatCompletionParams
from responses_api_models.vllm_model.client import VLLMClient, call_upstream
from responses_api_models.vllm_model.endpoint import EndpointFile, StaleEndpoint
from responses_api_models.vllm_model.parsers import OutputParsers, reasoning_parser, tool_call_parser
from responses_api_models.vllm_model.training import (
    TrainingPath,
    TrainingTurn,
    continuity_field,
    empty_completion,
)

logger = logging.getLogger("vllm_model")

# NeMo Gym's environment variable for the default of `reasoning_field`.
REASONING_FIELD_ENV_VAR = "NEMO_GYM_REASONING_FIELD"


class VLLMModelConfig(BaseResponsesAPIModelConfig, UpstreamCallConfig):
    """Settings of one vllm_model instance; README.md explains each key. The bounds of each upstream call
    (`max_attempts`, `timeout_s`, `max_concurrent_requests`) are every model server's."""

    # Where and what to call. A trainer that moves its backend names the current URL in `endpoint_file`
    # (read at most every `endpoint_check_interval_s`; a missing or empty file keeps the last URL for
    # `endpoint_stale_grace_s`, then calls fail); its clients then make 1 + `endpoint_connection_retries`
    # attempts at most, so a call to a backend that left fails soon.
    base_url: list[str] = Field(min_length=1)
    endpoint_file: Path | None = None
    endpoint_check_interval_s: float = Field(default=10.0, ge=0)
    endpoint_stale_grace_s: float = Field(default=300.0, ge=0)
    endpoint_connection_retries: int | None = Field(default=8, ge=0)
    api_key: SecretStr
    model: str
    default_headers: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold credentials
    # How the upstream's chat template and output parsers behave. A continued turn's text is parsed
    # here with the parsers vLLM runs under these names (its --tool-call-parser / --reasoning-parser).
    uses_reasoning_parser: bool
    tool_call_parser: str = "hermes"
    reasoning_parser: str = "qwen3"
    uses_interleaved_reasoning: bool = True
    # Which key(s) carry reasoning on the assistant messages sent upstream.
    reasoning_field: Literal["both", "reasoning", "reasoning_content"] = Field(
        default_factory=lambda: os.environ.get(REASONING_FIELD_ENV_VAR, "both"), validate_default=True
    )
    replace_developer_role_with_system: bool = False
    sequential_reasoning_allowed: bool = True
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # The caller's own top-level chat_template_kwargs (chat route) are dropped unless this is set.
    forward_request_chat_template_kwargs: bool = False
    # A conversation that ends with an assistant message continues that message instead of a new turn.
    continue_final_assistant_message: bool = False
    extra_body: dict[str, Any] = Field(default_factory=dict)
    # Merged last into every generation request (chat and completions): wins over the caller and extra_body.
    sampling_overrides: dict[str, Any] = Field(default_factory=dict)
    # A prompt that does not fit: false answers an empty turn ("length"); true passes vLLM's 400 on.
    propagate_context_overflow_errors: bool = False
    # Training mode: token ids and log-probs on the output. The id that ends an assistant turn splices
    # prompts; it is found from the upstream's chat template unless set here.
    return_token_id_information: bool = False
    eos_token_id: int | None = None
    # Continued turns through the upstream's chat route instead: it puts the last turn's ids in front
    # itself (NeMo RL's vLLM extension `required_prefix_token_ids`), and the prompt it reports proves it.
    supply_prefix_token_ids: bool = False
    # vLLM's `return_token_ids`: the prompt's ids come with the answer instead of from a /tokenize call.
    request_prompt_and_generation_token_ids: bool = False
    # Speech rows: the folder their `metadata.audio_path(s)` files are read from (audio.py), and the most
    # audio one request may inline. `metadata.audio_data` (a data URI) needs no root.
    audio_root: Path | None = None
    max_audio_mb: float = Field(default=32.0, gt=0)
    # A base model: generate through `/v1/completions` from the request's raw text (completions_api.py).
    # Rendering the chat template here instead (`render_chat_template`) is not implemented.
    use_completions_api: bool = False
    render_chat_template: bool = False

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_url_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("tool_call_parser")
    @classmethod
    def _known_tool_call_parser(cls, name: str) -> str:
        tool_call_parser(name)
        return name

    @field_validator("reasoning_parser")
    @classmethod
    def _known_reasoning_parser(cls, name: str) -> str:
        reasoning_parser(name)
        return name

    @field_validator("audio_root")
    @classmethod
    def _audio_root_is_a_folder(cls, root: Path | None) -> Path | None:
        """Absolute, since a server process runs in its own folder; checked at start, not per clip."""
        if root is None:
            return None
        if not root.is_absolute():
            raise ValueError(f"must be an absolute path (got '{root}')")
        if not root.is_dir():
            raise ValueError(f"no folder at '{root}'")
        return root.resolve()

    @model_validator(mode="after")
    def _prefix_needs_token_data(self) -> VLLMModelConfig:
        if self.supply_prefix_token_ids and not self.return_token_id_information:
            raise ValueError(
                "supply_prefix_token_ids: true needs return_token_id_information: true (the prefix is the "
                "last turn's token ids)"
            )
        if self.supply_prefix_token_ids and self.use_completions_api:
            raise ValueError(
                "supply_prefix_token_ids: true needs the chat route; remove it or use_completions_api: true"
            )
        return self

    @field_validator("render_chat_template")
    @classmethod
    def _no_client_side_template(cls, render: bool) -> bool:
        if render:
            raise ValueError(
                "render_chat_template: true is not implemented (it needs the model's tokenizer here); send "
                "the prompt already rendered as one user message, or use the chat route "
                "(use_completions_api: false)"
            )
        return render

    @field_validator(
        "chat_template_kwargs", "extra_body", "sampling_overrides", "default_headers", mode="before"
    )
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        """The shipped YAML writes `extra_body: null` for "nothing to add"."""
        return {} if value is None else value


def replica_for(session_id: str, replica_count: int) -> int:
    """The replica a session (one rollout) is pinned to, so every turn of a rollout hits the vLLM that
    holds its prefix in cache: the first 8 bytes of the id's sha256, big-endian, modulo the count. A
    function of the id alone, so every worker process and every restart pins a session alike."""
    digest = hashlib.sha256(session_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % replica_count


class VLLMModel(SimpleResponsesAPIModel):
    config: VLLMModelConfig

    _clients: list[VLLMClient] = PrivateAttr(default_factory=list)
    _endpoint: EndpointFile | None = PrivateAttr(default=None)
    _upstream: Upstream = PrivateAttr()
    _reasoning: conversion.ReasoningHandling = PrivateAttr()
    _defaults: conversion.ServerDefaults = PrivateAttr()
    _training: TrainingPath = PrivateAttr()
    _audio: audio.AudioFiles = PrivateAttr()
    _warned_of_dropped_template_kwargs: bool = PrivateAttr(default=False)

    def model_post_init(self, context: Any, /) -> None:
        """The conversion settings and the upstream's bounds are fixed by the config, so they are made once."""
        config = self.config
        self._upstream = Upstream(config, config.api_key, config.default_headers)
        self._reasoning = conversion.ReasoningHandling(
            config.uses_reasoning_parser, config.uses_interleaved_reasoning, config.reasoning_field
        )
        self._defaults = conversion.ServerDefaults(
            config.model,
            config.chat_template_kwargs,
            config.extra_body,
            config.replace_developer_role_with_system,
            config.sampling_overrides,
            config.forward_request_chat_template_kwargs,
            config.continue_final_assistant_message,
        )
        parsers = OutputParsers.named(
            config.tool_call_parser, config.reasoning_parser if config.uses_reasoning_parser else None
        )
        self._training = TrainingPath(config, self._upstream, parsers)
        self._audio = audio.AudioFiles(config.audio_root, int(config.max_audio_mb * audio.BYTES_PER_MB))

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        if self.config.sampling_overrides:
            logger.info("sampling_overrides on every generation request: %s", self.config.sampling_overrides)
        # Built here, after `run_webserver()` applied the config's `global_http_*` knobs.
        self._clients = [self._vllm_client(url) for url in self.config.base_url]
        if self.config.endpoint_file is not None:
            config = self.config
            self._endpoint = EndpointFile(
                config.endpoint_file, config.endpoint_check_interval_s, config.endpoint_stale_grace_s
            )
        return app

    def _vllm_client(self, url: str) -> VLLMClient:
        retries = self.config.endpoint_connection_retries if self.config.endpoint_file is not None else None
        return self._upstream.client(VLLMClient, url, None if retries is None else retries + 1)

    # ---- routes -----------------------------------------------------------------------------------------

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        try:
            chat_body = conversion.responses_to_chat_body(body, self._reasoning)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None
        if self.config.return_token_id_information:
            turn = await self._training_turn(request, chat_body, body.max_output_tokens, field="input")
            answer = self._training_response(body, turn)
        else:
            answer = self._to_response(body, await self._complete(request, chat_body, field="input"))
        return NeMoGymResponse.model_validate(answer)

    async def chat_completions(
        self, request: Request, body: VLLMChatCompletionParams
    ) -> NeMoGymChatCompletion:
        chat_body = body.model_dump(mode="json", exclude_unset=True)
        if not self.config.return_token_id_information:
            return await self._complete(request, chat_body)
        if (body.n or 1) > 1:
            raise GymError(
                400,
                "invalid_request",
                "n: training mode generates one choice per call (each choice is its own sample with its "
                "own token data); send n separate requests",
            )
        turn = await self._training_turn(request, chat_body, body.max_completion_tokens or body.max_tokens)
        completion = turn.completion.model_dump(mode="json", exclude_unset=True)
        if turn.generated:
            conversion.attach_chat_token_fields(
                completion, turn.prompt_token_ids, turn.generation_token_ids, turn.generation_log_probs
            )
        return NeMoGymChatCompletion.model_validate({**completion, **continuity_field(turn.continuity)})

    def _to_response(
        self, body: NeMoGymResponseCreateParamsNonStreaming, completion: NeMoGymChatCompletion
    ) -> dict[str, Any]:
        try:
            return conversion.chat_completion_to_response(
                body,
                completion,
                served_model=self.config.model,
                uses_reasoning_parser=self.config.uses_reasoning_parser,
                created_at=time.time(),
            )
        except conversion.UpstreamReplyError as error:
            raise bad_upstream_answer(str(error)) from None

    # ---- upstream ---------------------------------------------------------------------------------------

    async def _complete(
        self, request: Request, chat_body: dict[str, Any], field: str = "messages"
    ) -> NeMoGymChatCompletion:
        """One chat completion from the session's replica, with the two answers that are not generated:
        a forbidden continuation of an empty assistant turn, and a prompt that does not fit."""
        if self.config.use_completions_api:
            return (await self._completions_turn(request, chat_body, field)).completion
        payload = self._payload(await self._with_audio(chat_body))
        if self._must_not_continue(payload):
            return empty_completion(self.config.model, "content_filter")
        answer = await self._chat(self._client_for(request), payload)
        return answer or empty_completion(self.config.model, "length")

    async def _with_audio(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        """The body with the row's audio in its prompt; a body without audio costs one lookup."""
        try:
            key = audio.audio_key_in(chat_body)
            if key is None:
                return chat_body
            urls = await asyncio.to_thread(self._audio.urls, key, chat_body["metadata"][key])
        except audio.AudioRequestError as error:
            raise GymError(error.status, "invalid_request", str(error)) from None
        return audio.with_audio(chat_body, key, urls)

    def _payload(self, chat_body: dict[str, Any]) -> dict[str, Any]:
        if (
            "chat_template_kwargs" in chat_body
            and not self.config.forward_request_chat_template_kwargs
            and not self._warned_of_dropped_template_kwargs
        ):
            self._warned_of_dropped_template_kwargs = True
            logger.warning(
                "a request's own chat_template_kwargs are dropped (warned once): set "
                "forward_request_chat_template_kwargs: true to use them, or send them as "
                "metadata.chat_template_kwargs"
            )
        try:
            return conversion.apply_server_defaults(chat_body, self._defaults)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None

    def _must_not_continue(self, payload: dict[str, Any]) -> bool:
        return not self.config.sequential_reasoning_allowed and conversion.ends_with_empty_assistant_turn(
            payload["messages"]
        )

    async def _chat(self, client: VLLMClient, payload: dict[str, Any]) -> NeMoGymChatCompletion | None:
        """The upstream's chat completion, or None when the prompt does not fit the context window."""
        answer = await call_upstream(
            self._upstream,
            client.create_chat_completion,
            payload,
            self.config.propagate_context_overflow_errors,
        )
        if answer is None:
            return None
        return validated_answer(NeMoGymChatCompletion, answer, client.base_url, "chat completion")

    # ---- training mode ----------------------------------------------------------------------------------

    def _training_response(
        self, body: NeMoGymResponseCreateParamsNonStreaming, turn: TrainingTurn
    ) -> dict[str, Any]:
        """The token data and the continuity flag go on the turn's last output item, so they stay with
        the turn in an agent's rollout; the flag is also on the response, for a caller of this turn."""
        response = self._to_response(body, turn.completion)
        if turn.generated:
            conversion.attach_token_fields(
                response, turn.prompt_token_ids, turn.generation_token_ids, turn.generation_log_probs
            )
        flag = continuity_field(turn.continuity)
        response["output"][-1].update(flag)
        return {**response, **flag}

    async def _training_turn(
        self, request: Request, chat_body: dict[str, Any], max_tokens: int | None, field: str = "messages"
    ) -> TrainingTurn:
        if self.config.use_completions_api:
            return await self._completions_turn(request, chat_body, field)
        payload = self._payload(await self._with_audio(chat_body))
        if self._must_not_continue(payload):
            return self._training.without_generation("content_filter")
        return await self._training.turn(self._client_for(request), payload, max_tokens)

    async def _completions_turn(
        self, request: Request, chat_body: dict[str, Any], field: str
    ) -> TrainingTurn:
        """A generation through `/v1/completions` (`use_completions_api`); token data in training mode."""
        completions_api.refuse_audio(chat_body)
        return await completions_api.completions_turn(
            self._upstream,
            self._client_for(request),
            self._payload(chat_body),
            field,
            self.config.return_token_id_information,
            self.config.propagate_context_overflow_errors,
        )

    def _client_for(self, request: Request) -> VLLMClient:
        if not self._clients:
            raise RuntimeError("VLLMModel.setup_webserver() was not called")
        if self._endpoint is not None:
            try:
                moved_to = self._endpoint.poll(time.monotonic())
            except StaleEndpoint as error:
                raise GymError(503, "upstream_unavailable", str(error)) from None
            if moved_to is not None:
                logger.info("endpoint_file names a new backend: %s", without_url_passwords(moved_to))
                self._clients = [self._vllm_client(moved_to)]
        return self._clients[replica_for(get_session_id(request), len(self._clients))]


if __name__ == "__main__":
    VLLMModel.run_webserver()
