"""The final answer (the last `\\boxed{...}`) checked against the reference with math-verify.

`grade` is module-level and takes only strings so it can run in the CPU worker pool, whose deadline
covers it: sympy can take very long on adversarial expressions. math-verify's own timeouts are off for
the same reason as in math_with_judge (they use `signal.alarm`, which the pool's timer needs).
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from math_verify import LatexExtractionConfig, parse, verify

from nemo_gym.text.extraction import last_boxed

logging.getLogger("math_verify").setLevel(logging.ERROR)

BOXED = "\\boxed{"
TARGETS = (LatexExtractionConfig(),)


class Grade(NamedTuple):
    reward: float
    extracted_answer: str | None


def grade(expected_answer: str, final_text: str) -> Grade:
    """1.0 when the last boxed answer equals the reference mathematically (or as text, spaces aside)."""
    answer = last_boxed(final_text)
    if answer is None:
        return Grade(0.0, None)
    if _squashed(answer) == _squashed(expected_answer):
        return Grade(1.0, answer)
    try:
        golds = parse(BOXED + expected_answer + "}", TARGETS, parsing_timeout=None)
        predictions = parse(BOXED + answer + "}", TARGETS, parsing_timeout=None)
        equal = bool(golds) and bool(predictions) and verify(golds, predictions, timeout_seconds=None)
    except Exception:
        equal = False
    return Grade(float(equal), answer)


def _squashed(text: str) -> str:
    return "".join(text.split())
