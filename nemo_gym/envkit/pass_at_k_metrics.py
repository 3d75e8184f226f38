"""pass@k, pass@1[avg-of-k] and majority@k over rollouts grouped by task, and picking the headline ones.

An environment turns them on with a `PassAtK` declaration on its server class (`reward_profile`'s
`AggregateMetricsMixin.pass_at_k`) and picks its headline with `key_metric_patterns` (see
`select_key_metrics`). The public functions are NeMo Gym's (`compute_pass_majority_metrics`,
`add_avg_sample_std_dev`, `compute_subset_metrics`, `highest_k_metrics`), with its signatures and numbers,
so environments written for NeMo Gym compute the same metrics here.
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

# The entries of a pass@1[avg-of-k] family that are a spread, not a score (`pass@1[avg-of-4]/accuracy/<stat>`).
STAT_SUFFIXES = ("std_dev_across_runs", "std_err_across_runs", "avg_sample_std_dev")
PER_SAMPLE_AGGREGATE_KEY = "per_sample_aggregate"
ScoreDicts = list[list[dict[str, float]]]  # per task, per rollout: {score name: value}


def compute_pass_majority_metrics(
    tasks: Sequence[Sequence[Rollout]],
    score_fn: ScoreFn | None = None,
    answer_key: str | None = None,
) -> tuple[dict[str, Any], ScoreDicts, list[str], int]:
    """pass@k, pass@1[avg-of-k] (with run-to-run spread) and, given `answer_key`, majority@k, in percent.

    Returns `(metrics, all_score_dicts, score_names, max_k)`, NeMo Gym's shape, so that the scores can be
    reused (`add_avg_sample_std_dev`). `score_fn(rollout)` names the scores (default `{"accuracy": reward}`);
    with `answer_key` a binary `no_answer` score is added (1 when the extracted answer is None) so unparsable
    outputs show up. Only pass@k needs k scores of a task; the other k-metrics look at its first k rollouts.
    """
    if not tasks:
        return {}, [], [], 0
    score_dicts = [[_scores(rollout, score_fn, answer_key) for rollout in task] for task in tasks]
    answers = (
        [[rollout.get(answer_key) for rollout in task] for task in tasks] if answer_key is not None else None
    )
    names = sorted({name for task in score_dicts for scores in task for name in scores})
    max_k = max(len(task) for task in tasks)
    per_sample = {name: runs for name in names if (runs := _per_sample_aggregate(score_dicts, name, max_k))}
    metrics: dict[str, Any] = {}
    for k in range(1, max_k + 1):
        for name in names:
            metrics.update(_metrics_at_k(score_dicts, name, k, per_sample.get(name, [])))
            if answers is not None:
                metrics[f"majority@{k}/{name}"] = _majority_metric(score_dicts, answers, name, k)
    metrics[PER_SAMPLE_AGGREGATE_KEY] = per_sample
    return metrics, score_dicts, names, max_k


def add_avg_sample_std_dev(
    metrics: dict[str, Any], all_score_dicts: ScoreDicts, score_names: Sequence[str], max_k: int
) -> None:
    """Add, for k >= 2, how much one task's score varies between its first k rollouts, averaged over tasks.

    On the scale of the scores (not percent), as NeMo Gym reports it; `metrics` is updated in place.
    """
    for k in range(2, max_k + 1):
        for name in score_names:
            spreads = [
                statistics.stdev(values)
                for task in all_score_dicts
                if len(values := _values(task[:k], name)) >= 2
            ]
            if spreads:
                metrics[f"pass@1[avg-of-{k}]/{name}/avg_sample_std_dev"] = statistics.fmean(spreads)


def _scores(rollout: Rollout, score_fn: ScoreFn | None, answer_key: str | None) -> dict[str, float]:
    raw = dict(score_fn(rollout)) if score_fn is not None else {"accuracy": rollout["reward"]}
    if answer_key is not None:
        raw["no_answer"] = rollout.get(answer_key) is None
    return {name: float(value) for name, value in raw.items()}


def _values(task_scores: Sequence[Mapping[str, float]], name: str) -> list[float]:
    """The scores called `name` of these rollouts, in order (rollouts without one skipped)."""
    return [scores[name] for scores in task_scores if name in scores]


def _per_sample_aggregate(score_dicts: ScoreDicts, name: str, max_k: int) -> list[float]:
    """Percent score of rollout i over the tasks whose rollout i has one: one entry per "run" that has any."""
    runs = (
        [task[i][name] for task in score_dicts if i < len(task) and name in task[i]] for i in range(max_k)
    )
    return [100.0 * statistics.fmean(run) for run in runs if run]


def pass_at_k(values: Sequence[float], k: int) -> float:
    """Binary scores: the unbiased estimator over all n rollouts; other scores: best of the first k."""
    if all(value in (0.0, 1.0) for value in values):
        return 1.0 - math.comb(values.count(0.0), k) / math.comb(len(values), k)
    return max(values[:k])


def _metrics_at_k(score_dicts: ScoreDicts, name: str, k: int, per_sample: list[float]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    if drawn := [values for task in score_dicts if len(values := _values(task, name)) >= k]:
        metrics[f"pass@{k}/{name}"] = 100.0 * statistics.fmean(pass_at_k(values, k) for values in drawn)
    if averages := [statistics.fmean(values) for task in score_dicts if (values := _values(task[:k], name))]:
        metrics[f"pass@1[avg-of-{k}]/{name}"] = 100.0 * statistics.fmean(averages)
    runs = per_sample[:k]
    if k >= 2 and len(runs) >= 2:
        spread = statistics.stdev(runs)
        metrics[f"pass@1[avg-of-{k}]/{name}/std_dev_across_runs"] = spread
        metrics[f"pass@1[avg-of-{k}]/{name}/std_err_across_runs"] = spread / math.sqrt(len(runs))
    return metrics


def _majority_metric(score_dicts: ScoreDicts, answers: list[list[Any]], name: str, k: int) -> float:
    """majority@k in percent over all tasks; a task without an answered, scored rollout counts as 0."""
    votes = (
        [
            (answer, scores[name])
            for answer, scores in zip(task_answers[:k], task[:k], strict=True)
            if name in scores
        ]
        for task, task_answers in zip(score_dicts, answers, strict=True)
    )
    return 100.0 * statistics.fmean(_majority_at_k(task_votes) for task_votes in votes)


def _majority_at_k(votes: Sequence[Vote]) -> float:
    """Score of the most frequent (answer, score) among the answered votes.

    Tied pairs share the win (their scores are averaged); no answered vote scores 0.
    """
    counts = Counter((_hashable(answer), score) for answer, score in votes if answer is not None)
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

    A task's subset is the `subset_key` value of its first rollout; tasks where it is missing or falsy
    belong to no subset. `per_sample_aggregate` is left out so the result stays flat, like the agent
    metrics it is merged into.
    """
    subsets: dict[str, list[Sequence[Rollout]]] = defaultdict(list)
    for task in tasks:
        if task and task[0].get(subset_key):
            subsets[str(task[0][subset_key])].append(task)
    return {
        f"{subset}/{key}": value
        for subset, subset_tasks in subsets.items()
        for key, value in compute_pass_majority_metrics(subset_tasks, score_fn, answer_key)[0].items()
        if key != PER_SAMPLE_AGGREGATE_KEY
    }


def highest_k_metrics(
    agent_metrics: Mapping[str, Any],
    pattern: str,
    score_names: Sequence[str] | None = None,
    exclude_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The entries `<pattern>/<score>` of the family `pattern` (`"pass@{k}"`) at its largest k.

    Typical `get_key_metrics`: report pass@8, not pass@1..8. The spread entries (`STAT_SUFFIXES`) are
    never returned; `score_names` keeps only those scores, `exclude_names` drops some (`["no_answer"]`),
    and the largest k is taken among the entries kept.
    """
    if "{k}" not in pattern:
        raise ValueError(f"highest_k_metrics: pattern {pattern!r} must contain '{{k}}', e.g. 'pass@{{k}}'")
    before, after = pattern.split("{k}", 1)
    entry = re.compile(re.escape(before) + r"(\d+)" + re.escape(after) + "/(.+)")
    found: dict[str, int] = {}
    for key in agent_metrics:
        match = entry.fullmatch(key)
        if match is None or match.group(2).endswith(STAT_SUFFIXES):
            continue
        if (score_names is None or match.group(2) in score_names) and match.group(2) not in (
            exclude_names or ()
        ):
            found[key] = int(match.group(1))
    top = max(found.values(), default=None)
    return {key: agent_metrics[key] for key, k in found.items() if k == top}


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
    for family in best_of:
        key_metrics.update(highest_k_metrics(agent_metrics, family, exclude_names=["no_answer"]))
    return key_metrics


@dataclass(frozen=True)
class PassAtK:
    """An environment's pass@k declaration: which scores, which answer majority@k votes on, which subsets.

    `answer_key` names the rollout field holding the extracted answer (it adds majority@k and `no_answer`);
    `score_fn` names the scores (default: `accuracy` = reward); `subset_key` repeats the metrics per subset,
    prefixed `<subset>/`, or with `key_in_prefix` `<subset_key>=<subset>/` (`n_needles=4/pass@1/accuracy`),
    which keeps a numeric subset readable; `avg_sample_std_dev` adds that spread to the overall metrics.
    """

    answer_key: str | None = None
    score_fn: ScoreFn | None = None
    subset_key: str | None = None
    key_in_prefix: bool = False
    avg_sample_std_dev: bool = False

    def compute(self, tasks: Sequence[Sequence[Rollout]]) -> dict[str, Any]:
        """The overall metrics, then the per-subset ones."""
        metrics, score_dicts, names, max_k = compute_pass_majority_metrics(
            tasks, self.score_fn, self.answer_key
        )
        if self.avg_sample_std_dev:
            add_avg_sample_std_dev(metrics, score_dicts, names, max_k)
        if self.subset_key is not None:
            label = f"{self.subset_key}=" if self.key_in_prefix else ""
            per_subset = compute_subset_metrics(tasks, self.subset_key, self.score_fn, self.answer_key)
            metrics.update({label + key: value for key, value in per_subset.items()})
        return metrics


def select_key_metrics(agent_metrics: Mapping[str, Any], patterns: Sequence[str]) -> dict[str, Any]:
    """The entries of `agent_metrics` that `patterns` name, in pattern order.

    A pattern is an exact name (`mean/reward`), a prefix ending in `*` (`mean/*`), or a k-family with a
    score name or `*` after the slash: `pass@{k}/accuracy` or `pass@1[avg-of-{k}]/*` picks those entries
    at their largest k (`highest_k_metrics`, spread entries left out); a bare `pass@{k}` means `/*`.
    """
    selected: dict[str, Any] = {}
    for pattern in patterns:
        if "{k}" in pattern:
            head, _, tail = pattern.partition("{k}")
            family_end, _, score = tail.partition("/")
            scores = None if score in ("", "*") else [score]
            selected.update(highest_k_metrics(agent_metrics, head + "{k}" + family_end, scores))
        else:
            selected.update({name: value for name, value in agent_metrics.items() if _matches(name, pattern)})
    return selected


def _matches(name: str, pattern: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern
