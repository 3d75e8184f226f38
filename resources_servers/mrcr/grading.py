"""MRCR similarity, meant to run in a CPU worker: difflib is quadratic in the worst case on long text."""

from __future__ import annotations

from difflib import SequenceMatcher


def similarity(answer: str, expected_answer: str, prefix: str) -> float:
    """difflib ratio of the answer and the expected answer, each without the leading `prefix`."""
    return SequenceMatcher(None, answer.removeprefix(prefix), expected_answer.removeprefix(prefix)).ratio()
