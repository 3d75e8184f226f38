"""The settings of `gym collect` (and `gym eval run`), validated once from the merged config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from nemo_gym.collection.records import agent_map_with_agent_name
from nemo_gym.collection.rollout_health import RolloutHealthSettings
from nemo_gym.config.cli_models import UploadRolloutsConfigMixin

DEFAULT_MAX_IN_FLIGHT = 1024


class RolloutCollectionConfig(RolloutHealthSettings, UploadRolloutsConfigMixin):
    """Run the rows of a JSONL file through agents of a running deployment (`gym run`) and write the
    results, the failures and the aggregate metrics next to `output_jsonl_fpath`."""

    input_jsonl_fpath: str = Field(description="tasks, one JSON object per line")
    output_jsonl_fpath: str = Field(description="results; sibling files get the same stem")
    agent_name: str | None = Field(
        default=None,
        description="the agent of every row, overriding its agent_ref (NeMo Gym 0.7); agent_map._default",
    )
    agent_map: dict[str, str] | None = Field(
        default=None,
        description="agent or task_source -> the agent that runs its rows (`_default`: every other row); "
        "--agent-type writes the old -> new names here",
    )
    limit: int | None = Field(default=None, ge=0, description="read only the first N rows (0/null: all)")
    num_repeats: int | dict[str, int] | None = Field(
        default=1, description="rollouts per row: an int, or {agent name: n, _default: n}"
    )
    num_repeats_add_seed: bool = Field(default=False, description="seed = rollout index, via metadata")
    interleave_repeats: bool = Field(
        default=False, description="run one repeat of every task, then the next (abab), instead of aabb"
    )
    num_samples_in_parallel: int | None = Field(
        default=None, ge=1, description=f"rollouts in flight (default {DEFAULT_MAX_IN_FLIGHT})"
    )
    responses_create_params: dict[str, Any] = Field(
        default_factory=dict, description="overrides of each row's top-level responses_create_params keys"
    )
    resume_from_cache: bool = Field(default=False, description="run only the rollouts without a result")
    overwrite: bool = Field(default=False, description="replace the results already in output_jsonl_fpath")
    prompt_config: str | None = Field(default=None, description="YAML {system?, user} prompt templates")
    rollout_timeout_s: float | None = Field(
        default=None, gt=0, description="deadline of one rollout (default: global_http_deadline_s + 30)"
    )
    environment_routing_mode: Literal["agent", "legacy", "taskset"] = Field(
        default="agent",
        description="rows go to their agent's environment server (agent), all to environment_server_name "
        "(legacy), or by taskset through environment_server_routes (taskset)",
    )
    environment_server_name: str | None = Field(default=None, description="the server of legacy routing")
    environment_server_routes: dict[str, str] | None = Field(
        default=None, description="{taskset: environment server} for materialized rows"
    )
    disable_aggregation: bool = Field(default=False, description="skip /aggregate_metrics")
    dispatch_budget_s: float | None = Field(
        default=None,
        ge=0,
        description="start no rollout later than this after the first (resume runs the rest)",
    )
    drain_margin_s: float | None = Field(
        default=None,
        ge=0,
        description="time a rollout needs, kept free at the budget's end (default adaptive)",
    )
    require_complete: bool = Field(
        default=False,
        description="exit 1 with EVAL FAILED: <completed>/<expected> unless every rollout has a result",
    )
    count_failure_classes_as_zero: list[str] = Field(
        default_factory=list,
        description="failure classes scored as reward 0 in the metrics (coverage/imputed)",
    )
    count_missing_rollouts_as_zero: bool = Field(
        default=False,
        description="rollouts never run are scored as reward 0 in the metrics (coverage/imputed)",
    )
    rollout_collection_driver: str | None = Field(
        default=None,
        description="'module:function' awaited as (config, global config) instead of Gym's driver",
    )
    fan_out: dict[str, list[str]] | None = Field(
        default=None,
        description="agent or task_source -> agents that each run its rows (one rollout index per agent)",
    )

    @field_validator("fan_out")
    @classmethod
    def _distinct_fan_out(cls, value: dict[str, list[str]] | None) -> dict[str, list[str]] | None:
        for key, agents in (value or {}).items():
            if not agents or len(set(agents)) != len(agents):
                raise ValueError(f"fan_out[{key!r}] must list distinct agents, got {agents!r}")
        return value

    @model_validator(mode="after")
    def _agent_name_is_the_default_route(self) -> RolloutCollectionConfig:
        self.agent_map = agent_map_with_agent_name(self.agent_map, self.agent_name)
        return self

    @field_validator("num_repeats")
    @classmethod
    def _positive_repeats(cls, value: int | dict[str, int] | None) -> int | dict[str, int]:
        if value is None:
            return 1
        counts = value.values() if isinstance(value, dict) else [value]
        if any(count < 1 for count in counts):
            raise ValueError("every repeat count must be at least 1")
        return value


# NeMo Gym 0.7 collection settings that change nothing here, and why: a run that sets one is told so.
WITHOUT_EFFECT = {
    "dispatch_longest_first": "a resumed collection runs the missing rollouts in file order",
    "retry_terminal_timeouts": "a timeout is never terminal here: a resumed collection retries it within "
    "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS",
    "retry_invalid_judge_responses": "judge failures are results (judge_failure); rescore them with "
    "gym eval reverify --judge-failed-only",
    "skills": "skills_ref stamping is not supported",
}


def settings_without_effect(cfg: Mapping[str, Any]) -> list[str]:
    """One line per NeMo Gym 0.7 collection setting `cfg` sets that Gym does not act on."""
    return [
        f"{key} has no effect in Gym: {reason}"
        for key, reason in WITHOUT_EFFECT.items()
        if cfg.get(key) not in (None, False, [], {})
    ]
