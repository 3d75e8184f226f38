"""Training mode: every model call with the token ids and log-probs a trainer needs, exact across turns.

The first turn is a chat completion plus a `/tokenize` call (or vLLM's inline ids). Later turns continue
the last turn's ids: by default token-in/token-out, the last turn's prompt and generation spliced with the
template's tokens for what followed (tokens.py), sent to `/v1/completions` and parsed as vLLM's chat
endpoint parses the text (parsers/); with `supply_prefix_token_ids`, through the chat route with those ids
as the required prefix. A history that no longer matches its ids is flagged (`token_continuity`), never
continued silently. The state kept across calls (what the chat template does, the messages generations
were returned as) is the process's, bounded, and only saves upstream calls.

A plain class rather than fields of the pydantic server model: the per-call code reads its state often.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from nemo_gym.http.client import HTTPStatusError
from nemo_gym.http.errors import GymError
from nemo_gym.http.upstream import Upstream, bad_upstream_answer, validated_answer
from nemo_gym.openai_utils import NeMoGymChatCompletion
from nemo_gym.text.redaction import without_url_passwords
from responses_api_models.vllm_model import conversion, structured, tokens
from responses_api_models.vllm_model.client import VLLMClient, call_upstream
from responses_api_models.vllm_model.parsers import OutputParsers

if TYPE_CHECKING:
    from responses_api_models.vllm_model.app import VLLMModelConfig

logger = logging.getLogger("vllm_model")

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
# What to do about an upstream that ignores a prefix the caller (not this server) chose.
PREFIX_FROM_CALLER_REMEDY = "serve the model with a vLLM that has it, or use vllm_model without compaction"
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


@contextlib.contextmanager
def token_data_required(client: VLLMClient) -> Iterator[None]:
    """An answer without the token data training mode returns is the upstream's fault: a 502."""
    try:
        yield
    except tokens.MissingTokenData as error:
        raise bad_upstream_answer(f"upstream {client.base_url}: {error} (training mode)") from None


def no_end_of_turn(base_url: str, reason: str) -> GymError:
    """The probe failed: the upstream, not the request, is at fault, and the config can say the id."""
    return bad_upstream_answer(
        f"upstream {base_url}: cannot find the token id that ends an assistant turn ({reason}); "
        "set eos_token_id in the vllm_model config to that id"
    )


def empty_completion(model: str, finish_reason: str) -> NeMoGymChatCompletion:
    """The answer when the model cannot or may not generate: an empty assistant message."""
    return NeMoGymChatCompletion.model_validate(
        conversion.empty_chat_completion(model, finish_reason, int(time.time()))
    )


class TrainingPath:
    """The model calls of training mode for one server process."""

    def __init__(self, config: VLLMModelConfig, upstream: Upstream, parsers: OutputParsers) -> None:
        self.config = config
        self._upstream = upstream
        self._parsers = parsers
        self._template_facts_by_kwargs: dict[bytes, tokens.TemplateFacts] = {}
        self._template_probe_lock = asyncio.Lock()
        self._returned_messages: OrderedDict[int, dict[str, Any]] = OrderedDict()

    async def turn(self, client: VLLMClient, payload: dict[str, Any], max_tokens: int | None) -> TrainingTurn:
        """A turn with its token data: from a chat completion when the history carries no token ids
        (the first turn), else continuing the last turn's ids. Shared by both routes, which differ only
        in how they present the turn."""
        turns = conversion.token_turns(payload["messages"])
        with token_data_required(client):
            if not turns:
                return self._remember(await self._chat_turn(client, payload))
            if self.config.supply_prefix_token_ids:
                return self._remember(await self._prefix_supplied_turn(client, payload, turns))
            return self._remember(await self._continued_turn(client, payload, turns, max_tokens))

    async def prefixed_turn(
        self, client: VLLMClient, payload: dict[str, Any], required_prefix: list[int] | None
    ) -> TrainingTurn:
        """A turn through the upstream's chat route whose prompt must start with `required_prefix`, ids
        the caller chose (vllm_model_with_compaction: the agent knows whether its rewritten history only
        appends to the last call's); the history's own token fields are ignored."""
        with token_data_required(client):
            turn = await self._chat_turn(client, payload, required_prefix, remedy=PREFIX_FROM_CALLER_REMEDY)
        return self._remember(turn)

    async def prompt_ids(
        self, client: VLLMClient, payload: dict[str, Any], required_prefix: list[int] | None
    ) -> list[int]:
        """The ids the upstream would be given for `payload` opened for generation, prefix included."""
        ids, _ = await self._tokenize(
            client,
            payload,
            payload["messages"],
            required_prefix=required_prefix,
            **conversion.prompt_rendering(payload),
        )
        return ids

    async def _chat_turn(
        self,
        client: VLLMClient,
        payload: dict[str, Any],
        parent: list[int] | None = None,
        broken: tokens.ContinuityBreak | None = None,
        remedy: str = "set supply_prefix_token_ids: false",
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
        answer = await call_upstream(
            self._upstream, client.create_chat_completion, body, self.config.propagate_context_overflow_errors
        )
        if answer is None:
            return self.without_generation("length", broken)
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
            prompt = await self.prompt_ids(client, payload, parent)
        if parent is not None and prompt[: len(parent)] != parent:
            raise bad_upstream_answer(
                f"upstream {client.base_url} did not start the prompt with required_prefix_token_ids (the "
                f"last turn's ids): it lacks that vLLM extension; {remedy}"
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
        answer = await call_upstream(
            self._upstream,
            client.create_completion,
            request_body,
            self.config.propagate_context_overflow_errors,
        )
        if answer is None:
            return self.without_generation("length", broken)
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
        """Keeps what a generation was returned as saying, so a later turn checks it without I/O."""
        if turn.generated and turn.completion.choices:
            remembered, key = self._returned_messages, generation_key(turn.generation_token_ids)
            remembered[key] = conversion.said(turn.completion.choices[0].message)
            remembered.move_to_end(key)
            if len(remembered) > MAX_REMEMBERED_GENERATIONS:
                remembered.popitem(last=False)
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

    def without_generation(
        self, finish_reason: str, continuity: tokens.ContinuityBreak | None = None
    ) -> TrainingTurn:
        """A turn the model did not generate (its answer says why); a break found in the history before
        it is still reported."""
        return TrainingTurn(empty_completion(self.config.model, finish_reason), [], [], [], continuity)
