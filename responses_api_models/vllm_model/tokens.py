"""Token bookkeeping of training mode, as pure functions over token id lists (no I/O, no config).

A trainer needs each turn's prompt to start with the previous turn's prompt and generation, token for
token; re-tokenising the history text does not guarantee that (BPE merges, templates that drop older
reasoning, sampled non-canonical ids). So a later turn's prompt is spliced: the ids the model really saw
and produced (P + G of the last assistant turn), then the template's tokens for what came after it.
A history edited by the caller cannot be spliced honestly; `find_break` says where it stopped matching.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_ID_PREFIX = "token_id:"
# How far from the end of the templated prefix the turn's EOS may sit (ChatML: `<|im_end|>` then "\n").
EOS_SEARCH_WINDOW = 4


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


def chat_generation(logprobs: Any) -> tuple[list[int], list[float]]:
    """Generated ids and log-probs from a chat choice's `logprobs` (`content` entries)."""
    entries = getattr(logprobs, "content", None)
    if entries is None:
        raise MissingTokenData("the upstream's chat completion has no logprobs.content")
    return [token_id_of(entry.token) for entry in entries], [entry.logprob for entry in entries]


def completion_generation(logprobs: Any) -> tuple[list[int], list[float]]:
    """Generated ids and log-probs from a completions choice's `logprobs` (`tokens`, `token_logprobs`)."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("tokens"), list):
        raise MissingTokenData("the upstream's completion has no logprobs.tokens")
    tokens, values = logprobs["tokens"], logprobs.get("token_logprobs")
    if not isinstance(values, list) or len(values) != len(tokens) or None in values:
        raise MissingTokenData("the upstream's completion has no log-prob for every generated token")
    return [token_id_of(token) for token in tokens], [float(value) for value in values]


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


def end_of_turn_id(first: Sequence[int], second: Sequence[int]) -> int:
    """The id that ends an assistant turn, from the templated ids of two conversations that differ only in
    the last assistant's text: the first id of what both end with (ChatML: `<|im_end|>` of `<|im_end|>\\n`).
    That ending must fit the window `glue_start` searches, or the splice would miss it."""
    shared = 0
    while shared < min(len(first), len(second)) and first[-1 - shared] == second[-1 - shared]:
        shared += 1
    if shared == 0:
        raise NoEndOfTurn("the rendered turns end with no common token")
    if shared > EOS_SEARCH_WINDOW:
        raise NoEndOfTurn(
            f"the rendered turns end with {shared} common tokens, more than the {EOS_SEARCH_WINDOW} searched"
        )
    return first[-shared]


def glue_start(prefix: Sequence[int], generation: Sequence[int], eos_token_id: int) -> int:
    """Where the template's tokens take over after G, at the turn's EOS in the templated prefix: right
    after it when G ended with it, else at it (a turn cut by max_tokens still gets the template's EOS).
    The template's closing tokens after EOS (e.g. "\\n") are kept; no EOS near the end: the prefix's end."""
    ended = bool(generation) and generation[-1] == eos_token_id
    window_start = max(len(prefix) - EOS_SEARCH_WINDOW, 0)
    for position in range(len(prefix) - 1, window_start - 1, -1):
        if prefix[position] == eos_token_id:
            return position + 1 if ended else position
    return len(prefix)


def earliest_break(*breaks: ContinuityBreak | None) -> ContinuityBreak | None:
    """Of the breaks found, the one at the earliest turn (None when none was found)."""
    found = [broken for broken in breaks if broken is not None]
    return min(found, key=lambda broken: broken.broken_at_turn, default=None)


def chain_break(turns: Sequence[TokenTurn]) -> ContinuityBreak | None:
    """The first recorded turn whose prompt does not start with the previous turn's prompt + generation."""
    for earlier, later in zip(turns, turns[1:], strict=False):
        expected = earlier.prompt_token_ids + earlier.generation_token_ids
        if later.prompt_token_ids[: len(expected)] != expected:
            return ContinuityBreak(
                later.number,
                f"the prompt ids of assistant turn {later.number} do not start with the prompt and "
                f"generation ids of assistant turn {earlier.number}",
            )
    return None


def _template_segments(turns: Sequence[TokenTurn], delta: list[int]) -> list[tuple[int, list[int]]]:
    """The spans of P + G + delta the template wrote (everything but the generations), each with the
    assistant turn it leads up to."""
    segments = [(turns[0].number, turns[0].prompt_token_ids)]
    for earlier, later in zip(turns, turns[1:], strict=False):
        start = len(earlier.prompt_token_ids) + len(earlier.generation_token_ids)
        segments.append((later.number, later.prompt_token_ids[start:]))
    segments.append((turns[-1].number + 1, delta))
    return segments


def _find_from(haystack: Sequence[int], needle: Sequence[int], start: int) -> int:
    """Index just past the first occurrence of `needle` at or after `start`, or -1."""
    width = len(needle)
    for position in range(start, len(haystack) - width + 1):
        if haystack[position : position + width] == needle:
            return position + width
    return -1


def find_break(
    turns: Sequence[TokenTurn], prefix: Sequence[int], glue: int, full: Sequence[int]
) -> ContinuityBreak | None:
    """Why P + G + full[glue:] would not be the conversation sent, or None when it is: the recorded
    turns must chain, the templated prefix must be where the full rendering starts, and every template
    span of the spliced prompt must appear, in order, in the full rendering (a greedy search: an edited
    span identical to a later one is caught only at a later turn). Of several breaks the earliest is
    reported, so a break stays named by the turn where it happened on every later turn."""
    return earliest_break(chain_break(turns), _render_break(turns, prefix, glue, full))


def _render_break(
    turns: Sequence[TokenTurn], prefix: Sequence[int], glue: int, full: Sequence[int]
) -> ContinuityBreak | None:
    current = turns[-1].number + 1
    if list(full[:glue]) != list(prefix[:glue]):
        return ContinuityBreak(
            current,
            "the chat template renders the history up to the last assistant turn differently once later "
            "messages follow, so its tokens cannot be spliced",
        )
    position = 0
    for turn_number, segment in _template_segments(turns, list(full[glue:])):
        found = _find_from(full, segment, position)
        # The first span, the first turn's whole prompt, must be where the rendering starts.
        if found < 0 or (position == 0 and found != len(segment)):
            return ContinuityBreak(
                turn_number,
                f"the history before assistant turn {turn_number} no longer renders to the tokens that "
                "turn was given (an item was edited, removed or inserted)",
            )
        position = found
    return None
