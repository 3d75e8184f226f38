"""pass@k, pass@1[avg-of-k] and majority@k over rollouts grouped by task, and picking the headline ones.

An environment turns them on with a `PassAtK` declaration on its server class (`reward_profile`'s
`MetricsAggregationMixin.pass_at_k`) and picks its headline with `key_metric_patterns` (see
`select_key_metrics`); the functions are public too, for environments that add metrics of their own.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Number = int | float
Rollout = Mapping[str, Any]
ScoreFn = Callable[[Rollout], Mapping[str, Number]]
Vote = tuple[Any, float]  # (extracted answer, score) of one rollout
TOKEN_MEANS = ("mean/input_tokens", "mean/output_tokens")

# Result of `compute_pass_majority_metrics`: a flat dict `{metric key: float}` in percent, for k = 1..max_k
# and each score name, plus one nested entry `"per_sample_aggregate": {score name: [percent per rollout
# index]}`. Only pass@k is restricted to the tasks with at least k scores (it needs k draws); the other
# k-metrics look at each task's first k scores, however many there are.

STD_SUFFIXES = ("/std_dev_across_runs", "/std_err_across_runs", "/avg_sample_std_dev")
PER_SAMPLE_AGGREGATE_KEY = "per_sample_aggregate"


def compute_pass_majority_metrics(
    tasks: Sequence[Sequence[Rollout]],
    score_fn: ScoreFn | None = None,
    answer_key: str | None = None,
    add_avg_sample_std_dev: bool = False,
) -> dict[str, Any]:
    """pass@k, pass@1[avg-of-k] (with run-to-run spread) and, given `answer_key`, majority@k, in percent.

    `score_fn(rollout)` names the scores (default `{"accuracy": reward}`); with `answer_key` a binary
    `no_answer` score is added (1 when the extracted answer is None) so unparsable outputs show up.
    """
    scored = [[_scores(rollout, score_fn, answer_key) for rollout in task] for task in tasks]
    answers = [[rollout.get(answer_key) for rollout in task] for task in tasks] if answer_key else None
    names = list(dict.fromkeys(name for task in scored for scores in task for name in scores))
    values = {name: _values_of(scored, name) for name in names}
    votes = {name: _votes_of(scored, answers, name) for name in names} if answers is not None else {}
    per_sample = {name: _per_sample_aggregate(values[name]) for name in names}
    max_k = max((len(task) for task in tasks), default=0)
    metrics: dict[str, Any] = {}
    for k in range(1, max_k + 1):
        for name in names:
            metrics.update(_metrics_at_k(values[name], k, name, per_sample[name]))
            if add_avg_sample_std_dev and k >= 2:
                metrics.update(_avg_sample_std_dev(values[name], k, name))
            if name in votes:
                metrics.update(_majority_metric(votes[name], k, name))
    metrics[PER_SAMPLE_AGGREGATE_KEY] = per_sample
    return metrics


def _scores(rollout: Rollout, score_fn: ScoreFn | None, answer_key: str | None) -> dict[str, float]:
    raw = dict(score_fn(rollout)) if score_fn is not None else {"accuracy": rollout["reward"]}
    if answer_key is not None:
        raw["no_answer"] = rollout.get(answer_key) is None
    return {name: float(value) for name, value in raw.items()}


def _values_of(scored: list[list[dict[str, float]]], name: str) -> list[list[float]]:
    """Per task, the scores called `name` in rollout order (rollouts without it skipped)."""
    return [[scores[name] for scores in task if name in scores] for task in scored]


def _votes_of(scored: list[list[dict[str, float]]], answers: list[list[Any]], name: str) -> list[list[Vote]]:
    return [
        [(answer, scores[name]) for scores, answer in zip(task, task_answers, strict=True) if name in scores]
        for task, task_answers in zip(scored, answers, strict=True)
    ]


def _per_sample_aggregate(values: list[list[float]]) -> list[float]:
    """Percent score of rollout i averaged over the tasks that have one: one entry per "run"."""
    longest = max((len(task) for task in values), default=0)
    return [100.0 * statistics.fmean(task[i] for task in values if len(task) > i) for i in range(longest)]


def _pass_at_k(values: Sequence[float], k: int) -> float:
    """Binary scores: the unbiased estimator over all n rollouts; other scores: best of the first k."""
    if all(value in (0.0, 1.0) for value in values):
        return 1.0 - math.comb(values.count(0.0), k) / math.comb(len(values), k)
    return max(values[:k])


def _metrics_at_k(values: list[list[float]], k: int, name: str, per_sample: list[float]) -> dict[str, float]:
    scored_tasks = [task for task in values if task]
    if not scored_tasks:
        return {}
    metrics: dict[str, float] = {}
    if drawn := [task for task in scored_tasks if len(task) >= k]:
        metrics[f"pass@{k}/{name}"] = 100.0 * statistics.fmean(_pass_at_k(task, k) for task in drawn)
    avg_key = f"pass@1[avg-of-{k}]/{name}"
    metrics[avg_key] = 100.0 * statistics.fmean(statistics.fmean(task[:k]) for task in scored_tasks)
    runs = per_sample[:k]
    if k >= 2 and len(runs) >= 2:
        spread = statistics.stdev(runs)
        metrics[f"{avg_key}/std_dev_across_runs"] = spread
        metrics[f"{avg_key}/std_err_across_runs"] = spread / math.sqrt(len(runs))
    return metrics


def _avg_sample_std_dev(values: list[list[float]], k: int, name: str) -> dict[str, float]:
    """How much one task's score varies between its first k rollouts, averaged over tasks (percent)."""
    spreads = [statistics.stdev(task[:k]) for task in values if len(task[:k]) >= 2]
    if not spreads:
        return {}
    return {f"pass@1[avg-of-{k}]/{name}/avg_sample_std_dev": 100.0 * statistics.fmean(spreads)}


def _majority_metric(votes: list[list[Vote]], k: int, name: str) -> dict[str, float]:
    voted_tasks = [task for task in votes if task]
    if not voted_tasks:
        return {}
    return {f"majority@{k}/{name}": 100.0 * statistics.fmean(_majority_at_k(task, k) for task in voted_tasks)}


def _majority_at_k(votes: Sequence[Vote], k: int) -> float:
    """Score of the most frequent (answer, score) among the answered ones of the first k rollouts.

    Tied pairs share the win (their scores are averaged); a task without any answer scores 0.
    """
    counts = Counter((_hashable(answer), score) for answer, score in votes[:k] if answer is not None)
    if not counts:
        return 0.0
    top = max(counts.values())
    return statistics.fmean(score for (_, score), count in counts.items() if count == top)


def _hashable(answer: Any) -> Any:
    """Lists and dicts vote by their canonical JSON text."""
    try:
        hash(answer)
    except TypeError:
        return json.dumps(answer, sort_keys=True, default=str)
    return answer


def compute_subset_metrics(
    tasks: Sequence[Sequence[Rollout]],
    subset_key: str,
    score_fn: ScoreFn | None = None,
    answer_key: str | None = None,
) -> dict[str, Any]:
    """`compute_pass_majority_metrics` per subset, keys prefixed `<subset>/` (`easy/pass@1/accuracy`).

    A task's subset is the `subset_key` value of its first rollout; tasks without one belong to no subset.
    `per_sample_aggregate` is left out so the result stays flat, like the agent metrics it is merged into.
    """
    subsets: dict[str, list[Sequence[Rollout]]] = defaultdict(list)
    for task in tasks:
        if task and task[0].get(subset_key) is not None:
            subsets[str(task[0][subset_key])].append(task)
    return {
        f"{subset}/{key}": value
        for subset, subset_tasks in subsets.items()
        for key, value in compute_pass_majority_metrics(subset_tasks, score_fn, answer_key).items()
        if key != PER_SAMPLE_AGGREGATE_KEY
    }


def highest_k_metrics(metrics: Mapping[str, Any], *prefixes: str) -> dict[str, Any]:
    """The entries of each family such as `"pass@{k}"` at its largest k, without the spread keys.

    Typical `get_key_metrics`: report pass@8, not pass@1..8. Each prefix must contain `{k}`.
    """
    return {key: value for prefix in prefixes for key, value in _highest_k_of_family(metrics, prefix).items()}


def _highest_k_of_family(metrics: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    if "{k}" not in prefix:
        raise ValueError(f"highest_k_metrics: prefix {prefix!r} must contain '{{k}}', e.g. 'pass@{{k}}'")
    before, after = prefix.split("{k}", 1)
    pattern = re.compile(re.escape(before) + r"(\d+)" + re.escape(after) + "/")
    found = {
        key: int(match.group(1))
        for key in metrics
        if (match := pattern.match(key)) and not key.endswith(STD_SUFFIXES)
    }
    top = max(found.values(), default=None)
    return {key: metrics[key] for key, k in found.items() if k == top}


def subset_pass_majority_metrics(
    tasks: Sequence[Sequence[Rollout]],
    subset_key: str,
    score_fn: ScoreFn | None = None,
    answer_key: str | None = None,
    *,
    key_in_prefix: bool = False,
    add_avg_sample_std_dev: bool = False,
) -> dict[str, Any]:
    """`compute_pass_majority_metrics` over all tasks, then the same per subset (`compute_subset_metrics`).

    Subset keys are prefixed `<subset>/`, or with `key_in_prefix` `<subset_key>=<subset>/`
    (`n_needles=4/pass@1/accuracy`), which keeps a numeric subset readable. `add_avg_sample_std_dev`
    applies to the overall metrics only.
    """
    label = f"{subset_key}=" if key_in_prefix else ""
    per_subset = compute_subset_metrics(tasks, subset_key, score_fn, answer_key)
    return {
        **compute_pass_majority_metrics(tasks, score_fn, answer_key, add_avg_sample_std_dev),
        **{label + key: value for key, value in per_subset.items()},
    }


def pass_at_k_key_metrics(
    agent_metrics: Mapping[str, Any],
    leading: Sequence[str] = TOKEN_MEANS,
    best_of: Sequence[str] = ("pass@{k}", "majority@{k}"),
) -> dict[str, Any]:
    """The `leading` entries present, the highest-k `pass@1[avg-of-{k}]` entries, and the highest-k
    entries of the `best_of` families but their `no_answer` ones (a best of k no-answer flags is no
    headline). Per-subset entries are left out."""
    key_metrics = {name: agent_metrics[name] for name in leading if name in agent_metrics}
    key_metrics.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]"))
    chosen = highest_k_metrics(agent_metrics, *best_of)
    key_metrics.update({name: value for name, value in chosen.items() if not name.endswith("/no_answer")})
    return key_metrics


@dataclass(frozen=True)
class PassAtK:
    """An environment's pass@k declaration: which scores, which answer majority@k votes on, which subsets.

    `answer_key` names the rollout field holding the extracted answer (it adds majority@k and `no_answer`);
    `score_fn` names the scores (default: `accuracy` = reward); `subset_key` repeats the metrics per subset
    (see `subset_pass_majority_metrics` for `key_in_prefix` and `add_avg_sample_std_dev`).
    """

    answer_key: str | None = None
    score_fn: ScoreFn | None = None
    subset_key: str | None = None
    key_in_prefix: bool = False
    add_avg_sample_std_dev: bool = False

    def compute(self, tasks: Sequence[Sequence[Rollout]]) -> dict[str, Any]:
        if self.subset_key is None:
            return compute_pass_majority_metrics(
                tasks, self.score_fn, self.answer_key, self.add_avg_sample_std_dev
            )
        return subset_pass_majority_metrics(
            tasks,
            self.subset_key,
            self.score_fn,
            self.answer_key,
            key_in_prefix=self.key_in_prefix,
            add_avg_sample_std_dev=self.add_avg_sample_std_dev,
        )


def select_key_metrics(agent_metrics: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """The entries of `agent_metrics` that `patterns` name, in pattern order.

    A pattern is an exact name (`mean/reward`), a prefix ending in `*` (`mean/*`), or a k-family with the
    score after the slash: `pass@{k}/accuracy` or `pass@1[avg-of-{k}]/*` picks that family's entries at its
    largest k (as `highest_k_metrics`, spread keys left out) whose score matches.
    """
    selected: dict[str, Any] = {}
    for pattern in patterns:
        if "{k}" in pattern:
            selected.update(_highest_k_scores(agent_metrics, pattern))
        else:
            selected.update({name: value for name, value in agent_metrics.items() if _matches(name, pattern)})
    return selected


def _highest_k_scores(agent_metrics: Mapping[str, Any], pattern: str) -> dict[str, Any]:
    before, after = pattern.split("{k}", 1)
    family_end, _, score = after.partition("/")
    score_of = re.compile(re.escape(before) + r"\d+" + re.escape(family_end) + "/(.*)")
    family = highest_k_metrics(agent_metrics, before + "{k}" + family_end)
    return {
        name: value
        for name, value in family.items()
        if (match := score_of.fullmatch(name)) and _matches(match.group(1), score)
    }


def _matches(name: str, pattern: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern
