"""The settings of `gym collect` (and `gym eval run`), validated once from the merged config."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from nemo_gym.config_types import BaseNeMoGymCLIConfig

DEFAULT_MAX_IN_FLIGHT = 1024


class RolloutCollectionConfig(BaseNeMoGymCLIConfig):
    """Run the rows of a JSONL file through agents of a running deployment (`gym run`) and write the
    results, the failures and the aggregate metrics next to `output_jsonl_fpath`."""

    input_jsonl_fpath: str = Field(description="tasks, one JSON object per line")
    output_jsonl_fpath: str = Field(description="results; sibling files get the same stem")
    agent_name: str | None = Field(default=None, description="agent for rows without agent_ref")
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
    upload_rollouts_to_wandb: bool = Field(default=True, description="with W&B configured: a rollouts table")

    @field_validator("num_repeats")
    @classmethod
    def _positive_repeats(cls, value: int | dict[str, int] | None) -> int | dict[str, int]:
        if value is None:
            return 1
        counts = value.values() if isinstance(value, dict) else [value]
        if any(count < 1 for count in counts):
            raise ValueError("every repeat count must be at least 1")
        return value
