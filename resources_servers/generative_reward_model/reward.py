"""The GenRM reward: minus the weighted L1 distance of the verdict from the human ground truth.

    overall = score_weight * (|Δscore_1| + |Δscore_2|) + ranking_weight * |Δranking|
    rubric  = rubric_weight * mean over ground-truth rubrics of the same sum for that rubric
    reward  = -(overall + rubric)

Only fields the ground truth has are compared, so a row with rankings only is rewarded on rankings
only; a ground-truth rubric counts toward the mean whenever it has any field, even when the verdict
matches it exactly. 0.0 is the best reward.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from resources_servers.generative_reward_model.verdict import SCORE_KEYS, Scores, Verdict

RANKING_MIDPOINT = 3.5  # rankings 1-3 favour response 1, 4-6 response 2


@dataclass(frozen=True)
class Weights:
    score: float
    ranking: float
    rubric: float


@dataclass
class Comparison:
    reward: float
    overall_score_1_l1: float | None = None
    overall_score_2_l1: float | None = None
    overall_ranking_l1: float | None = None
    overall_ranking_binary_acc: float | None = None
    rubric_score_l1: float | None = None
    rubric_ranking_l1: float | None = None


def errors(truth: dict[str, Any], predicted: Scores) -> dict[str, float]:
    """|truth - predicted| of each field the ground truth has."""
    return {
        key: abs(float(truth[key]) - getattr(predicted, key))
        for key in SCORE_KEYS
        if truth.get(key) is not None
    }


def penalty(field_errors: dict[str, float], weights: Weights) -> float:
    return sum(
        (weights.ranking if key == "ranking" else weights.score) * error
        for key, error in field_errors.items()
    )


def compare(
    verdict: Verdict, overall: dict[str, Any] | None, rubrics: list[dict[str, Any]] | None, weights: Weights
) -> Comparison | None:
    """The reward and its error terms; None when the verdict's rubric ids are not the ground truth's."""
    result = Comparison(reward=0.0)
    if overall:
        overall_errors = errors(overall, verdict.overall)
        result.reward -= penalty(overall_errors, weights)
        result.overall_score_1_l1 = overall_errors.get("score_1")
        result.overall_score_2_l1 = overall_errors.get("score_2")
        result.overall_ranking_l1 = overall_errors.get("ranking")
        if overall.get("ranking") is not None:
            same_side = (float(overall["ranking"]) < RANKING_MIDPOINT) == (
                verdict.overall.ranking < RANKING_MIDPOINT
            )
            result.overall_ranking_binary_acc = float(same_side)
    if rubrics:
        truth_by_id = {int(rubric["rubric_id"]): rubric for rubric in rubrics}
        if set(truth_by_id) != set(verdict.rubrics):
            return None
        per_rubric = [errors(truth, verdict.rubrics[identifier]) for identifier, truth in truth_by_id.items()]
        penalties = [penalty(field_errors, weights) for field_errors in per_rubric if field_errors]
        if penalties:
            result.reward -= weights.rubric * statistics.fmean(penalties)
        score_errors = [error for found in per_rubric for key, error in found.items() if key != "ranking"]
        ranking_errors = [found["ranking"] for found in per_rubric if "ranking" in found]
        result.rubric_score_l1 = statistics.fmean(score_errors) if score_errors else None
        result.rubric_ranking_l1 = statistics.fmean(ranking_errors) if ranking_errors else None
    return result
