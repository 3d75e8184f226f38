"""Reading the DeepSearchQA judge's per-item decisions and turning them into answer-set scores."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics

FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
SCORE_NAMES = ("f1", "precision", "recall", "fully_correct", "fully_incorrect", "correct_with_extraneous")


class UnreadableJudgment(ValueError):
    """The judge's answer is not the JSON object the prompt asks for."""


@dataclass(frozen=True)
class SetScores:
    precision: float
    recall: float
    f1: float
    fully_correct: float
    fully_incorrect: float
    correct_with_extraneous: float


def parse_judgment(text: str) -> dict[str, Any]:
    """The judge's `Answer Correctness` object: `Correctness Details` maps each expected item to a boolean
    (non-empty), `Excessive Answers` (optional, default []) lists the answer's items beyond the set."""
    text = text.strip()
    fenced = FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise UnreadableJudgment(f"not JSON ({error.msg})") from None
    result = document.get("Answer Correctness") if isinstance(document, dict) else None
    if not isinstance(result, dict):
        raise UnreadableJudgment("no `Answer Correctness` object")
    details = result.get("Correctness Details")
    if not isinstance(details, dict) or not details or not all(isinstance(v, bool) for v in details.values()):
        raise UnreadableJudgment("`Correctness Details` must be a non-empty object of booleans")
    excessive = result.get("Excessive Answers", [])
    if not isinstance(excessive, list) or not all(isinstance(item, str) for item in excessive):
        raise UnreadableJudgment("`Excessive Answers` must be a list of strings")
    return {**result, "Excessive Answers": excessive}


def set_scores(judgment: dict[str, Any]) -> SetScores:
    """Precision = matched / (matched + excessive), recall = matched / expected items, F1 their harmonic mean;
    fully correct = every item and nothing extra, fully incorrect = no item, correct with extraneous =
    every item plus extras."""
    decisions = judgment["Correctness Details"]
    matched, expected = sum(decisions.values()), len(decisions)
    excessive = len(judgment["Excessive Answers"])
    precision = matched / (matched + excessive) if matched + excessive else 0.0
    recall = matched / expected
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    complete = matched == expected
    return SetScores(
        precision=precision,
        recall=recall,
        f1=f1,
        fully_correct=float(complete and excessive == 0),
        fully_incorrect=float(matched == 0),
        correct_with_extraneous=float(complete and excessive > 0),
    )


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    return {name: float(rollout.get(name) or 0.0) for name in SCORE_NAMES}


def deepsearchqa_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k and pass@1[avg-of-k] of each set score, in percent, over the rollouts that were graded (a
    failed judgment has no scores and is counted in `judge_failure_rate` instead)."""
    graded = [[rollout for rollout in task if rollout.get("judge_failure") is None] for task in tasks]
    metrics, *_ = compute_pass_majority_metrics([task for task in graded if task], score_fn=rollout_scores)
    return metrics
