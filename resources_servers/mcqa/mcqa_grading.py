"""Answer extraction for multiple-choice questions, as plain functions so they can run in the CPU pool.

Kept apart from app.py because the worker processes import it by its module path: a row's `output_regex`
is arbitrary user input and a pathological pattern must be interruptible without touching the server's
event loop. The template-regex rule, option matching and box reading are the core helpers of
`nemo_gym.text.extraction`, shared with gpqa_diamond.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nemo_gym.text.extraction import (
    Options,
    boxed_spans,
    letter_from_patterns,
    option_letter_for_text,
    strip_text_wrappers,
)

STRICT = "strict_single_letter_boxed"
LENIENT_BOXED = "lenient_boxed"
LENIENT_ANSWER_COLON = "lenient_answer_colon"
LENIENT_ANSWER_COLON_MD = "lenient_answer_colon_md"

_LONE_UPPERCASE = re.compile(r"[^A-Za-z]*([A-Z])[^A-Za-z]*")
_ANSWER_COLON = re.compile(r"answer\s*:", re.IGNORECASE)
_ANSWER_COLON_MD = re.compile(r"[*_]*answer[*_]*\s*:", re.IGNORECASE)


def normalize_text(text: str) -> str:
    """Lowercase, whitespace collapsed, ends trimmed: the form option texts are compared in."""
    return " ".join(text.lower().split())


def extract_strict_boxed(text: str, allowed: frozenset[str]) -> str | None:
    """The first `\\boxed{}` holding one uppercase letter among non-letters; None unless that letter is an option."""
    for start, end in boxed_spans(text):
        if match := _LONE_UPPERCASE.fullmatch(text, start, end):
            letter = match.group(1)
            return letter if letter in allowed else None
    return None


def extract_lenient_boxed(text: str, allowed: frozenset[str], options: Options) -> str | None:
    """Strict first; else the one option whose text appears inside the first `\\boxed{}`."""
    if letter := extract_strict_boxed(text, allowed):
        return letter
    spans = boxed_spans(text)
    if not spans:
        return None
    inside = normalize_text(strip_text_wrappers(text[spans[0][0] : spans[0][1]]))
    found = [letter for letter, option in options if (needle := normalize_text(option)) and needle in inside]
    return found[0] if len(found) == 1 else None


def _line_after(match: re.Match[str], text: str) -> str:
    return text[match.end() :].split("\n", 1)[0]


def extract_answer_colon(text: str, allowed: frozenset[str], options: Options) -> str | None:
    """The rest of the line after the first `answer:`: an option letter in any case, or an option's text."""
    match = _ANSWER_COLON.search(text)
    if match is None:
        return None
    rest = strip_text_wrappers(_line_after(match, text)).strip()
    if len(rest) == 1 and rest.upper() in allowed:
        return rest.upper()
    return option_letter_for_text(rest, options)


def extract_answer_colon_md(text: str, allowed: frozenset[str]) -> str | None:
    """Like `answer:` but markdown emphasis (`**Answer:** B`, `__Answer__: A`) is ignored; uppercase letters only."""
    match = _ANSWER_COLON_MD.search(text)
    if match is None:
        return None
    rest = strip_text_wrappers(_line_after(match, text)).strip().strip("*_").strip()
    return rest if len(rest) == 1 and rest in allowed else None


def extract_answer(
    text: str, options: Options, mode: str, output_regexes: Sequence[str] | None
) -> str | None:
    """The chosen letter in `text`: the template's own regexes first, then the grading mode's rule."""
    text = text.strip()
    if not text:
        return None
    if output_regexes:
        if letter := letter_from_patterns(text, output_regexes, options):
            return letter
    allowed = frozenset(letter for letter, _ in options)
    if mode == STRICT:
        return extract_strict_boxed(text, allowed)
    if mode == LENIENT_BOXED:
        return extract_lenient_boxed(text, allowed, options)
    if mode == LENIENT_ANSWER_COLON:
        return extract_answer_colon(text, allowed, options)
    if mode == LENIENT_ANSWER_COLON_MD:
        return extract_answer_colon_md(text, allowed)
    raise ValueError(f"unknown grading mode {mode!r}")
