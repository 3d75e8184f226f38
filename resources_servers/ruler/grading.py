"""RULER string-match scores, meant to run in a CPU worker: the cost grows with references × text length."""

from __future__ import annotations

# Subsets whose question has several acceptable answers: finding any one of them is enough.
ANY_REFERENCE_SUBSETS = frozenset({"qa_1", "qa_2"})


def string_match(subset: str, prediction: str, references: list[str]) -> float:
    """For qa_1/qa_2, 1.0 if any reference occurs in the prediction; otherwise the share that occurs.

    Case-insensitive substring tests on the stripped prediction; `references` must not be empty."""
    text = prediction.strip().lower()
    found = [reference.lower() in text for reference in references]
    if subset in ANY_REFERENCE_SUBSETS:
        return float(any(found))
    return sum(found) / len(found)
