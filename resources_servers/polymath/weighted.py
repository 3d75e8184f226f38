"""PolyMath's difficulty-weighted pass@k, pass@1[avg-of-k] and majority@k.

Each task counts with its row's `weight` (the benchmark's difficulty levels weigh 1, 2, 4, 8), so a
solved top-level problem moves the score eight times as much as a solved low-level one. A score counts
as solved when it is truthy, as in NeMo Skills' weighted math metrics; only tasks with at least k scores
of that name take part at k. Results are in percent, keys suffixed `_weighted`
(`pass@1[avg-of-4]/symbolic_accuracy_weighted`); majority@k starts at k = 2.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nemo_gym.envkit.pass_at_k_metrics import pass_at_k
from nemo_gym.reward_profile import is_metric

DEFAULT_WEIGHT = 1.0

Rollout = Mapping[str, Any]


def task_weight(rollouts: Sequence[Rollout]) -> float:
    """The weight of a task: its first rollout's `weight`, 1.0 when the row has none (or, in results that
    did not come from /verify, which checks it, none that is a positive number)."""
    weight = rollouts[0].get("weight")
    return float(weight) if is_metric(weight) and weight > 0 else DEFAULT_WEIGHT


def vote_key(answer: Any) -> Any:
    """An answer as a vote: itself when hashable, else its canonical JSON text (a list or dict answer)."""
    try:
        hash(answer)
    except TypeError:
        return json.dumps(answer, sort_keys=True, default=str)
    return answer


def unbiased_pass_at_k(solved: Sequence[bool], k: int) -> float:
    """The chance that k of these attempts drawn without replacement hold a solved one."""
    return pass_at_k([1.0 if attempt else 0.0 for attempt in solved], k)


def majority_solved(votes: Sequence[tuple[Any, bool]]) -> float:
    """Solved-share of the most frequent (answer, solved) pairs among answered votes (ties share); none: 0."""
    counts = Counter((vote_key(answer), solved) for answer, solved in votes if answer is not None)
    if not counts:
        return 0.0
    top = max(counts.values())
    tied = [solved for (_, solved), count in counts.items() if count == top]
    return sum(tied) / len(tied)


def weighted_metrics(
    tasks: Sequence[Sequence[Rollout]],
    score_fn: Callable[[Rollout], Mapping[str, float]],
    answer_key: str,
) -> dict[str, float]:
    """The `_weighted` pass@k, pass@1[avg-of-k] and (k >= 2) majority@k of every score `score_fn` names."""
    graded = [
        (
            task_weight(task),
            [score_fn(rollout) for rollout in task],
            [rollout.get(answer_key) for rollout in task],
        )
        for task in tasks
        if task
    ]
    names = sorted({name for _, scores, _ in graded for score in scores for name in score})
    max_k = max((len(scores) for _, scores, _ in graded), default=0)
    metrics: dict[str, float] = {}
    for k in range(1, max_k + 1):
        for name in names:
            total = pass_sum = average_sum = majority_sum = 0.0
            for weight, scores, answers in graded:
                pairs = [
                    (answer, bool(score[name]))
                    for answer, score in zip(answers, scores, strict=True)
                    if name in score
                ]
                if len(pairs) < k:
                    continue
                solved = [is_solved for _, is_solved in pairs]
                total += weight
                pass_sum += weight * unbiased_pass_at_k(solved, k)
                average_sum += weight * sum(solved[:k]) / k
                majority_sum += weight * majority_solved(pairs[:k])
            if total > 0:
                metrics[f"pass@{k}/{name}_weighted"] = 100.0 * pass_sum / total
                metrics[f"pass@1[avg-of-{k}]/{name}_weighted"] = 100.0 * average_sum / total
                if k >= 2:
                    metrics[f"majority@{k}/{name}_weighted"] = 100.0 * majority_sum / total
    return metrics
