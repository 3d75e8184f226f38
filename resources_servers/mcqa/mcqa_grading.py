"""Answer extraction for multiple-choice questions, as plain functions so they can run in the CPU pool.

Kept apart from app.py because the worker processes import it by module name: a row's `output_regex`
is arbitrary user input and a pathological pattern must be interruptible without touching the server's
event loop. The module is named `mcqa_grading` (not `grading`) so it never shadows another server's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

STRICT = "strict_single_letter_boxed"
LENIENT_BOXED = "lenient_boxed"
LENIENT_ANSWER_COLON = "lenient_answer_colon"
LENIENT_ANSWER_COLON_MD = "lenient_answer_colon_md"

# Option letters as some localized prompts write them: Arabic, Bengali and full-width forms of A-D.
LOCALIZED_LETTERS = {
    "أ": "A",
    "ا": "A",
    "ب": "B",
    "ج": "C",
    "د": "D",
    "অ": "A",
    "ব": "B",
    "ড": "C",
    "ঢ": "D",
    "Ａ": "A",
    "Ｂ": "B",
    "Ｃ": "C",
    "Ｄ": "D",
}

_BOXED_OPEN = re.compile(r"\\boxed\s*\{")
_TEXT_WRAPPER = re.compile(r"\\text\s*\{([^{}]*)\}")
_LONE_UPPERCASE = re.compile(r"[^A-Za-z]*([A-Z])[^A-Za-z]*")
_ANSWER_COLON = re.compile(r"answer\s*:", re.IGNORECASE)
_ANSWER_COLON_MD = re.compile(r"[*_]*answer[*_]*\s*:", re.IGNORECASE)

# (letter, option text) pairs; a tuple so the argument pickles cheaply and cannot be mutated.
Options = Sequence[tuple[str, str]]


def normalize_text(text: str) -> str:
    """Lowercase, whitespace collapsed, ends trimmed: the form option texts are compared in."""
    return " ".join(text.lower().split())


def strip_text_wrappers(text: str) -> str:
    r"""`\text{B}` -> `B`, repeatedly, so LaTeX-wrapped answers compare like plain ones."""
    previous = None
    while previous != text:
        previous, text = text, _TEXT_WRAPPER.sub(r"\1", text)
    return text


def option_letter_for_text(candidate: str, options: Options) -> str | None:
    """The letter whose option text equals `candidate` once both are normalized (a trailing period ignored)."""
    wanted = normalize_text(candidate).rstrip(".").strip()
    if not wanted:
        return None
    for letter, text in options:
        if normalize_text(text).rstrip(".").strip() == wanted:
            return letter
    return None


def boxed_contents(text: str) -> list[str]:
    r"""The brace-balanced content of every `\boxed{...}`, left to right; an unclosed one is dropped."""
    contents = []
    for opening in _BOXED_OPEN.finditer(text):
        depth, start = 1, opening.end()
        for position in range(start, len(text)):
            char = text[position]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    contents.append(text[start:position])
                    break
    return contents


def extract_with_template_regex(text: str, patterns: Sequence[str], options: Options) -> str | None:
    """The last match of the first pattern that yields an answer; any single letter counts, allowed or not.

    A pattern with a group contributes its first group, otherwise the whole match. An invalid pattern
    is skipped: a broken template must not turn into a server error.
    """
    for pattern in patterns:
        try:
            compiled = re.compile(pattern, re.IGNORECASE)
        except re.error:
            continue
        last = None
        for match in compiled.finditer(text):
            last = match
        if last is None:
            continue
        raw = last.group(1) if compiled.groups else last.group(0)
        if raw is None:
            continue
        candidate = "".join(LOCALIZED_LETTERS.get(char, char) for char in raw.strip())
        if len(candidate) == 1 and candidate.isalpha():
            return candidate.upper()
        if letter := option_letter_for_text(candidate, options):
            return letter
    return None


def extract_strict_boxed(text: str, allowed: frozenset[str]) -> str | None:
    """The first `\\boxed{}` holding one uppercase letter among non-letters; None unless that letter is an option."""
    for content in boxed_contents(text):
        if match := _LONE_UPPERCASE.fullmatch(content):
            letter = match.group(1)
            return letter if letter in allowed else None
    return None


def extract_lenient_boxed(text: str, allowed: frozenset[str], options: Options) -> str | None:
    """Strict first; else the one option whose text appears inside the first `\\boxed{}`."""
    if letter := extract_strict_boxed(text, allowed):
        return letter
    contents = boxed_contents(text)
    if not contents:
        return None
    inside = normalize_text(strip_text_wrappers(contents[0]))
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
        if letter := extract_with_template_regex(text, output_regexes, options):
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
