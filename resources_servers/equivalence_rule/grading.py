"""Rule-based answer matching for equivalence_rule; module-level so the CPU pool's workers can import it."""

import re
from difflib import SequenceMatcher

PREFIX_CHARS = 10
"""How many leading characters of the expected answer the weighted rule compares separately."""
PREFIX_WEIGHT = 0.15

_WHITESPACE = re.compile(r"\s+")


def normalize(text: str) -> str:
    """Case- and spacing-insensitive form: trimmed, lowercased, every whitespace run one space."""
    return _WHITESPACE.sub(" ", text.strip().lower())


def exact_score(response_text: str, expected: str) -> float:
    return float(normalize(response_text) == normalize(expected))


def _ratio(left: str, right: str) -> float:
    return SequenceMatcher(None, left, right).ratio()


def sequence_score(response_text: str, expected: str) -> float:
    """difflib similarity of the normalized strings, 0.0 to 1.0 (two empty strings are 1.0)."""
    return _ratio(normalize(response_text), normalize(expected))


def weighted_sequence_score(response_text: str, expected: str) -> float:
    """Mostly overall similarity, plus a bonus for getting the start right.

    Answers such as "<code word><copied passage>" hinge on their first characters, which a whole-string
    ratio over a long passage barely notices.
    """
    response_norm, expected_norm = normalize(response_text), normalize(expected)
    prefix = expected_norm[:PREFIX_CHARS]
    score = (1 - PREFIX_WEIGHT) * _ratio(response_norm, expected_norm) + PREFIX_WEIGHT * _ratio(
        response_norm[: len(prefix)], prefix
    )
    return min(1.0, max(0.0, score))


SCORERS = {"exact": exact_score, "seq_match": sequence_score, "weighted_seq_match": weighted_sequence_score}


def grade(rule: str, response_text: str, expected: str) -> float:
    return SCORERS[rule](response_text, expected)
