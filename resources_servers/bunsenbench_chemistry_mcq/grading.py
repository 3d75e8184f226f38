"""Reading a chemistry multiple-choice answer: an option letter, or an option's text written out.

Prompts ask for the chosen option's text inside `<choice></choice>` tags, copied exactly; models also
answer `Answer: B`, `\\boxed{B}`, `The answer is CO₂`, ... Every such marker in the response is a
candidate; the last one that reads as an allowed letter or as an option's text wins, else the last and
then the first line of the response are tried. Option texts are compared after chemistry-aware Unicode
normalization (subscripts, superscripts, dashes, middle dots, micro signs), so `CO₂` is `CO2`. A
`<choice>` inside the echoed `<choices>` list is the question, not an answer, and is skipped.

When no choice is read, `error_mode` says why as one of a few mutually exclusive buckets.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence

from nemo_gym.text.extraction import boxed_spans

Options = Sequence[tuple[str, str]]  # (letter, text)

ERROR_MODES = (
    "correct",
    "wrong_answer",
    "refusal",
    "early_termination",
    "malformed_choice",
    "format_violation",
)

_ANSWER_TAG = re.compile(
    r"<\s*(answer|choice|response|final_answer|final-answer)\b[^>]*>(.*?)<\s*/\s*\1\s*>",
    re.IGNORECASE | re.DOTALL,
)
_CHOICES_BLOCK = re.compile(r"<\s*choices\b[^>]*>.*?<\s*/\s*choices\s*>", re.IGNORECASE | re.DOTALL)
_CHOICE_TAG = re.compile(r"<\s*choice\b[^>]*>(.*?)<\s*/\s*choice\s*>", re.IGNORECASE | re.DOTALL)
_ANSWER_LINE = re.compile(
    r"^[ \t]*(?:(?:[-*•]|\d+[.)])[ \t]*)?(?:\*\*)?answer(?:\*\*)?[ \t]*:[ \t]*(.+?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_INLINE_ANSWER = re.compile(r"(?:\*\*)?answer(?:\*\*)?[ \t]*:[ \t]*([^\r\n]+)", re.IGNORECASE)
_ANSWER_PHRASE = re.compile(
    r"(?:the\s+(?:correct\s+)?answer\s+is|my\s+answer\s+is|i\s+(?:choose|select))\s+([^\n]+)", re.IGNORECASE
)
_THINK_OPEN = re.compile(r"<\s*think\b[^>]*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
_APOSTROPHE = r"(?:'|’)"
REFUSAL = re.compile(
    r"i\s*"
    + _APOSTROPHE
    + r"?\s*m\s+sorry[, ]+(?:but\s+)?i\s+(?:can"
    + _APOSTROPHE
    + r"?t|cannot|am\s+unable|"
    r"won" + _APOSTROPHE + r"?t)"
    r"|i\s+(?:can" + _APOSTROPHE + r"?t|cannot)\s+(?:help|assist|comply|provide|answer|do\s+that|continue)"
    r"|i\s+am\s+(?:not\s+able|unable)\s+to\s+(?:help|assist|comply|provide|answer)"
    r"|i\s+won" + _APOSTROPHE + r"?t\s+be\s+able\s+to\s+(?:help|assist|provide|answer)"
    r"|as\s+an\s+ai(?:\s+language)?\s+model[, ]+i"
    r"|i\s+(?:must|have\s+to|will\s+have\s+to)\s+(?:decline|refuse)"
    r"|i\s+do\s+not\s+feel\s+comfortable",
    re.IGNORECASE,
)
_OPTION_OR_CHOICE = re.compile(r"(?:option|choice)\s+([A-Z])\s*[)\].:]?", re.IGNORECASE)
_LEADING_LETTER = re.compile(r"([A-Z])[)\].:](?:\s|$)", re.IGNORECASE)
_LONE_LETTER = re.compile(r"[^A-Za-z]*([A-Za-z])[^A-Za-z]*")
_BOXED_WHOLE = re.compile(r"\\boxed\{\s*(.*?)\s*\}", re.DOTALL)
_TEXT_WRAPPER = re.compile(r"\\(?:text|mathrm|operatorname)\{\s*(.*?)\s*\}", re.DOTALL)
_EDGE_NOISE = " \t\r\n`*_\"'"
_CHEMISTRY_CHARACTERS = str.maketrans(
    dict(zip("₀₁₂₃₄₅₆₇₈₉⁰¹²³⁴⁵⁶⁷⁸⁹", "01234567890123456789", strict=True))
    | {"⁺": "+", "⁻": "-", "₊": "+", "₋": "-", "＋": "+", "−": "-", "–": "-", "—": "-", "‒": "-", "‑": "-"}
    | {"×": "x", "✕": "x", "·": ".", "∙": ".", "⋅": ".", "•": ".", "µ": "u", "μ": "u", "⁄": "/", "∕": "/"}
)


def normalize_chemistry_text(value: str) -> str:
    """HTML entities decoded, NFKC, sub/superscripts and look-alike signs made ASCII, invisible format
    characters dropped, whitespace runs made one space."""
    value = unicodedata.normalize("NFKC", html.unescape(value)).translate(_CHEMISTRY_CHARACTERS)
    value = "".join(char for char in value if unicodedata.category(char) != "Cf")
    return " ".join(value.split())


def allowed_letters(options: Options, gold: str | None) -> frozenset[str]:
    letters = {letter for letter, _ in options}
    if gold is not None and len(gold) == 1 and gold.isalpha():
        letters.add(gold)
    return frozenset(letters)


# ---------------------------------------------------------------------------------------------------------
# One candidate


def _letter(candidate: str, allowed: frozenset[str]) -> str | None:
    if len(candidate) == 1 and candidate.isalpha():
        return candidate.upper() if candidate.upper() in allowed else None
    for match in (
        _OPTION_OR_CHOICE.fullmatch(candidate),  # "Option B"
        _LEADING_LETTER.match(candidate),  # "B) CO2"
        _LONE_LETTER.fullmatch(candidate),  # "(B)", "B."
    ):
        if match and match.group(1).upper() in allowed:
            return match.group(1).upper()
    return None


def _option_text(candidate: str, options: Options, allowed: frozenset[str]) -> str | None:
    wanted = normalize_chemistry_text(candidate)
    return next(
        (
            letter
            for letter, text in options
            if letter in allowed and normalize_chemistry_text(text) == wanted
        ),
        None,
    )


def strip_wrappers(candidate: str) -> str:
    r"""A candidate without quotes, bold, a whole `\boxed{}`, `\text{}`-like wrappers, enclosing brackets
    or trailing punctuation."""
    candidate = candidate.strip(_EDGE_NOISE)
    if boxed := _BOXED_WHOLE.fullmatch(candidate):
        candidate = boxed.group(1).strip()
    while wrapper := _TEXT_WRAPPER.fullmatch(candidate):
        candidate = wrapper.group(1).strip()
    while len(candidate) >= 2 and candidate[0] in "([{\"'<" and candidate[-1] in ")]}\"'>":
        candidate = candidate[1:-1].strip(_EDGE_NOISE)
    return candidate.strip(_EDGE_NOISE + ".;,")


def parse_candidate(candidate: str, options: Options, allowed: frozenset[str]) -> str | None:
    """The letter a candidate answer names (as a letter or as an option's text), as written or with its
    wrappers stripped; None when it names none."""
    for text in (candidate.strip(), strip_wrappers(candidate)):
        if text and (found := _letter(text, allowed) or _option_text(text, options, allowed)):
            return found
    return None


# ---------------------------------------------------------------------------------------------------------
# A whole response


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def answer_candidates(text: str) -> list[tuple[int, str]]:
    """(position, text) of every answer marker's content: tags, boxes, `Answer:` lines and phrases."""
    listed = [match.span() for match in _CHOICES_BLOCK.finditer(text)]
    candidates = [
        (match.start(), match.group(2))
        for match in _ANSWER_TAG.finditer(text)
        if not (match.group(1).lower() == "choice" and _inside(match.start(), listed))
    ]
    candidates += [(start - len("\\boxed{"), text[start:end]) for start, end in boxed_spans(text)]
    for pattern in (_ANSWER_LINE, _INLINE_ANSWER, _ANSWER_PHRASE):
        candidates += [(match.start(), match.group(1)) for match in pattern.finditer(text)]
    return candidates


def extract_choice(text: str, options: Options, allowed: frozenset[str]) -> str | None:
    """The letter the response chooses: the last candidate that parses, else its last or first line."""
    for _, candidate in sorted(answer_candidates(text), reverse=True):
        if (letter := parse_candidate(candidate, options, allowed)) is not None:
            return letter
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines[-1:] + lines[:1]:
        if (letter := parse_candidate(line, options, allowed)) is not None:
            return letter
    return None


def choice_tag_outside_choices(text: str) -> bool:
    listed = [match.span() for match in _CHOICES_BLOCK.finditer(text)]
    return any(not _inside(match.start(), listed) for match in _CHOICE_TAG.finditer(text))


def has_unclosed_think(text: str) -> bool:
    return len(_THINK_OPEN.findall(text)) > len(_THINK_CLOSE.findall(text))


def grade_text(text: str, options: Options, gold: str) -> tuple[str | None, str]:
    """(the chosen letter, the error mode the text alone decides). `early_termination` and a refusal
    sent as a refusal part come from the response object and are decided by the caller before this
    mode is used; the text-level mode here is the rest of the ladder."""
    allowed = allowed_letters(options, gold)
    predicted = extract_choice(text.strip(), options, allowed) if text.strip() else None
    if predicted is not None:
        return predicted, "correct" if predicted == gold else "wrong_answer"
    if has_unclosed_think(text):
        return None, "early_termination"
    if REFUSAL.search(text):
        return None, "refusal"
    if choice_tag_outside_choices(text):
        return None, "malformed_choice"
    return None, "format_violation"


def gold_letter(expected_answer: str, options: Options) -> str | None:
    """The gold as a letter: a letter as written (wrappers stripped), or the letter of the option whose
    text it is; None when it is neither."""
    expected = strip_wrappers(expected_answer).upper()
    if len(expected) == 1 and expected.isalpha():
        return expected
    return parse_candidate(expected_answer, options, allowed_letters(options, None))
