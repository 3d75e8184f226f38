"""Symbolic grading of a math answer with math-verify, meant to run in a CPU worker process.

`grade` is module-level and takes only strings, so `nemo_gym.serving.cpu_pool.run_cpu_bound` can ship it to a
worker, whose deadline covers the whole check. math-verify's own timeouts are switched off: they use
`signal.alarm` too, and would cancel the pool's timer.
"""

from __future__ import annotations

import logging
import re
from typing import NamedTuple

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

# math-verify warns once per process that its timeouts are off (they are replaced by ours) and on every
# prediction it cannot extract; neither helps a server log.
logging.getLogger("math_verify").setLevel(logging.ERROR)

GOLD_TARGETS = (LatexExtractionConfig(),)
PREDICTION_TARGETS = (ExprExtractionConfig(), LatexExtractionConfig())
OUTER_DELIMITERS = re.compile(r"^\s*(?:\\\((?P<paren>.*)\\\)|\$(?P<dollar>.*)\$)\s*$", re.DOTALL)


class Grade(NamedTuple):
    library_reward: float
    extracted_answer: str | None
    timed_out: bool = False


def strip_outer_delimiters(answer: str) -> str:
    """`\\( x \\)` or `$x$` -> `x` (one outer pair only); anything else unchanged."""
    match = OUTER_DELIMITERS.match(answer)
    if match is None:
        return answer
    return match.group("paren") if match.group("paren") is not None else match.group("dollar")


def grade(expected_answer: str, generated_text: str) -> Grade:
    """Check `generated_text` against `expected_answer`; (0.0, None) when either cannot be read."""
    try:
        return _grade(expected_answer, generated_text)
    except Exception:
        return Grade(0.0, None)


def _grade(expected_answer: str, generated_text: str) -> Grade:
    gold_text = "\\boxed{" + strip_outer_delimiters(expected_answer) + "}"
    golds = parse(gold_text, GOLD_TARGETS, parsing_timeout=None)
    if not golds:
        # The reference itself is unreadable: nothing can be judged equal to it.
        return Grade(0.0, None)
    predictions = parse(generated_text, PREDICTION_TARGETS, parsing_timeout=None)
    if not predictions:
        return Grade(0.0, None)
    for prediction in predictions:
        if verify(golds, prediction, timeout_seconds=None):
            return Grade(1.0, str(prediction))
    return Grade(0.0, str(predictions[0]))
