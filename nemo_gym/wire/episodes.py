"""NeMo Gym 0.7's episodes: what a collector sends an environment server's `/run` (one attempt at one
task) and what comes back (exactly one of a result or a failure), plus the single-agent-turn shapes.

A task row becomes an episode's task by `materialize_task`: its id is taken from the row, everything else
but the collector's bookkeeping keys is the task's input.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.rows import BaseVerifyResponse
from nemo_gym.wire.sessions import EpisodeId, TaskId

MAX_FAILURE_REASON_CHARS = 2000
REQUIRED_FAILURE_KEYS = frozenset({"failure_reason", "terminal"})
FailureStage = Literal["admission", "seed", "agent", "verification", "cleanup"]
# Keys a collector adds to a row that are not part of the task.
ROW_BOOKKEEPING_KEYS = frozenset({"agent_ref", "task_source", "skills_ref"})
BOOKKEEPING_KEY_PREFIX = "_ng_"
TASK_ID_SOURCE_KEYS = ("task_id", "problem_id", "instance_id")

TaskInputT = TypeVar("TaskInputT")
ResultT = TypeVar("ResultT")


class EpisodeFailure(BaseModel):
    """Why an episode produced no result; `terminal` says a retry cannot help."""

    model_config = ConfigDict(extra="forbid")

    failure_reason: str = Field(max_length=MAX_FAILURE_REASON_CHARS)
    terminal: bool
    failure_kind: str | None = None
    stage: FailureStage | None = None

    @model_serializer(mode="wrap")
    def _without_unset_labels(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # NeMo Gym leaves the optional labels out of the JSON when they are null.
        return {
            key: value
            for key, value in handler(self).items()
            if value is not None or key in REQUIRED_FAILURE_KEYS
        }


def shortened_reason(text: str) -> str:
    """`text` cut to what a failure reason may hold."""
    if len(text) <= MAX_FAILURE_REASON_CHARS:
        return text
    return text[: MAX_FAILURE_REASON_CHARS - 3] + "..."


class MaterializedTask(BaseModel, Generic[TaskInputT]):
    task_id: TaskId
    task_input: TaskInputT


class BaseEpisodeRequest(BaseModel, Generic[TaskInputT]):
    episode_id: EpisodeId
    task: MaterializedTask[TaskInputT]


class BaseEpisodeResponse(BaseModel, Generic[ResultT]):
    episode_id: EpisodeId
    task_id: TaskId
    result: ResultT | None = None
    failure: EpisodeFailure | None = None

    @model_validator(mode="after")
    def _result_or_failure(self) -> BaseEpisodeResponse:
        if (self.result is None) == (self.failure is None):
            raise ValueError("an episode response carries exactly one of result and failure")
        return self


def is_materialized_task_row(row: dict[str, Any]) -> bool:
    """Whether a dataset row is already an episode's task (`task_id` mapping plus `task_input`)."""
    return isinstance(row.get("task_id"), dict) and "task_input" in row


def materialize_task(row: dict[str, Any], *, taskset: str, task_index: int | None = None) -> dict[str, Any]:
    """A flat task row as an episode's task: its id is the row's `task_id`, `problem_id` or `instance_id`
    (the first present), else its `_ng_task_index`, else `task_index`; its input is the row without the
    collector's bookkeeping keys."""
    if is_materialized_task_row(row):
        raise ValueError("the row is already a materialized task (it has task_id and task_input)")
    task_id = next((row[key] for key in TASK_ID_SOURCE_KEYS if row.get(key) is not None), None)
    if task_id is None:
        task_id = row.get("_ng_task_index", task_index)
    if task_id is None:
        raise ValueError(
            f"the row has no task id: none of {', '.join(TASK_ID_SOURCE_KEYS)} or _ng_task_index"
        )
    task_input = {
        key: value
        for key, value in row.items()
        if key not in ROW_BOOKKEEPING_KEYS and not key.startswith(BOOKKEEPING_KEY_PREFIX)
    }
    return {"task_id": {"taskset": taskset, "task_id": str(task_id)}, "task_input": task_input}


# ---- single agent turn -----------------------------------------------------------------------------------


class SingleAgentTurnTaskInput(BaseModel):
    """The model's request and the task's data; a flat row is read with every other key in `task_data`."""

    model_config = ConfigDict(extra="forbid")

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    task_data: dict[str, JsonValue] = {}

    @model_validator(mode="before")
    @classmethod
    def _fold_flat_keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        flat = {
            key: item for key, item in value.items() if key not in ("responses_create_params", "task_data")
        }
        if not flat:
            return value
        task_data = dict(value.get("task_data") or {})
        clashing = sorted(key for key in flat if key in task_data and task_data[key] != flat[key])
        if clashing:
            raise ValueError(f"keys given both flat and in task_data with different values: {clashing}")
        return {**{k: v for k, v in value.items() if k not in flat}, "task_data": {**task_data, **flat}}


class SingleAgentTurnResult(BaseVerifyResponse):
    """The resources server's verify answer (its extra fields kept) plus what the agent observed."""

    model_config = ConfigDict(extra="allow")

    ng_agent_observations: dict[str, JsonValue] | None = None


class SingleAgentTurnFailure(EpisodeFailure):
    partial_response: NeMoGymResponse | None = None


class SingleAgentTurnRequest(BaseEpisodeRequest[SingleAgentTurnTaskInput]):
    pass


class SingleAgentTurnResponse(BaseEpisodeResponse[SingleAgentTurnResult]):
    failure: SingleAgentTurnFailure | None = None
