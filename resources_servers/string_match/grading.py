"""Reading a short free-form answer out of a response and deciding whether it equals the gold one.

Extraction (`extract_answer`) follows the row's `extraction_mode`; equivalence (`match_score`) tries a
ladder of normalizations, from plain text equality to a soft numeric closeness that is worth 0.98, never
1.0 (a near miss should not be mistaken for a match). Every step is one linear pass over its input, so
even a whole response compared in `full_response` mode is cheap enough to grade inline.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Literal

from nemo_gym.text.extraction import last_boxed, last_match

ExtractionMode = Literal["boxed", "final_answer", "last_line", "full_response"]

NEAR_MISS_REWARD = 0.98

_TEXT_WRAPPER = re.compile(r"\\text\s*\{\s*(.*)\s*\}", re.DOTALL)
# `Final answer: X` or `Answer: X` (full-width colon too); the answer runs to the end of its line.
_FINAL_ANSWER = re.compile(r"(?:final\s+answer|answer)\s*[:：][ \t]*([^\n]*)", re.IGNORECASE)
_TRAILING_PERIODS = re.compile(r"[.\s]+$")


# ---------------------------------------------------------------------------------------------------------
# Extraction


def unwrap_text_commands(value: str) -> str:
    r"""`\text{ x }` (nested any number of times) reduced to `x`, as models box a word."""
    while (match := _TEXT_WRAPPER.fullmatch(value)) and _balanced(match.group(1)):
        value = match.group(1).strip()
    return value


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += (char == "{") - (char == "}")
        if depth < 0:
            return False
    return depth == 0


def boxed_answer(text: str) -> str | None:
    boxed = last_boxed(text)
    return None if boxed is None else unwrap_text_commands(boxed.strip()).strip()


def final_answer_line(text: str) -> str | None:
    """What follows the last `Final answer:` / `Answer:`, without trailing periods; None when absent."""
    last = last_match(_FINAL_ANSWER, text)
    if last is None:
        return None
    return _TRAILING_PERIODS.sub("", last.group(1).strip())


def last_nonempty_line(text: str) -> str | None:
    return next((line.strip() for line in reversed(text.splitlines()) if line.strip()), None)


def extract_answer(text: str, mode: ExtractionMode) -> str | None:
    """The answer `mode` reads from the response text; None when it finds none."""
    if mode == "boxed":
        return boxed_answer(text)
    if mode == "final_answer":
        found = final_answer_line(text)
        return found if found is not None else boxed_answer(text)
    if mode == "last_line":
        return last_nonempty_line(text)
    return text.strip() or None


# ---------------------------------------------------------------------------------------------------------
# Normalizations, each a function of one answer; two answers match under one when both map to the same text

_LATEX_WRAPPERS = (
    "boxed", "text", "textbf", "textit", "texttt", "mathrm", "mathbf", "mathit", "mathsf", "mathbb",
    "mathcal", "emph", "url",
)  # fmt: skip
_LATEX_WRAPPER_OPEN = re.compile(r"\\(?:" + "|".join(_LATEX_WRAPPERS) + r")\{")
_MATH_DELIMITERS = re.compile(r"\\[()\[\]]|\$")
_THOUSANDS = re.compile(r"(\d),(?=\d)")
_LIST_SEPARATORS = re.compile(r"[,;]|\band\b|\bor\b")
_UNITS = re.compile(r"\^\{?\\circ\}?|\\circ|°|cm[²³]?|mm|km|m[²³]?|kg")
_UNICODE_MATH = str.maketrans(
    {"°": "^\\circ", "²": "^2", "³": "^3", "⁴": "^4", "⁵": "^5", "⁶": "^6", "⁷": "^7", "⁸": "^8", "⁹": "^9"}
    | {"√": "\\sqrt", "﹣": "-", "﹢": "+", "﹦": "=", "﹤": "<", "﹥": ">", "：": ":", "π": "\\pi"}
)
_US_STATES = {
    "district of columbia": "dc", "new hampshire": "nh", "new jersey": "nj", "new mexico": "nm",
    "new york": "ny", "north carolina": "nc", "north dakota": "nd", "rhode island": "ri",
    "south carolina": "sc", "south dakota": "sd", "west virginia": "wv", "alabama": "al", "alaska": "ak",
    "arizona": "az", "arkansas": "ar", "california": "ca", "colorado": "co", "connecticut": "ct",
    "delaware": "de", "florida": "fl", "georgia": "ga", "hawaii": "hi", "idaho": "id", "illinois": "il",
    "indiana": "in", "iowa": "ia", "kansas": "ks", "kentucky": "ky", "louisiana": "la", "maine": "me",
    "maryland": "md", "massachusetts": "ma", "michigan": "mi", "minnesota": "mn", "mississippi": "ms",
    "missouri": "mo", "montana": "mt", "nebraska": "ne", "nevada": "nv", "ohio": "oh", "oklahoma": "ok",
    "oregon": "or", "pennsylvania": "pa", "tennessee": "tn", "texas": "tx", "utah": "ut", "vermont": "vt",
    "virginia": "va", "washington": "wa", "wisconsin": "wi", "wyoming": "wy",
}  # fmt: skip
# Longest names first, so "west virginia" is not read as "west" + "virginia".
_STATE_NAME = re.compile(r"\b(?:" + "|".join(sorted(_US_STATES, key=len, reverse=True)) + r")\b")


def base_form(answer: str) -> str:
    """NFKC, one pair of outer quotes dropped, lowercased, trailing `.!?` dropped (unless that empties it)."""
    answer = unicodedata.normalize("NFKC", answer)
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "\"'":
        answer = answer[1:-1]
    answer = answer.lower()
    return answer.rstrip(".!?") or answer


def parse_number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def as_float(answer: str) -> str:
    """The canonical float spelling (`"3.50"` and `"$3.5"` alike), else the answer itself."""
    cleaned = answer.replace("\\%", "").replace("\\$", "").replace("$", "").strip()
    value = parse_number(cleaned)
    return answer if value is None else repr(value)


def without_thousands_separators(answer: str) -> str:
    return _THOUSANDS.sub(r"\1", answer).replace("\\%", "%")


def without_latex(answer: str) -> str:
    r"""Wrappers such as `\text{..}` and `\boxed{..}` opened up (their braces dropped, one pass), math
    delimiters removed, whitespace runs made one space."""
    starts = {match.start(): match.end() for match in _LATEX_WRAPPER_OPEN.finditer(answer)}
    kept: list[str] = []
    opened: list[bool] = []  # per open brace: does it belong to a wrapper being removed?
    index = 0
    while index < len(answer):
        if index in starts:  # skip `\text{`; its closing brace goes too
            index = starts[index]
            opened.append(True)
            continue
        char = answer[index]
        if char == "{":
            opened.append(False)
        elif char == "}" and opened:
            if opened.pop():
                index += 1
                continue
        kept.append(char)
        index += 1
    return " ".join(_MATH_DELIMITERS.sub("", "".join(kept)).split())


def as_list(answer: str) -> str:
    """Items separated by commas, semicolons, `and` or `or` joined by single spaces; unchanged when the
    separators made the text more than a tenth shorter (many `and`/`or`: prose, not a list)."""
    separated = _LIST_SEPARATORS.sub(" ", answer)
    if len(separated) < 0.9 * len(answer):
        return answer
    return " ".join(separated.split())


def with_state_abbreviations(answer: str) -> str:
    return as_list(_STATE_NAME.sub(lambda match: _US_STATES[match.group()], answer))


def without_units(answer: str) -> str:
    return _UNITS.sub("", without_latex(answer).translate(_UNICODE_MATH)).strip()


def numeric_closeness(expected: str, predicted: str) -> float:
    """(1 - relative error)², floored at 0, of two answers read as numbers after currency, percent, comma
    and unit marks are dropped; 0 when either is not a number."""
    values = [parse_number(_numeric_text(answer)) for answer in (predicted, expected)]
    if values[0] is None or values[1] is None:
        return 0.0
    predicted_value, expected_value = values
    relative_error = abs(predicted_value - expected_value) / max(abs(expected_value), 1e-9)
    return max(0.0, 1.0 - relative_error) ** 2


def _numeric_text(answer: str) -> str:
    for mark in "$£€%,":
        answer = answer.replace(mark, "")
    answer = _UNITS.sub("", answer.translate(_UNICODE_MATH))
    return answer.replace("\\%", "").replace("\\$", "").strip()


EQUIVALENCES = (as_float, without_thousands_separators, without_latex, as_list, with_state_abbreviations)


def match_score(expected: str, extracted: str, case_sensitive: bool = False) -> float:
    """1.0 when the answers are the same under one of the normalizations, 0.98 when they are numerically
    within about 1% of each other, else 0.0. `case_sensitive` asks for plain equality (spaces at the ends
    aside) and nothing else."""
    if case_sensitive:
        return 1.0 if extracted.strip() == expected.strip() else 0.0
    gold, answer = base_form(expected), base_form(extracted)
    if gold == answer or any(normalize(gold) == normalize(answer) for normalize in EQUIVALENCES):
        return 1.0
    if numeric_closeness(gold, answer) > NEAR_MISS_REWARD:
        return NEAR_MISS_REWARD
    gold_bare, answer_bare = without_units(gold), without_units(answer)
    if gold_bare == answer_bare:
        return 1.0
    if numeric_closeness(gold_bare, answer_bare) > NEAR_MISS_REWARD:
        return NEAR_MISS_REWARD
    return 0.0
