"""Which option letter a GPQA-Diamond answer picks, as plain functions the CPU pool's workers import.

A row's `template_metadata.output_regex` is data, and a pathological pattern must be interruptible off the
server's event loop, so extraction runs in a worker. Without a template (or when it finds nothing) the
GPQA conventions apply: the *last* `\\boxed{...}`, else the *last* `Answer: X` line, because models often
restate options before settling on one.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence

# Option letters as some localized prompts write them: Arabic, Bengali and full-width forms of A-D.
LOCALIZED_LETTERS = str.maketrans(
    {"أ": "A", "ا": "A", "ب": "B", "ج": "C", "د": "D", "অ": "A", "ব": "B", "ড": "C", "ঢ": "D"}
    | {"Ａ": "A", "Ｂ": "B", "Ｃ": "C", "Ｄ": "D"}
)

_BOXED_OPEN = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")
_STANDALONE_CAPITAL = re.compile(r"\b([A-Z])\b")
# `Answer: C`, `**Answer:** C`, `__Answer__: c`; the letter must not start a longer word.
_ANSWER_LINE = re.compile(r"[*_]{0,2}answer[*_]{0,2}\s*:[\s*_]{0,2}\s*([a-z])(?![a-z0-9])", re.IGNORECASE)

# (letter, option text) pairs: a tuple pickles cheaply on its way to a worker.
Options = Sequence[tuple[str, str]]


def _normalized(text: str) -> str:
    return " ".join(text.lower().split()).rstrip(".").strip()


def letter_for_option_text(candidate: str, options: Options) -> str | None:
    """The letter whose option text equals `candidate`, compared case- and spacing-insensitively."""
    wanted = _normalized(candidate)
    if not wanted:
        return None
    return next((letter for letter, text in options if _normalized(text) == wanted), None)


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last match, without keeping the earlier ones."""
    tail = collections.deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


def from_template(text: str, patterns: Sequence[str], options: Options) -> str | None:
    """The last match of the first template pattern that yields an answer (its first group if it has one).

    A single letter counts even when it is not an option (the reward then says it is wrong); other text
    counts when it is an option's text. An invalid pattern is skipped: bad data is not a server error.
    """
    for pattern in patterns:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except (re.error, OverflowError, RecursionError):
            continue
        last = _last_match(compiled, text)
        raw = None if last is None else (last.group(1) if compiled.groups else last.group(0))
        if not raw:
            continue
        candidate = raw.strip().translate(LOCALIZED_LETTERS)
        if len(candidate) == 1 and candidate.isalpha():
            return candidate.upper()
        if letter := letter_for_option_text(candidate, options):
            return letter
    return None


def last_boxed(text: str) -> str | None:
    r"""The brace-balanced content of the last `\boxed{...}` that closes; None when there is none.

    One pass over the braces (linear even for thousands of unclosed boxes).
    """
    box_braces = {opening.end() - 1 for opening in _BOXED_OPEN.finditer(text)}
    if not box_braces:
        return None
    open_braces: list[int] = []
    last: tuple[int, str] | None = None
    for brace in _BRACE.finditer(text, min(box_braces)):
        if brace.group() == "{":
            open_braces.append(brace.start())
        elif open_braces:
            opened = open_braces.pop()
            if opened in box_braces and (last is None or opened > last[0]):
                last = (opened, text[opened + 1 : brace.start()])
    return None if last is None else last[1]


def from_boxed(text: str) -> str | None:
    """A lone capital in the last box, or else its last standalone capital (`\\boxed{\\text{(C)}}` -> C)."""
    content = last_boxed(text)
    if content is None:
        return None
    content = content.strip()
    if len(content) == 1 and content.isupper():
        return content
    capitals = _STANDALONE_CAPITAL.findall(content)
    return capitals[-1] if capitals else None


def from_answer_line(text: str) -> str | None:
    matches = _ANSWER_LINE.findall(text)
    return matches[-1].upper() if matches else None


def extract_letter(text: str, options: Options, template_patterns: Sequence[str]) -> str | None:
    """The chosen letter: template regex, then last box, then last `Answer:`; a letter that is not one of the
    options counts as no answer unless a template pattern produced it."""
    text = text.strip()
    if not text:
        return None
    if template_patterns and (letter := from_template(text, template_patterns, options)):
        return letter
    letter = from_boxed(text) or from_answer_line(text)
    allowed = {option_letter for option_letter, _ in options}
    if letter is not None and allowed and letter not in allowed:
        return None
    return letter
