"""RULER v2 scores, meant to run in a CPU worker: the word edit distance costs answer words × reference
words for every reference, both set by the caller."""

from __future__ import annotations

import re

from rapidfuzz.distance import Levenshtein

from nemo_gym.text.extraction import last_boxed

_CONTROL = re.compile(r"[\x00-\x1f]")
# A "Document N:" header and the lines after it up to the first blank line: the part match type drops
# documents the model quotes back, so a quoted distractor does not count as the answer.
_DOCUMENT_BLOCK = re.compile(r"Document \d+:(?:.*\n)+?\n")
_FINAL_ANSWER = re.compile(r"The final answer is (.+)$", re.MULTILINE)
_LONE_CAPITAL = re.compile(r"\b[A-Z]\b")
_ANSWER_COLON = re.compile(r"(?i)[*_]{0,2}Answer[*_]{0,2}\s*:[\s*_]{0,2}\s*([A-Z])(?![a-zA-Z0-9])")
# Option letters some localized prompts use (Arabic, Bengali, full-width), read as A-D.
_LOCAL_LETTERS = str.maketrans(
    {"أ": " A", "ب": " B", "ج": " C", "د": " D", "অ": " A", "ব": " B", "ড": " C", "ঢ": " D"}
    | {"Ａ": " A", "Ｂ": " B", "Ｃ": " C", "Ｄ": " D"}
)


def parsed_prediction(text: str) -> str:
    """The answer as reported: stripped, control characters made newlines, stripped again."""
    return _CONTROL.sub("\n", text.strip()).strip()


def word_error_rate(hypothesis: str, reference: str) -> float:
    """Word edit distance over the reference's word count; infinite for a reference without words."""
    reference_words = reference.split()
    if not reference_words:
        return float("inf")
    return Levenshtein.distance(hypothesis.split(), reference_words) / len(reference_words)


def soft_match(prediction: str, reference: str) -> float:
    """1.0 when the reference occurs in the prediction (ignoring case), else 1 − WER, whichever is larger.

    1 − WER can be negative (a long prediction against a short reference), but the substring score keeps
    the result at 0.0 or above."""
    prediction, reference = prediction.lower(), reference.lower()
    return max(1.0 if reference in prediction else 0.0, 1.0 - word_error_rate(prediction, reference))


def string_match(match_type: str, prediction: str, references: list[str]) -> float:
    """`all`: mean soft match over the references; `2steps`: the same on the last paragraph only;
    `part`: the best soft match, once quoted `Document N:` blocks are removed. `references` is not empty."""
    if match_type == "part":
        prediction = _DOCUMENT_BLOCK.sub("", prediction)
        return max(soft_match(prediction, reference) for reference in references)
    if match_type == "2steps":
        prediction = prediction.split("\n\n")[-1]
    return sum(soft_match(prediction, reference) for reference in references) / len(references)


def _letter_in(extracted: str) -> str | None:
    extracted = extracted.translate(_LOCAL_LETTERS).strip()
    if len(extracted) == 1:
        return extracted.upper()
    capitals = _LONE_CAPITAL.findall(extracted)
    return capitals[-1] if capitals else None


def option_letter(text: str) -> str | None:
    r"""The chosen option letter: from the last `\boxed{}`, else the last `The final answer is ...` line (a
    lone letter, or the last standalone capital in it), else the last `Answer: X`; None when none reads."""
    extracted = last_boxed(text)
    if extracted is None:
        finals = _FINAL_ANSWER.findall(text)
        extracted = finals[-1] if finals else None
    letter = _letter_in(extracted) if extracted is not None else None
    if letter is None:
        answers = _ANSWER_COLON.findall(text)
        letter = answers[-1].upper() if answers else None
    return letter
