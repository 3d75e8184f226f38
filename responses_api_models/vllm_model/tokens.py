"""Token bookkeeping of training mode, as pure functions over token id lists (no I/O, no config).

A trainer needs each turn's prompt to start with the previous turn's prompt and generation, token for
token; re-tokenising the history text does not guarantee that (BPE merges, templates that drop older
reasoning, sampled non-canonical ids). So a later turn's prompt is spliced: the ids the model really saw
and produced (P + G of the last assistant turn), then the template's tokens for what came after it.
A history edited by the caller cannot be spliced honestly; `splice_point` says where it stopped matching.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_ID_PREFIX = "token_id:"


class MissingTokenData(ValueError):
    """The upstream's answer lacks the token ids or log-probs training mode must return."""


class NoEndOfTurn(ValueError):
    """Two renderings of a turn do not show which id ends it."""


@dataclass(frozen=True)
class TokenTurn:
    """An assistant message of the history that carries the ids of the model call that produced it."""

    number: int  # 1-based among the assistant messages of the conversation
    message_index: int
    prompt_token_ids: list[int]
    generation_token_ids: list[int]


@dataclass(frozen=True)
class ContinuityBreak:
    """Where the recorded token history stops matching the conversation sent, and why."""

    broken_at_turn: int
    reason: str


def token_id_of(shown: str) -> int:
    """vLLM shows each token as "token_id:<n>" under `return_tokens_as_token_ids`."""
    if not shown.startswith(TOKEN_ID_PREFIX):
        raise MissingTokenData(f"token {shown!r} is not of the form 'token_id:<n>'")
    return int(shown.removeprefix(TOKEN_ID_PREFIX))


def token_ids_of(shown: list[str]) -> list[int]:
    """`token_id_of` of every token, in one pass when all are well formed (every generated token)."""
    if not all(token.startswith(TOKEN_ID_PREFIX) for token in shown):
        return [token_id_of(token) for token in shown]  # raises, naming the first malformed one
    cut = len(TOKEN_ID_PREFIX)
    return [int(token[cut:]) for token in shown]


def chat_generation(logprobs: Any) -> tuple[list[int], list[float]]:
    """Generated ids and log-probs from a chat choice's `logprobs` (`content` entries)."""
    entries = getattr(logprobs, "content", None)
    if entries is None:
        raise MissingTokenData("the upstream's chat completion has no logprobs.content")
    return token_ids_of([entry.token for entry in entries]), [entry.logprob for entry in entries]


def completion_generation(logprobs: Any) -> tuple[list[int], list[float]]:
    """Generated ids and log-probs from a completions choice's `logprobs` (`tokens`, `token_logprobs`)."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("tokens"), list):
        raise MissingTokenData("the upstream's completion has no logprobs.tokens")
    tokens, values = logprobs["tokens"], logprobs.get("token_logprobs")
    if not isinstance(values, list) or len(values) != len(tokens) or None in values:
        raise MissingTokenData("the upstream's completion has no log-prob for every generated token")
    return token_ids_of(tokens), [float(value) for value in values]


def pop_inline_token_ids(answer: Any) -> tuple[list[int] | None, list[int] | None]:
    """vLLM's `return_token_ids` transport fields of a chat answer (top-level `prompt_token_ids`, the
    first choice's `token_ids`), taken off the answer; None for each one it does not carry."""
    if not isinstance(answer, dict):
        return None, None
    prompt = answer.pop("prompt_token_ids", None)
    choices = [choice for choice in answer.get("choices") or [] if isinstance(choice, dict)]
    generated = [choice.pop("token_ids", None) for choice in choices]
    return _ids_or_none(prompt), _ids_or_none(generated[0] if generated else None)


def _ids_or_none(ids: Any) -> list[int] | None:
    if ids is None:
        return None
    if not isinstance(ids, list) or not all(isinstance(token, int) for token in ids):
        raise MissingTokenData("the upstream's inline token ids are not a list of integers")
    return ids


def end_of_turn_id(first: Sequence[int], second: Sequence[int], generation_ends: Iterable[int] = ()) -> int:
    """The id that ends an assistant turn, from the templated ids of two conversations that differ only in
    the last assistant's text: one of the ids both end with (ChatML: `<|im_end|>` of `<|im_end|>\\n`).
    A template may write a token of its own before the end marker, so the id a recorded generation ended
    with is preferred when it is among them; else the first of them."""
    shared = 0
    while shared < min(len(first), len(second)) and first[-1 - shared] == second[-1 - shared]:
        shared += 1
    if shared == 0:
        raise NoEndOfTurn("the rendered turns end with no common token")
    ending = first[len(first) - shared :]
    return next((token for token in generation_ends if token in ending), ending[0])


def generation_prompt_extra(opened: Sequence[int], followed: Sequence[int]) -> tuple[int, ...]:
    """What the template's generation prompt adds after the assistant header that a turn in the history
    shows (Qwen3 without thinking: an empty `<think></think>` block), from the rendering of one user
    message with the generation prompt (`opened`) and of the same message followed by an assistant and a
    user message (`followed`): the tail of `opened` after their common start."""
    common = 0
    while common < min(len(opened), len(followed)) and opened[common] == followed[common]:
        common += 1
    return tuple(opened[common:])


@dataclass(frozen=True)
class TemplateFacts:
    """What splicing needs to know of the chat template: the id that closes an assistant turn, and what
    the generation prompt adds that history turns do not show."""

    end_of_turn_id: int
    generation_prompt_extra: tuple[int, ...] = ()


def earliest_break(*breaks: ContinuityBreak | None) -> ContinuityBreak | None:
    """Of the breaks found, the one at the earliest turn (None when none was found)."""
    found = [broken for broken in breaks if broken is not None]
    return min(found, key=lambda broken: broken.broken_at_turn, default=None)


def chain_break(turns: Sequence[TokenTurn]) -> ContinuityBreak | None:
    """The first recorded turn whose prompt does not start with the previous turn's prompt + generation."""
    for earlier, later in zip(turns, turns[1:], strict=False):
        start = len(earlier.prompt_token_ids)
        end = start + len(earlier.generation_token_ids)
        if (
            later.prompt_token_ids[start:end] != earlier.generation_token_ids
            or later.prompt_token_ids[:start] != earlier.prompt_token_ids
        ):
            return ContinuityBreak(
                later.number,
                f"the prompt ids of assistant turn {later.number} do not start with the prompt and "
                f"generation ids of assistant turn {earlier.number}",
            )
    return None


def _shown_length(full: list[int], start: int, segment: list[int], extra: tuple[int, ...]) -> int | None:
    """How much of the template's span `segment` of a recorded prompt `full` shows at `start`: all of it,
    or all but the generation prompt's extra, which history turns do not show; None when it differs."""
    if full[start : start + len(segment)] == segment:
        return len(segment)
    if not extra or len(segment) < len(extra) or tuple(segment[len(segment) - len(extra) :]) != extra:
        return None
    kept = len(segment) - len(extra)
    return kept if full[start : start + kept] == segment[:kept] else None


def splice_point(
    turns: Sequence[TokenTurn], full: list[int], facts: TemplateFacts
) -> tuple[int, ContinuityBreak | None]:
    """Where, in the rendering `full` of the whole conversation, the template's tokens for what followed
    the last recorded turn begin; and, when the history no longer matches the recorded ids, where it
    stopped matching.

    Each recorded prompt is the previous turn's prompt + generation, then a span the template wrote (the
    messages that followed, and the generation prompt). Each such span must be what `full` shows right
    after the end-of-turn id that closes the previous assistant turn there, i.e. the first one after the
    previous span; so an assistant turn the template renders differently in `full` (older reasoning
    dropped, say) is skipped over, while an edited, removed or inserted message is caught. Only the newest
    link of the chain of prompts is compared id by id: each older one was the newest once."""
    eos = facts.end_of_turn_id
    start, recorded_end = 0, 0
    for turn in turns:
        segment = turn.prompt_token_ids[recorded_end:]
        shown = None
        if len(turn.prompt_token_ids) >= recorded_end:
            shown = _shown_length(full, start, segment, facts.generation_prompt_extra)
        if shown is None:
            return start, ContinuityBreak(
                turn.number,
                f"the history before assistant turn {turn.number} no longer renders to the tokens that "
                "turn was given (an item was edited, removed or inserted)",
            )
        generated = turn.generation_token_ids
        try:  # the turn's rendering ends at the first end-of-turn id after the span
            closer = full.index(eos, start + shown)
        except ValueError:
            return start, ContinuityBreak(
                turn.number, f"the chat template does not close assistant turn {turn.number} with id {eos}"
            )
        # The next span starts after the closing id, or with it when the template wrote it (a turn cut
        # short by max_tokens did not generate it).
        start = closer + 1 if generated and generated[-1] == eos else closer
        recorded_end = len(turn.prompt_token_ids) + len(generated)
    return start, chain_break(turns[-2:])
