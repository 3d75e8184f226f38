"""The grading-error metrics of imo_gradingbench: mean absolute error of the grade points.

Only rollouts with a readable grade have an error (`score_diff`), so each figure comes with the number
of errors it averages (`*_count`). Lower is better, so the best of k is the smallest error, not the
largest score the generic pass@k would take.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

SCORE_DIFF_KEY = "score_diff"


def mae_metrics(tasks: Sequence[Sequence[dict[str, Any]]]) -> dict[str, float]:
    """`pass@1[avg-of-k]/mae` (every error of the first k rollouts pooled), `pass@k/mae` (each task's
    smallest error among its first k, averaged over tasks), their `_count`s, and `mae`/`mae_count`
    over every rollout."""
    max_k = max((len(task) for task in tasks), default=0)
    metrics: dict[str, float] = {}
    for k in range(1, max_k + 1):
        errors_by_task = [
            [
                float(rollout[SCORE_DIFF_KEY])
                for rollout in task[:k]
                if rollout.get(SCORE_DIFF_KEY) is not None
            ]
            for task in tasks
        ]
        pooled = [error for errors in errors_by_task for error in errors]
        best = [min(errors) for errors in errors_by_task if errors]
        if pooled:
            metrics[f"pass@1[avg-of-{k}]/mae"] = statistics.fmean(pooled)
            metrics[f"pass@1[avg-of-{k}]/mae_count"] = float(len(pooled))
            metrics[f"pass@{k}/mae"] = statistics.fmean(best)
            metrics[f"pass@{k}/mae_count"] = float(len(best))
    if f"pass@1[avg-of-{max_k}]/mae" in metrics:
        metrics["mae"] = metrics[f"pass@1[avg-of-{max_k}]/mae"]
        metrics["mae_count"] = metrics[f"pass@1[avg-of-{max_k}]/mae_count"]
    return metrics
