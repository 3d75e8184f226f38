"""The Agent Trajectory Interchange Format (ATIF, Harbor's RFC 0001), version 1.7, as pydantic models.

Only the parts Gym writes and reads back are modelled: the root object, the agent, the steps with their
tool calls, observations and metrics, and the final metrics. Unknown keys are refused, so a file that
validates here holds nothing Gym would silently drop when it reads the file back.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ATIF_SCHEMA_VERSION = "ATIF-v1.7"


class AtifModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AtifAgent(AtifModel):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class AtifToolCall(AtifModel):
    tool_call_id: str = Field(min_length=1)
    function_name: str = Field(min_length=1)
    arguments: dict[str, Any]


class AtifObservationResult(AtifModel):
    source_call_id: str | None = None
    content: str | None = None


class AtifObservation(AtifModel):
    results: list[AtifObservationResult]


class AtifMetrics(AtifModel):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class AtifStep(AtifModel):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    message: str
    reasoning_content: str | None = None
    tool_calls: list[AtifToolCall] | None = None
    observation: AtifObservation | None = None
    metrics: AtifMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_fields_only_on_agent_steps(self) -> AtifStep:
        if self.source != "agent":
            given = [
                name
                for name in ("model_name", "reasoning_content", "tool_calls", "metrics")
                if getattr(self, name) is not None
            ]
            if given:
                raise ValueError(f"step {self.step_id}: {', '.join(given)} only belong to agent steps")
        return self


class AtifFinalMetrics(AtifModel):
    total_prompt_tokens: int | None = Field(default=None, ge=0)
    total_completion_tokens: int | None = Field(default=None, ge=0)
    total_cached_tokens: int | None = Field(default=None, ge=0)
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class AtifTrajectory(AtifModel):
    schema_version: Literal["ATIF-v1.7"] = ATIF_SCHEMA_VERSION
    session_id: str = Field(min_length=1)
    trajectory_id: str | None = None
    agent: AtifAgent
    steps: list[AtifStep]
    notes: str | None = None
    final_metrics: AtifFinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _steps_numbered_and_results_matched(self) -> AtifTrajectory:
        for position, step in enumerate(self.steps, start=1):
            if step.step_id != position:
                raise ValueError(
                    f"step_id {step.step_id} at position {position}: steps count from 1 in order"
                )
            called = {call.tool_call_id for call in step.tool_calls or []}
            for result in step.observation.results if step.observation else []:
                if result.source_call_id is not None and result.source_call_id not in called:
                    raise ValueError(
                        f"step {step.step_id}: observation for {result.source_call_id!r}, "
                        "which no tool call of the step made"
                    )
        return self

    def to_json_dict(self) -> dict[str, Any]:
        """The document as written: absent optional fields are left out rather than written as null."""
        return self.model_dump(mode="json", exclude_none=True)
