"""The four IMO-GradingBench grades, how a judge's reply names one, and what a grade is worth.

The reply's grade is its last whitespace-separated word once markdown and punctuation are peeled off
(`**Correct**.` reads as `correct`), so a grade mentioned earlier in the reasoning never counts. The
points of a grade are the ones the benchmark's mean absolute error uses; `high` and `low` are the two
halves the binarized accuracy compares.
"""

from __future__ import annotations

import re

GRADE_POINTS: dict[str, int] = {"correct": 7, "almost": 6, "partial": 1, "incorrect": 0}
GRADES = frozenset(GRADE_POINTS)
HIGH_GRADES = frozenset({"correct", "almost"})

# Markdown and punctuation a judge wraps or ends its grade with; the same character set as NeMo Gym strips.
_DECORATION = re.compile(r"[*_`.,;:!?()\[\]{}]+")


def extract_grade(text: str) -> str | None:
    """The grade the reply's last word names, lower-cased, or None when that word is no grade."""
    words = text.split()
    if not words:
        return None
    word = _DECORATION.sub("", words[-1]).lower()
    return word if word in GRADES else None


def normalize_grade(value: str) -> str:
    """A row's gold grade in canonical form; anything but the four grades is a ValueError."""
    grade = value.strip().lower()
    if grade not in GRADES:
        raise ValueError(f"expected_answer must be one of {sorted(GRADES)}, got {value!r}")
    return grade


def same_half(predicted: str | None, gold: str) -> bool:
    """Whether both grades sit on the same side of the pass line (correct/almost versus partial/incorrect)."""
    return predicted is not None and (predicted in HIGH_GRADES) == (gold in HIGH_GRADES)


def points_gap(predicted: str | None, gold: str) -> float | None:
    """|points(predicted) - points(gold)|, or None without a predicted grade (an MAE skips such rollouts)."""
    return None if predicted is None else float(abs(GRADE_POINTS[predicted] - GRADE_POINTS[gold]))
