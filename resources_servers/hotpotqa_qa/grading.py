"""SQuAD-style answer grading for hotpotqa_qa, as plain functions the CPU pool's workers import.

The answer is first cut out of the model's text (a JSON `{"answer": ...}`, a `\\boxed{}`, an `Answer:`
line, else the whole text), then compared with each gold answer after normalization: exact match and
token-overlap F1, keeping the best over the gold answer and its aliases.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from nemo_gym.text.extraction import last_boxed, last_match, strip_text_wrappers

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ANSWER_LINE = re.compile(r"^[ \t>*_#]*(?:final )?answer[*_]*\s*:[ \t*_]*(.*)$", re.IGNORECASE | re.MULTILINE)
# Answers that HotpotQA scores all-or-nothing: "yes" against "no" shares no credit.
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


@dataclass(frozen=True)
class Grade:
    extracted_answer: str | None
    exact_match: float
    f1: float


def normalize_answer(text: str) -> str:
    """Lowercase, ASCII punctuation removed, articles a/an/the removed, whitespace runs collapsed."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of token precision and recall of the normalized strings.

    Two answers without tokens agree; "yes", "no" and "noanswer" earn nothing unless identical.
    """
    predicted, expected = normalize_answer(prediction), normalize_answer(gold)
    if (predicted in _CLOSED_ANSWERS or expected in _CLOSED_ANSWERS) and predicted != expected:
        return 0.0
    predicted_tokens, expected_tokens = predicted.split(), expected.split()
    if not predicted_tokens or not expected_tokens:
        return float(predicted_tokens == expected_tokens)
    shared = sum((Counter(predicted_tokens) & Counter(expected_tokens)).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / len(predicted_tokens), shared / len(expected_tokens)
    return 2 * precision * recall / (precision + recall)


def _json_answer(text: str) -> str | None:
    """The `answer` of the last JSON object in the text that has one (strings, numbers, booleans)."""
    decoder = json.JSONDecoder()
    found = None
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict) and isinstance(value.get("answer"), str | int | float | bool):
            answer = value["answer"]
            found = json.dumps(answer) if isinstance(answer, bool) else str(answer)
        position = text.find("{", end)
    return found


def _last_boxed(text: str) -> str | None:
    r"""The content of the last closed `\boxed{...}`, `\text{}` wrappers removed."""
    content = last_boxed(text)
    return None if content is None else strip_text_wrappers(content)


def _answer_line(text: str) -> str | None:
    last = last_match(_ANSWER_LINE, text)
    return last.group(1).strip().strip("*_").strip() if last else None


def extract_answer(text: str) -> str | None:
    """The short answer in a model's text; None when there is nothing to grade."""
    text = text.strip()
    for candidate in (_json_answer(text), _last_boxed(text), _answer_line(text), text):
        if candidate is not None and candidate.strip():
            return candidate.strip()
    return None


def grade(text: str, golds: Sequence[str]) -> Grade:
    """Best exact match and best F1 of the extracted answer over the gold answers."""
    answer = extract_answer(text)
    if answer is None:
        return Grade(None, 0.0, 0.0)
    return Grade(
        answer,
        max(exact_match(answer, gold) for gold in golds),
        max(token_f1(answer, gold) for gold in golds),
    )
