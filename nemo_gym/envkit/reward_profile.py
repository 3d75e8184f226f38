"""Default `/aggregate_metrics`, with the declarations that give an environment its pass@k metrics and headline.

Statistic keys are `<stat>/<field>` (`mean/reward`, `std/output_tokens`, ...), as trainers and dashboards
expect; they keep the scale of their field, so a 0-1 reward stays 0-1. The pass@k family is in percent
(0-100), the scale benchmark reports quote.

Each group carries `sample`, a small stub of its task's row as NeMo Gym's groups do (see `task_sample`).

A rollout carrying a truthy `_ng_failure_class` (`http_500`, `timeout`, ...) never enters a statistic or
`compute_metrics`: it is only counted (`num_failed_rollouts`, `num_failed_rollouts/<class>`), so a crash is
not mistaken for a reward of 0. Nor does a rollout its resources server masked (`mask_sample: true`, NeMo
Gym 0.7: its reward could not be measured); when any are masked, the `coverage/*` counts say how many. Every other element of the request must carry a numeric `reward`: the body
is validated (`AggregateMetricsBody`) so a malformed one is a 422 naming the field, never a crash.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar

from fastapi import HTTPException
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.metrics_bodies import AggregateMetrics
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.envkit.pass_at_k_metrics import PER_SAMPLE_AGGREGATE_KEY as PER_SAMPLE_AGGREGATE_KEY
from nemo_gym.envkit.pass_at_k_metrics import Number, PassAtK, Rollout, select_key_metrics
from nemo_gym.envkit.pass_at_k_metrics import ScoreFn as ScoreFn
from nemo_gym.envkit.pass_at_k_metrics import Vote as Vote
from nemo_gym.envkit.pass_at_k_metrics import add_avg_sample_std_dev as add_avg_sample_std_dev
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics as compute_pass_majority_metrics
from nemo_gym.envkit.pass_at_k_metrics import compute_subset_metrics as compute_subset_metrics
from nemo_gym.envkit.pass_at_k_metrics import highest_k_metrics as highest_k_metrics
from nemo_gym.envkit.repeat_metrics import across_repeats, repeat_level_metrics
from nemo_gym.wire.validation_errors import first_problem

INDEX_KEYS = (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY)
ROLLOUT_ID_KEY = "rollout_id"
SAMPLE_KEY = "sample"
GYM_KEY_PREFIX = "_ng_"
NUM_FAILED_KEY = "num_failed_rollouts"
MASK_SAMPLE_FIELD = "mask_sample"
# Keys of a rollout info that locate the rollout rather than measure it.
LOCATION_KEYS = (ROLLOUT_ID_KEY, *INDEX_KEYS)

# Larger magnitudes are not metrics: a sum or spread of a few of them overflows a float.
MAX_METRIC_MAGNITUDE = 1e300

# ---------------------------------------------------------------------------------------------------------
# Per-rollout numbers


def is_metric(value: Any) -> bool:
    """Whether a statistic can use `value`: a bool, or a number of magnitude at most MAX_METRIC_MAGNITUDE.

    NaN and infinities (JSON cannot carry them back) and larger numbers (their sums overflow) are not.
    """
    return isinstance(value, int | float) and abs(value) <= MAX_METRIC_MAGNITUDE


def numeric_record(verify_response: Rollout) -> dict[str, Number]:
    """`reward`, then the top-level numbers of `response.usage`, then every other top-level number.

    Bools count as 0/1 so pass/fail flags get a mean; numbers that are not `is_metric` count as missing;
    text and nested objects are not metrics. A top-level field wins over a usage field of that name.
    """
    top_level = _numbers_of(verify_response)
    top_level.pop(MASK_SAMPLE_FIELD, None)  # a flag about the rollout, not a measure of it
    record = {key: top_level[key] for key in ("reward",) if key in top_level}
    record.update(_numbers_of(_usage_of(verify_response)))
    record.update(top_level)
    return record


def _numbers_of(mapping: Mapping[str, Any]) -> dict[str, Number]:
    return {
        key: int(value) if isinstance(value, bool) else value
        for key, value in mapping.items()
        if is_metric(value)
    }


def _usage_of(verify_response: Rollout) -> Mapping[str, Any]:
    response = verify_response.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    return usage if isinstance(usage, Mapping) else {}


def rollout_info(verify_response: Rollout, task_index: int, rollout_index: int) -> dict[str, Any]:
    """The compact per-rollout entry of a group: where the rollout sits, then its numbers.

    The indices are passed in (already validated) so they stay ints, not statistics columns.
    """
    numbers = {key: value for key, value in numeric_record(verify_response).items() if key not in INDEX_KEYS}
    return {
        ROLLOUT_ID_KEY: f"{task_index}:{rollout_index}",
        TASK_INDEX_KEY: task_index,
        ROLLOUT_INDEX_KEY: rollout_index,
        **numbers,
    }


# ---------------------------------------------------------------------------------------------------------
# Statistics


def column_statistics(
    records: Sequence[Mapping[str, Any]], exclude: tuple[str, ...] = LOCATION_KEYS
) -> dict[str, float]:
    """mean/max/min/median/std (sample) of each column; a group of one rollout reports std 0.

    A column missing from some records only gets a std when it has two values, so a value that is absent
    is never read as "no spread".
    """
    columns: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for key, value in record.items():
            if key not in exclude:
                columns[key].append(float(value))
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


def completion_pct(num_rollouts: int, expected_num_rollouts: int) -> float:
    """Share of the expected rollouts that produced a result, in percent (an empty expectation is met)."""
    return 100.0 * num_rollouts / expected_num_rollouts if expected_num_rollouts else 100.0


def group_metrics(
    task_index: int, infos: Sequence[Mapping[str, Any]], expected_num_rollouts: int, num_failed_rollouts: int
) -> dict[str, Any]:
    """One task's entry: statistics of its successful rollouts, how complete it is, and the rollouts."""
    ordered = sorted(infos, key=lambda info: info[ROLLOUT_INDEX_KEY])
    return {
        TASK_INDEX_KEY: task_index,
        **column_statistics(ordered),
        "num_rollouts": len(ordered),
        "expected_num_rollouts": expected_num_rollouts,
        "missing_num_rollouts": max(expected_num_rollouts - len(ordered), 0),
        "reward_profile_completion_pct": completion_pct(len(ordered), expected_num_rollouts),
        NUM_FAILED_KEY: num_failed_rollouts,
        "rollout_infos": ordered,
    }


def task_sample(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """The `sample` of a task's group: which agent ran the task and what identifies it, kept small.

    Taken from the task's first successful rollout (else its first failure record): `agent_ref` and the
    top-level text fields (ids, categories, expected answers). Numbers are statistics columns already,
    `_ng_*` keys describe one rollout, and nested values (request params, the response, judge transcripts)
    would make every group as large as a rollout.
    """
    first = next((rollout for rollout in rollouts if failure_class(rollout) is None), rollouts[0])
    return {
        key: value
        for key, value in first.items()
        if key == AGENT_REF_KEY or (isinstance(value, str) and not key.startswith(GYM_KEY_PREFIX))
    }


def _column_means(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return {key: value for key, value in column_statistics(records).items() if key.startswith("mean/")}


def default_key_metrics(agent_metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The means: the few numbers a person reads first."""
    return {key: value for key, value in agent_metrics.items() if key.startswith("mean/")}


# ---------------------------------------------------------------------------------------------------------
# Failed rollouts


def failure_class(record: Rollout) -> str | None:
    """The failure class of a record, or None for a rollout that produced a result."""
    value = record.get(FAILURE_CLASS_KEY)
    return str(value) if value else None


def failure_metrics(class_counts: Mapping[str, int]) -> dict[str, int]:
    """`num_failed_rollouts` (always present) and `num_failed_rollouts/<class>` per class that occurred."""
    per_class = {f"{NUM_FAILED_KEY}/{name}": count for name, count in sorted(class_counts.items()) if count}
    return {NUM_FAILED_KEY: sum(per_class.values()), **per_class}


def failure_counts(records: Iterable[Rollout]) -> dict[str, int]:
    """The failure keys of `agent_metrics` for these records, so a collector can produce them client-side.

    Every failure record counts once; a caller that keeps one record per attempt should pass one per rollout.
    """
    return failure_metrics(Counter(name for record in records if (name := failure_class(record))))


# ---------------------------------------------------------------------------------------------------------
# `/aggregate_metrics`


def _usable_reward(reward: float) -> float:
    if abs(reward) > MAX_METRIC_MAGNITUDE:
        raise PydanticCustomError(
            "number_too_large",
            "Input should be of magnitude at most {limit}",
            {"limit": MAX_METRIC_MAGNITUDE},
        )
    return reward


Reward = Annotated[float, Field(strict=True, allow_inf_nan=False), AfterValidator(_usable_reward)]


class AggregatedVerifyResponse(BaseModel):
    """One element of `verify_responses`: a verify response, any other fields kept as sent.

    `reward` must be a number (not text or a bool) that statistics can use; only a failure record may leave
    it out. Checked here so a malformed element is a 422 naming the field, not a crash in a statistic.
    """

    model_config = ConfigDict(extra="allow")

    reward: Reward | None = None

    @model_validator(mode="after")
    def _reward_unless_failed(self) -> AggregatedVerifyResponse:
        if self.reward is None and failure_class(self.model_extra or {}) is None:
            message = f"Field required: a verify response without {FAILURE_CLASS_KEY} needs a numeric reward"
            missing = InitErrorDetails(
                type=PydanticCustomError("missing", message), loc=("reward",), input=self.model_extra
            )
            raise ValidationError.from_exception_data(type(self).__name__, [missing])
        return self


class AggregateMetricsBody(BaseModel):
    """The body `/aggregate_metrics` accepts: `AggregateMetricsRequest` with each element checked."""

    verify_responses: list[AggregatedVerifyResponse]

    def records(self) -> list[dict[str, Any]]:
        """The elements as plain dicts, with the keys they were sent with."""
        return [element.model_dump(exclude_unset=True) for element in self.verify_responses]


MEASURED_ROLLOUTS_KEY = "coverage/measured_rollouts"


def coverage_metrics(results_by_task: Mapping[int, Sequence[Rollout]]) -> dict[str, int]:
    """NeMo Gym 0.7's `coverage/*` counts of the rollouts with a result: how many were measured and how
    many masked, and the tasks with a measured rollout and those with only masked ones; empty when none
    is masked."""
    masked = {
        task: sum(bool(r.get(MASK_SAMPLE_FIELD)) for r in rollouts)
        for task, rollouts in results_by_task.items()
    }
    if not any(masked.values()):
        return {}
    measured = {task: len(rollouts) - masked[task] for task, rollouts in results_by_task.items()}
    return {
        MEASURED_ROLLOUTS_KEY: sum(measured.values()),
        "coverage/masked_rollouts": sum(masked.values()),
        "coverage/measured_tasks": sum(1 for count in measured.values() if count),
        "coverage/fully_masked_tasks": sum(
            1 for task, count in measured.items() if not count and masked[task]
        ),
    }


def group_by_task(verify_responses: Iterable[Rollout]) -> dict[int, list[Rollout]]:
    """Rollouts, failed ones included, keyed by task index; tasks and rollouts sorted by index.

    A (task, rollout) pair with two results is a client error; failure records may repeat a pair (one per
    attempt, or an attempt that failed before one succeeded).
    """
    seen: set[tuple[int, int]] = set()
    tasks: dict[int, list[Rollout]] = defaultdict(list)
    for position, verify_response in enumerate(verify_responses):
        key = _indices(verify_response, position)
        if failure_class(verify_response) is None:
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


def _indices(verify_response: Rollout, position: int) -> tuple[int, int]:
    """(task, rollout) of one request element; absent indices mean 0, anything but an int is a 422."""
    indices = []
    for key in INDEX_KEYS:
        value = verify_response.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise HTTPException(
                status_code=422,
                detail=f"verify_responses[{position}].{key} must be an integer, got {value!r}",
            )
        indices.append(value)
    return indices[0], indices[1]


def _index_pair(rollout: Rollout) -> tuple[int, int]:
    """Indices of a rollout `group_by_task` has already checked."""
    return rollout.get(TASK_INDEX_KEY, 0), rollout.get(ROLLOUT_INDEX_KEY, 0)


class AggregateMetricsMixin:
    """`/aggregate_metrics`, shaped by two declarations or, beyond them, two hooks an environment overrides.

    `pass_at_k = PassAtK(answer_key="extracted_answer")` adds pass@k / majority@k (`compute_metrics`);
    `key_metric_patterns` picks the headline (`get_key_metrics`, patterns as in `select_key_metrics`).
    The name is NeMo Gym's, so folders written for it can import and subclass the mixin.
    """

    pass_at_k: ClassVar[PassAtK | None] = None
    key_metric_patterns: ClassVar[tuple[str, ...]] = ("mean/*",)

    async def aggregate_metrics(self, body: AggregateMetricsBody) -> AggregateMetrics:
        """Per-task groups and pooled statistics of the successful rollouts; failed ones are only counted.

        A task's `expected_num_rollouts` is the largest number of distinct rollout indices (results and
        failures) of any task in the request: the request does not say how many were meant to run. An
        override declared NeMo Gym's way (`body: AggregateMetricsRequest`) may pass its body on: it is
        checked here as the route would have checked it.
        """
        if not isinstance(body, AggregateMetricsBody):
            try:
                body = AggregateMetricsBody.model_validate(body.model_dump())
            except ValidationError as error:
                raise HTTPException(status_code=422, detail=first_problem(error, "body")) from None
        verify_responses = body.records()
        if not verify_responses:
            return AggregateMetrics()
        tasks = group_by_task(verify_responses)
        expected = max(len({_index_pair(rollout) for rollout in rollouts}) for rollouts in tasks.values())
        successes = {
            task_index: [rollout for rollout in rollouts if failure_class(rollout) is None]
            for task_index, rollouts in tasks.items()
        }
        coverage = coverage_metrics(successes)
        successes = {
            task_index: [rollout for rollout in rollouts if not rollout.get(MASK_SAMPLE_FIELD)]
            for task_index, rollouts in successes.items()
        }
        if coverage and not coverage[MEASURED_ROLLOUTS_KEY]:
            return AggregateMetrics(agent_metrics=coverage, key_metrics=coverage)
        infos = {
            task_index: [rollout_info(rollout, *_index_pair(rollout)) for rollout in rollouts]
            for task_index, rollouts in successes.items()
        }
        group_level_metrics = [
            {
                **group_metrics(
                    task_index,
                    infos[task_index],
                    expected,
                    num_failed_rollouts=len(tasks[task_index]) - len(successes[task_index]),
                ),
                SAMPLE_KEY: task_sample(tasks[task_index]),
            }
            for task_index in tasks
        ]
        all_infos = [info for task_infos in infos.values() for info in task_infos]
        repeats = repeat_level_metrics(all_infos, _column_means)
        agent_metrics: dict[str, Any] = {
            **column_statistics(all_infos),
            **failure_counts(verify_responses),
            **across_repeats(repeats),
        }
        measured_tasks = [rollouts for rollouts in successes.values() if rollouts]
        extra = {**self.compute_metrics(measured_tasks), **self.kit_metrics(measured_tasks)}
        groups_by_task = {group[TASK_INDEX_KEY]: group for group in group_level_metrics}
        for per_task in extra.pop("per_task_metrics", []):
            groups_by_task.get(per_task.get(TASK_INDEX_KEY), {}).update(per_task)
        agent_metrics.update(extra)
        agent_metrics.update(self.compute_repeat_metrics(measured_tasks))
        agent_metrics.update(coverage)
        return AggregateMetrics(
            group_level_metrics=group_level_metrics,
            agent_metrics=agent_metrics,
            key_metrics={**self.get_key_metrics(agent_metrics), **coverage},
            repeat_level_metrics=repeats,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Environment-specific metrics over the successful rollouts grouped by task, in task order.

        Tasks whose rollouts all failed are left out. A `per_task_metrics` list in the result is merged
        into the per-task groups by `_ng_task_index`. Default: the declared `pass_at_k` metrics, if any.
        """
        return self.pass_at_k.compute(tasks) if self.pass_at_k is not None else {}

    def kit_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """What a kit base class measures for every environment built on it (a judged server: its judge's
        failures), over the same tasks as `compute_metrics` and merged after it, so an environment that
        overrides `compute_metrics` cannot drop them. Default: nothing."""
        return {}

    def compute_repeat_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """NeMo Gym 0.7's hook for an environment's own repeat-level metrics (merged into the agent
        metrics), over the same tasks as `compute_metrics`. The per-repeat means of every numeric field and
        their `*_across_repeats/*` spread are computed already; default: nothing more."""
        return {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The headline: the entries `key_metric_patterns` names (default: the means)."""
        return select_key_metrics(agent_metrics, self.key_metric_patterns)


def count_of(value: Any, field: str) -> int:
    """A count an environment's verify answer carries (`num_steps_passed`, ...), read back from a request to
    `/aggregate_metrics`: absent is 0; anything but a whole number >= 0 (NaN, a string, -1) is a 422 naming
    `field`, never a crash in the environment's `compute_metrics`."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise HTTPException(status_code=422, detail=f"{field} must be a count, got {value!r}")
    if value < 0 or value != int(value):
        raise HTTPException(status_code=422, detail=f"{field} must be a whole number >= 0, got {value!r}")
    return int(value)
