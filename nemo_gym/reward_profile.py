"""Default `/aggregate_metrics`: statistics of every numeric verify field, per task and pooled.

Keys are `<stat>/<field>` (`mean/reward`, `std/output_tokens`, ...), as trainers and dashboards expect.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from fastapi import HTTPException

from nemo_gym.config_types import AggregateMetrics, AggregateMetricsRequest

TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
INDEX_KEYS = (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY)


def numeric_record(verify_response: dict[str, Any]) -> dict[str, float]:
    """Top-level numbers (bools as 0/1) plus the top-level numbers of `response.usage`."""
    record: dict[str, float] = {}
    usage = (verify_response.get("response") or {}).get("usage") or {}
    for source in (verify_response, usage):
        for key, value in source.items():
            if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
                record[key] = float(value)
    return record


def column_statistics(
    records: list[dict[str, float]], exclude: tuple[str, ...] = INDEX_KEYS
) -> dict[str, float]:
    """mean/max/min/median/std (sample) of each column; a group of one rollout reports std 0."""
    columns: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for key, value in record.items():
            if key not in exclude:
                columns[key].append(value)
    stats: dict[str, float] = {}
    for key, values in columns.items():
        stats[f"mean/{key}"] = statistics.fmean(values)
        stats[f"max/{key}"] = max(values)
        stats[f"min/{key}"] = min(values)
        stats[f"median/{key}"] = statistics.median(values)
        if len(values) >= 2:
            stats[f"std/{key}"] = statistics.stdev(values)
        elif len(records) == 1:
            stats[f"std/{key}"] = 0.0
    return stats


def group_by_task(verify_responses: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Rollouts keyed by task index (sorted); a repeated (task, rollout) pair is a client error."""
    seen: set[tuple[int, int]] = set()
    tasks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for position, verify_response in enumerate(verify_responses):
        key = (
            _index_of(verify_response, TASK_INDEX_KEY, position),
            _index_of(verify_response, ROLLOUT_INDEX_KEY, position),
        )
        if key in seen:
            raise HTTPException(
                status_code=422,
                detail=f"Duplicate rollout (_ng_task_index={key[0]}, _ng_rollout_index={key[1]}) in verify_responses",
            )
        seen.add(key)
        tasks[key[0]].append(verify_response)
    for rollouts in tasks.values():
        rollouts.sort(key=lambda rollout: rollout.get(ROLLOUT_INDEX_KEY, 0))
    return dict(sorted(tasks.items()))


def _index_of(verify_response: dict[str, Any], key: str, position: int) -> int:
    value = verify_response.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise HTTPException(
            status_code=422,
            detail=f"verify_responses[{position}].{key} must be an integer, got {value!r}",
        )
    return value


class MetricsAggregationMixin:
    """`/aggregate_metrics` with two hooks an environment may override."""

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> AggregateMetrics:
        if not body.verify_responses:
            return AggregateMetrics()
        tasks = group_by_task(body.verify_responses)
        group_level_metrics = []
        for task_index, rollouts in tasks.items():
            records = [numeric_record(rollout) for rollout in rollouts]
            group = {TASK_INDEX_KEY: task_index, "num_rollouts": len(rollouts), **column_statistics(records)}
            group_level_metrics.append(group)
        agent_metrics: dict[str, Any] = column_statistics(
            [numeric_record(rollout) for rollouts in tasks.values() for rollout in rollouts]
        )
        extra = dict(self.compute_metrics(list(tasks.values())))
        groups_by_task = {group[TASK_INDEX_KEY]: group for group in group_level_metrics}
        for per_task in extra.pop("per_task_metrics", []):
            groups_by_task.get(per_task.get(TASK_INDEX_KEY), {}).update(per_task)
        agent_metrics.update(extra)
        return AggregateMetrics(
            group_level_metrics=group_level_metrics,
            agent_metrics=agent_metrics,
            key_metrics=self.get_key_metrics(agent_metrics),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Environment-specific metrics over the rollouts grouped by task, in task order (default: none).

        A `per_task_metrics` list in the result is merged into the per-task groups by `_ng_task_index`.
        """
        return {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in agent_metrics.items() if key.startswith("mean/")}
