"""Pieces that several environments and agents cut out of model text the same way, each in one linear pass.

The text of a message's content, the answer without its `<think>` reasoning, boxed answers and `\\text{}`
wrappers, the last match of a pattern, fenced code blocks, the option letter a multiple-choice answer
picks, and error text flattened to one bounded line for a response field or a log.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Mapping, Sequence
from typing import Any

ONE_LINE_MAX_CHARS = 300
FENCE = "```"

_BOXED_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_TEXT_WRAPPER = re.compile(r"\\text\s*\{([^{}]*)\}")
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)


def content_text(content: Any) -> str:
    """The text of a message's content: the string itself, or its text parts joined (other parts have none)."""
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "")
        for part in content or []
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    )


def one_line(text: str, max_chars: int = ONE_LINE_MAX_CHARS, ellipsis: str = "…") -> str:
    """`text` with every whitespace run made one space, cut to `max_chars` (the cut marked by `ellipsis`)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= max_chars else flat[: max_chars - len(ellipsis)] + ellipsis


def last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match of `pattern` in `text`, holding one match at a time: models correct themselves, so
    the last marker is the answer."""
    tail = collections.deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


def without_reasoning(text: str) -> str:
    """The text without `<think>` blocks (an unclosed one drops the rest, a lone `</think>` all before it),
    stripped: a grader or judge must not read the policy's hidden reasoning."""
    text = _THINK_BLOCK.sub("", text)
    if "<think>" in text:
        text = text.split("<think>", 1)[0]
    elif "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.strip()


# ---------------------------------------------------------------------------------------------------------
# \boxed{...}


def boxed_spans(text: str) -> list[tuple[int, int]]:
    r"""(start, end) of the content of every `\boxed{...}` whose braces close, in the order the boxes open.

    Braces are paired on a stack in one pass, so the time stays linear however many boxes are nested or
    left open; spans rather than copies keep nested boxes from costing quadratic memory.
    """
    box_braces = {opening.end() - 1 for opening in _BOXED_OPEN.finditer(text)}
    if not box_braces:
        return []
    open_braces: list[int] = []
    spans: list[tuple[int, int]] = []
    for brace in _BRACE.finditer(text, min(box_braces)):
        if brace.group() == "{":
            open_braces.append(brace.start())
        elif open_braces:
            opened = open_braces.pop()
            if opened in box_braces:
                spans.append((opened + 1, brace.start()))
    spans.sort()
    return spans


def last_boxed(text: str) -> str | None:
    r"""The content of the last-opened `\boxed{...}` that closes (an inner box after its outer one); None
    when there is none. Answers are read from the last box because models restate options first."""
    spans = boxed_spans(text)
    return text[spans[-1][0] : spans[-1][1]] if spans else None


def final_boxed(text: str) -> str | None:
    r"""The content of the text's final `\boxed`, None when it is not followed by `{` or never closes: unlike
    `last_boxed`, an answer cut off inside its box does not fall back on an earlier one."""
    start = text.rfind("\\boxed")
    opening = _BOXED_OPEN.match(text, start) if start >= 0 else None
    if opening is None:
        return None
    return next((text[begin:end] for begin, end in boxed_spans(text) if begin == opening.end()), None)


def strip_text_wrappers(text: str) -> str:
    r"""`\text{B}` -> `B`, repeatedly (nested wrappers too), so LaTeX-wrapped answers compare like plain ones."""
    previous = None
    while previous != text:
        previous, text = text, _TEXT_WRAPPER.sub(r"\1", text)
    return text


# ---------------------------------------------------------------------------------------------------------
# ``` blocks


def closed_fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(label, body) of every ``` block that has a label line and a closing fence, in order; the label
    is stripped and lowercased (`""` for an unlabelled block)."""
    blocks = []
    for inside in text.split(FENCE)[1:-1:2]:  # odd pieces lie between an opening and a closing fence
        label, newline, body = inside.partition("\n")
        if newline:
            blocks.append((label.strip().lower(), body))
    return blocks


# ---------------------------------------------------------------------------------------------------------
# Multiple-choice answers

# Option letters as some localized prompts write them: Arabic, Bengali and full-width forms of A-D.
LOCALIZED_OPTION_LETTERS = str.maketrans(
    {"أ": "A", "ا": "A", "ب": "B", "ج": "C", "د": "D", "অ": "A", "ব": "B", "ড": "C", "ঢ": "D"}
    | {"Ａ": "A", "Ｂ": "B", "Ｃ": "C", "Ｄ": "D"}
)

# (letter, option text) pairs: a tuple pickles cheaply on its way to a CPU-pool worker.
Options = Sequence[tuple[str, str]]


def option_pairs(options: Sequence[Mapping[str, str | None]]) -> tuple[tuple[str, str], ...]:
    """(uppercased letter, text) of every option of rows such as `[{"A": "..."}, ...]`; an option written
    as null is no choice."""
    return tuple(
        (letter.strip().upper(), text)
        for option in options
        for letter, text in option.items()
        if text is not None
    )


def _normalized_option(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".").strip()


def option_letter_for_text(candidate: str, options: Options) -> str | None:
    """The letter whose option text equals `candidate`, ignoring case, spacing and a trailing period."""
    wanted = _normalized_option(candidate)
    if not wanted:
        return None
    return next((letter for letter, text in options if _normalized_option(text) == wanted), None)


def letter_from_patterns(text: str, patterns: Sequence[str], options: Options) -> str | None:
    """The last match of the first pattern (case-insensitive) that yields an answer: its first group if
    it has one, else the whole match.

    A single letter counts even when it is not an option (the reward then says it is wrong); other text
    counts when it is an option's text. An invalid pattern is skipped: bad data is not a server error.
    Patterns come from data and may backtrack badly: run this in the CPU pool with a deadline.
    """
    for pattern in patterns:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except (re.error, OverflowError, RecursionError):
            continue
        match = last_match(compiled, text)
        raw = (match.group(1) if compiled.groups else match.group(0)) if match else None
        if not raw:
            continue
        candidate = raw.strip().translate(LOCALIZED_OPTION_LETTERS)
        if len(candidate) == 1 and candidate.isalpha():
            return candidate.upper()
        if letter := option_letter_for_text(candidate, options):
            return letter
    return None
