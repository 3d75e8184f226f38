"""vllm_model: the Responses API on top of an OpenAI-compatible Chat Completions server (vLLM).

`/v1/responses` converts the request to a chat completion (see conversion.py), calls the upstream's
`/chat/completions`, and converts the answer back into Responses output items. `/v1/chat/completions`
goes upstream with the same server defaults (served model, extra_body, chat_template_kwargs).

Compatible with NeMo Gym's vllm_model (same config keys and conversion rules). Different on purpose:
calls are bounded (deadline, `max_retries`), upstream errors keep their status, the session -> replica map
is bounded (LRU) instead of growing for the life of the process, and requests the conversion cannot
express are a 400 naming the item instead of being dropped.

Training mode (`return_token_id_information: true`) puts the prompt ids, generated ids and log-probs of
each model call on the turn's last output item. The first turn is a chat completion plus a `/tokenize`
call; later turns are token-in/token-out: the last turn's ids spliced with the template's tokens for
what followed (tokens.py), sent to `/v1/completions`, so every prompt extends the previous one exactly.
The splice needs the id that ends an assistant turn: `eos_token_id` when set, else found once from the
upstream's chat template, by the first continued turn.
`/v1/chat/completions` runs the same turns in training mode: the token data rides on the assistant
messages (sent back by the caller next turn) instead of on output items.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from fastapi import FastAPI, Request
from pydantic import Field, PrivateAttr, SecretStr, field_validator, model_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.errors import GymError
from nemo_gym.http_client import HTTPStatusError
from nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from nemo_gym.redaction import without_url_passwords
from nemo_gym.sessions import get_session_id
from nemo_gym.upstream import (
    NeMoGymAsyncOpenAI,
    Upstream,
    UpstreamCallConfig,
    bad_upstream_answer,
    validated_answer,
)
from responses_api_models.vllm_model import conversion, structured, tokens
from responses_api_models.vllm_model.chat_params import VLLMChatCompletionParams
from responses_api_models.vllm_model.endpoint import EndpointFile, StaleEndpoint
from responses_api_models.vllm_model.parsers import OutputParsers, reasoning_parser, tool_call_parser

logger = logging.getLogger("vllm_model")

# NeMo Gym's environment variable for the default of `reasoning_field`.
REASONING_FIELD_ENV_VAR = "NEMO_GYM_REASONING_FIELD"
# vLLM answers 400 with one of these when the prompt plus max_tokens does not fit the context window.
CONTEXT_LENGTH_MARKERS = ("context length", "max_tokens")
# Asked of the upstream in training mode: the chosen token's log-prob, its id instead of its text.
CHAT_TOKEN_FLAGS = {"logprobs": True, "top_logprobs": 0, "return_tokens_as_token_ids": True}
COMPLETION_TOKEN_FLAGS = {"logprobs": 0, "return_tokens_as_token_ids": True}
# Two one-turn conversations that differ only in the assistant's text (digits: one token each in common
# tokenizers, never merged with what follows): what their renderings end with is the template's end of turn.
EOS_PROBES = tuple(
    [{"role": "user", "content": "0"}, {"role": "assistant", "content": reply}] for reply in ("1", "2")
)
# A user message opened for generation, and followed by an assistant turn and another user message (so
# the template renders that assistant as history): where they part is what the generation prompt adds.
PROMPT_PROBES = (
    [{"role": "user", "content": "0"}],
    [
        {"role": "user", "content": "0"},
        {"role": "assistant", "content": "1"},
        {"role": "user", "content": "2"},
    ],
)
# From this many prompt tokens on, the splice point is searched in a worker thread.
LONG_HISTORY_TOKENS = 16_384
# Generations whose returned message the process keeps (least recently used forgotten; ~1 kB each).
MAX_REMEMBERED_GENERATIONS = 20_000
# Chat body fields a `/v1/completions` call has no use for; the rest (sampling, extra_body) go along.
CHAT_ONLY_FIELDS = (
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "chat_template_kwargs",
    "logprobs",
    "top_logprobs",
    "max_tokens",
    "max_completion_tokens",
    "metadata",
    "store",
    "service_tier",
    "add_generation_prompt",
    "continue_final_message",
)


class VLLMModelConfig(BaseResponsesAPIModelConfig, UpstreamCallConfig):
    """Settings of one vllm_model instance; README.md explains each key. The bounds of each upstream call
    (`max_retries`, `timeout_s`, `max_concurrent_requests`) are every model server's."""

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

    @model_validator(mode="after")
    def _prefix_needs_token_data(self) -> VLLMModelConfig:
        if self.supply_prefix_token_ids and not self.return_token_id_information:
            raise ValueError(
                "supply_prefix_token_ids: true needs return_token_id_information: true (the prefix is the "
                "last turn's token ids)"
            )
        return self

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


@dataclass(frozen=True)
class TrainingTurn:
    """One model call of training mode, before either route shapes it: the chat completion and the
    token data of its first choice, plus where the recorded history stopped matching, if it did. A call
    the model did not generate for (empty lists) gets no token data: there is nothing to train on."""

    completion: NeMoGymChatCompletion
    prompt_token_ids: list[int]
    generation_token_ids: list[int]
    generation_log_probs: list[float]
    continuity: tokens.ContinuityBreak | None = None

    @property
    def generated(self) -> bool:
        return bool(self.generation_token_ids)


def continuity_field(broken: tokens.ContinuityBreak | None) -> dict[str, Any]:
    """The top-level `token_continuity` field of a flagged answer; nothing when the history is intact."""
    if broken is None:
        return {}
    return {"token_continuity": {"broken_at_turn": broken.broken_at_turn, "reason": broken.reason}}


def generation_key(generated: list[int]) -> int:
    return hash(tuple(generated))


def no_end_of_turn(base_url: str, reason: str) -> GymError:
    """The probe failed: the upstream, not the request, is at fault, and the config can say the id."""
    return bad_upstream_answer(
        f"upstream {base_url}: cannot find the token id that ends an assistant turn ({reason}); "
        "set eos_token_id in the vllm_model config to that id"
    )


def is_context_length_error(error: HTTPStatusError) -> bool:
    text = error.response_content.decode("utf-8", errors="replace").lower()
    return error.status == 400 and any(marker in text for marker in CONTEXT_LENGTH_MARKERS)


class VLLMClient(NeMoGymAsyncOpenAI):
    """The upstream client, plus vLLM's `/v1/completions` (token ids in, token ids out)."""

    async def create_completion(self, **body: Any) -> dict[str, Any]:
        return await self._call("POST", f"{self.base_url.rstrip('/')}/completions", body)

    async def create_detokenize(self, **body: Any) -> dict[str, Any]:
        """vLLM's `/detokenize` lives beside `/v1`, like `/tokenize`."""
        root = self.base_url.rstrip("/").removesuffix("/v1")
        return await self._call("POST", f"{root}/detokenize", body)


class VLLMModel(SimpleResponsesAPIModel):
    config: VLLMModelConfig

    _clients: list[VLLMClient] = PrivateAttr(default_factory=list)
    _endpoint: EndpointFile | None = PrivateAttr(default=None)
    _upstream: Upstream = PrivateAttr()
    _reasoning: conversion.ReasoningHandling = PrivateAttr()
    _defaults: conversion.ServerDefaults = PrivateAttr()
    _parsers: OutputParsers = PrivateAttr()
    _template_facts_by_kwargs: dict[bytes, tokens.TemplateFacts] = PrivateAttr(default_factory=dict)
    _template_probe_lock: asyncio.Lock = PrivateAttr(default_factory=asyncio.Lock)
    _returned_messages: OrderedDict[int, dict[str, Any]] = PrivateAttr(default_factory=OrderedDict)
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
        self._parsers = OutputParsers.named(
            config.tool_call_parser, config.reasoning_parser if config.uses_reasoning_parser else None
        )

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
            turn = await self._training_turn(request, chat_body, body.max_output_tokens)
            answer = self._training_response(body, turn)
        else:
            answer = self._to_response(body, await self._complete(request, chat_body))
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

    async def _complete(self, request: Request, chat_body: dict[str, Any]) -> NeMoGymChatCompletion:
        """One chat completion from the session's replica, with the two answers that are not generated:
        a forbidden continuation of an empty assistant turn, and a prompt that does not fit."""
        payload = self._payload(chat_body)
        if self._must_not_continue(payload):
            return self._empty_completion("content_filter")
        answer = await self._chat(self._client_for(request), payload)
        return answer or self._empty_completion("length")

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
        answer = await self._upstream_call(client, client.create_chat_completion, payload)
        if answer is None:
            return None
        return validated_answer(NeMoGymChatCompletion, answer, client.base_url, "chat completion")

    async def _upstream_call(self, client: VLLMClient, call: Any, body: dict[str, Any]) -> Any:
        """One bounded upstream call; None for vLLM's context-length 400, any other error as the
        upstream sent it (key masked). A broken or non-JSON answer is already a 502 from the client."""
        async with self._upstream.call():
            try:
                return await call(**body)
            except HTTPStatusError as error:
                if is_context_length_error(error) and not self.config.propagate_context_overflow_errors:
                    return None
                raise

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
        self, request: Request, chat_body: dict[str, Any], max_tokens: int | None
    ) -> TrainingTurn:
        """A turn with its token data: from a chat completion when the history carries no token ids
        (the first turn), else token-in/token-out continuing the last turn's ids. Shared by both routes,
        which differ only in how they present the turn."""
        payload = self._payload(chat_body)
        if self._must_not_continue(payload):
            return self._without_generation("content_filter")
        client = self._client_for(request)
        turns = conversion.token_turns(payload["messages"])
        try:
            if not turns:
                return self._remember(await self._chat_turn(client, payload))
            if self.config.supply_prefix_token_ids:
                return self._remember(await self._prefix_supplied_turn(client, payload, turns))
            return self._remember(await self._continued_turn(client, payload, turns, max_tokens))
        except tokens.MissingTokenData as error:
            raise bad_upstream_answer(f"upstream {client.base_url}: {error} (training mode)") from None

    async def _chat_turn(
        self,
        client: VLLMClient,
        payload: dict[str, Any],
        parent: list[int] | None = None,
        broken: tokens.ContinuityBreak | None = None,
    ) -> TrainingTurn:
        """A turn through the upstream's chat route: the first turn, or with `parent` (the last turn's
        prompt + generation ids) a continued one the upstream must put those ids in front of."""
        body = {
            **payload,
            **CHAT_TOKEN_FLAGS,
            "messages": conversion.without_token_fields(payload["messages"]),
        }
        if self.config.request_prompt_and_generation_token_ids:
            body["return_token_ids"] = True
        if parent is not None:
            body["required_prefix_token_ids"] = parent
        answer = await self._upstream_call(client, client.create_chat_completion, body)
        if answer is None:
            return self._without_generation("length", broken)
        inline_prompt, inline_generated = tokens.pop_inline_token_ids(answer)
        completion = validated_answer(NeMoGymChatCompletion, answer, client.base_url, "chat completion")
        if not completion.choices:
            raise bad_upstream_answer("the upstream's chat completion has no choices")
        generated, log_probs = tokens.chat_generation(completion.choices[0].logprobs)
        if inline_generated is not None and inline_generated != generated:
            raise bad_upstream_answer(
                f"upstream {client.base_url}: the choice's token_ids and its logprobs disagree"
            )
        prompt = inline_prompt
        if prompt is None:
            prompt, _ = await self._tokenize(
                client,
                payload,
                payload["messages"],
                required_prefix=parent,
                **conversion.prompt_rendering(payload),
            )
        if parent is not None and prompt[: len(parent)] != parent:
            raise bad_upstream_answer(
                f"upstream {client.base_url} did not start the prompt with required_prefix_token_ids (the "
                "last turn's ids): it lacks that vLLM extension; set supply_prefix_token_ids: false"
            )
        return TrainingTurn(completion, prompt, generated, log_probs, broken)

    async def _prefix_supplied_turn(
        self, client: VLLMClient, payload: dict[str, Any], turns: list[tokens.TokenTurn]
    ) -> TrainingTurn:
        """The last turn's ids go upstream as the required prefix once the history is checked against
        them (recorded turns chain, generations unedited, none lost); a broken history gets the canonical
        prompt, flagged, as on the splice path. The template's part of the history is the upstream's."""
        last = turns[-1]
        eos = (await self._template_facts(client, payload, turns)).end_of_turn_id
        broken = tokens.earliest_break(
            tokens.chain_break(turns),
            await self._edited_turn(client, payload, turns, eos),
            conversion.untracked_turn(payload["messages"], last),
        )
        parent = None if broken else last.prompt_token_ids + last.generation_token_ids
        return await self._chat_turn(client, payload, parent, broken)

    async def _continued_turn(
        self,
        client: VLLMClient,
        payload: dict[str, Any],
        turns: list[tokens.TokenTurn],
        max_tokens: int | None,
    ) -> TrainingTurn:
        """P + G of the last recorded turn, then the template's tokens for the rest (or the canonical
        tokens of the whole conversation, flagged, when the history no longer matches its ids)."""
        try:  # checked before any upstream call: a forced choice naming no offered tool is the caller's error
            response_format = structured.completion_response_format(payload)
        except conversion.RequestConversionError as error:
            raise GymError(400, "invalid_request", str(error)) from None
        facts = await self._template_facts(client, payload, turns)
        full, max_model_len = await self._tokenize(
            client, payload, payload["messages"], **conversion.prompt_rendering(payload)
        )
        spliced, broken = await self._spliced_prompt(client, payload, turns, facts, full)
        prompt = full if broken else spliced
        max_tokens = max_tokens or max(max_model_len - len(prompt), 1)
        sampling = {key: value for key, value in payload.items() if key not in CHAT_ONLY_FIELDS}
        request_body = {**sampling, **COMPLETION_TOKEN_FLAGS, "prompt": prompt, "max_tokens": max_tokens}
        request_body.update(self.config.sampling_overrides)
        if self._parsers.keeps_special_tokens(payload.get("tools"), payload.get("tool_choice")):
            request_body["skip_special_tokens"] = False
        if response_format is not None:
            request_body["response_format"] = response_format
        answer = await self._upstream_call(client, client.create_completion, request_body)
        if answer is None:
            return self._without_generation("length", broken)
        completion, generated, log_probs = self._completion_to_chat(answer, client.base_url, payload)
        return TrainingTurn(completion, prompt, generated, log_probs, broken)

    async def _spliced_prompt(
        self,
        client: VLLMClient,
        payload: dict[str, Any],
        turns: list[tokens.TokenTurn],
        facts: tokens.TemplateFacts,
        full: list[int],
    ) -> tuple[list[int], tokens.ContinuityBreak | None]:
        """The prompt that continues the last recorded turn's ids, and the earliest break of the history
        against them. When the model is to continue that very turn (left open as the final message), its
        ids without the closing EOS are the whole prompt."""
        last = turns[-1]
        eos = facts.end_of_turn_id
        edited = await self._edited_turn(client, payload, turns, eos)
        ids = last.prompt_token_ids + last.generation_token_ids
        if payload.get("continue_final_message") and last.message_index == len(payload["messages"]) - 1:
            ended = bool(last.generation_token_ids) and ids[-1] == eos
            return ids[:-1] if ended else ids, tokens.earliest_break(tokens.chain_break(turns[-2:]), edited)
        if len(full) >= LONG_HISTORY_TOKENS:  # keeps the event loop free for the other rollouts
            glue, misrendered = await asyncio.to_thread(tokens.splice_point, turns, full, facts)
        else:
            glue, misrendered = tokens.splice_point(turns, full, facts)
        untracked = conversion.untracked_turn(payload["messages"], last)
        return ids + full[glue:], tokens.earliest_break(misrendered, edited, untracked)

    async def _template_facts(
        self, client: VLLMClient, payload: dict[str, Any], turns: list[tokens.TokenTurn]
    ) -> tokens.TemplateFacts:
        """What the splice needs to know of the chat template, probed once per process and set of
        chat_template_kwargs (they may change the generation prompt) by the first continued turn that
        needs it; a burst of such turns waits for that one probe."""
        key = orjson.dumps(payload.get("chat_template_kwargs") or {}, option=orjson.OPT_SORT_KEYS)
        if key not in self._template_facts_by_kwargs:
            async with self._template_probe_lock:
                if key not in self._template_facts_by_kwargs:
                    self._template_facts_by_kwargs[key] = await self._probe_template(client, payload, turns)
        return self._template_facts_by_kwargs[key]

    async def _probe_template(
        self, client: VLLMClient, payload: dict[str, Any], turns: list[tokens.TokenTurn]
    ) -> tokens.TemplateFacts:
        """The end-of-turn id (unless `eos_token_id` says it) and the generation prompt's extra, from tiny
        conversations rendered with the request's model, tools and chat_template_kwargs."""
        try:
            opened, followed = await asyncio.gather(
                self._tokenize(client, payload, PROMPT_PROBES[0], add_generation_prompt=True),
                self._tokenize(client, payload, PROMPT_PROBES[1], add_generation_prompt=False),
            )
            eos = self.config.eos_token_id
            if eos is None:
                first, second = await asyncio.gather(
                    *(
                        self._tokenize(client, payload, probe, add_generation_prompt=False)
                        for probe in EOS_PROBES
                    )
                )
                generation_ends = [turn.generation_token_ids[-1] for turn in turns]
                eos = tokens.end_of_turn_id(first[0], second[0], generation_ends)
                shown_url = without_url_passwords(client.base_url)
                logger.info("end-of-turn token id %d, found from the chat template of %s", eos, shown_url)
        except HTTPStatusError as error:
            raise no_end_of_turn(client.base_url, f"its /tokenize answered HTTP {error.status}") from None
        except (GymError, tokens.NoEndOfTurn) as error:
            raise no_end_of_turn(client.base_url, str(error)) from None
        return tokens.TemplateFacts(eos, tokens.generation_prompt_extra(opened[0], followed[0]))

    def _completion_to_chat(
        self, answer: Any, base_url: str, payload: dict[str, Any]
    ) -> tuple[NeMoGymChatCompletion, list[int], list[float]]:
        """A `/v1/completions` answer as the chat completion vLLM's parsers would have made for the
        request `payload`, with the generated ids and log-probs."""
        if not isinstance(answer, dict) or not answer.get("choices"):
            raise bad_upstream_answer(f"upstream {base_url} sent a completion without choices")
        choice = answer["choices"][0]
        generated, log_probs = tokens.completion_generation(choice.get("logprobs"))
        message = conversion.generated_text_to_chat_message(
            str(choice.get("text") or ""), self._parsers, payload
        )
        chat = conversion.completion_to_chat_completion(answer, message)
        completion = validated_answer(NeMoGymChatCompletion, chat, base_url, "chat completion")
        return completion, generated, log_probs

    async def _tokenize(
        self,
        client: VLLMClient,
        payload: dict[str, Any],
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool,
        continue_final_message: bool = False,
        required_prefix: list[int] | None = None,
    ) -> tuple[list[int], int]:
        """The templated ids of `messages` (token data stripped) and the upstream's max_model_len."""
        tokenize_body: dict[str, Any] = {
            "model": payload["model"],
            "messages": conversion.without_token_fields(messages),
            "add_generation_prompt": add_generation_prompt,
        }
        if continue_final_message:
            tokenize_body["continue_final_message"] = True
        if required_prefix is not None:
            tokenize_body["required_prefix_token_ids"] = required_prefix
        for key in ("tools", "chat_template_kwargs"):
            if payload.get(key) is not None:
                tokenize_body[key] = payload[key]
        async with self._upstream.call():
            answer = await client.create_tokenize(**tokenize_body)
        fields = answer if isinstance(answer, dict) else {}
        ids, max_model_len = fields.get("tokens"), fields.get("max_model_len")
        if not isinstance(ids, list) or not isinstance(max_model_len, int):
            raise bad_upstream_answer(f"upstream {client.base_url} /tokenize gave no tokens")
        return ids, max_model_len

    async def _edited_turn(
        self, client: VLLMClient, payload: dict[str, Any], turns: list[tokens.TokenTurn], eos: int
    ) -> tokens.ContinuityBreak | None:
        """The first recorded turn whose assistant message no longer says what its ids generated. A turn
        this process produced is compared with the message it returned; any other is read back with one
        `/detokenize` (concurrent) and parsed again."""
        messages = payload["messages"]
        verdicts: dict[int, str | None] = {}
        unknown = []
        for turn in turns:
            returned = self._returned_messages.get(generation_key(turn.generation_token_ids))
            if returned is None:
                unknown.append(turn)
            else:
                verdicts[turn.number] = conversion.message_mismatch(messages[turn.message_index], returned)
        texts = await asyncio.gather(*(self._detokenize(client, payload, turn, eos) for turn in unknown))
        for turn, text in zip(unknown, texts, strict=True):
            message = messages[turn.message_index]
            verdicts[turn.number] = conversion.generation_mismatch(message, text, self._parsers, payload)
        for turn in turns:
            edited = verdicts[turn.number]
            if edited is not None:
                return tokens.ContinuityBreak(
                    turn.number,
                    f"the {edited} of assistant turn {turn.number} was edited: it no longer matches that "
                    "turn's generation_token_ids",
                )
        return None

    def _remember(self, turn: TrainingTurn) -> TrainingTurn:
        """Keeps the message a generation was returned as, so a later turn checks it without I/O."""
        if turn.generated and turn.completion.choices:
            message = turn.completion.choices[0].message.model_dump(mode="json", exclude_none=True)
            self._returned_messages[generation_key(turn.generation_token_ids)] = message
            self._returned_messages.move_to_end(generation_key(turn.generation_token_ids))
            if len(self._returned_messages) > MAX_REMEMBERED_GENERATIONS:
                self._returned_messages.popitem(last=False)
        return turn

    async def _detokenize(
        self, client: VLLMClient, payload: dict[str, Any], turn: tokens.TokenTurn, eos: int
    ) -> str:
        """The text of a turn's generation, without its closing EOS."""
        generated = turn.generation_token_ids
        if generated[-1] == eos:
            generated = generated[:-1]
        async with self._upstream.call():
            answer = await client.create_detokenize(model=payload["model"], tokens=generated)
        text = answer.get("prompt") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise bad_upstream_answer(f"upstream {client.base_url} /detokenize gave no text")
        return text

    def _without_generation(
        self, finish_reason: str, continuity: tokens.ContinuityBreak | None = None
    ) -> TrainingTurn:
        """A turn the model did not generate (its answer says why); a break found in the history before
        it is still reported."""
        return TrainingTurn(self._empty_completion(finish_reason), [], [], [], continuity)

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

    def _empty_completion(self, finish_reason: str) -> NeMoGymChatCompletion:
        return NeMoGymChatCompletion.model_validate(
            conversion.empty_chat_completion(self.config.model, finish_reason, int(time.time()))
        )


if __name__ == "__main__":
    VLLMModel.run_webserver()
