"""The `context_history` settings: which policy rewrites the context, when it may, and the hard limits a
request must fit. Same keys, defaults and checks as NeMo Gym 0.7's simple_agent_with_compaction."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

POLICY_TYPES = ("identity", "recency")


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Switchable(_Settings):
    """A kind of context the recency policy may thin out; its settings mean nothing while it is off."""

    enabled: bool = False

    @model_validator(mode="after")
    def _settings_need_enabled(self) -> _Switchable:
        configured = sorted(self.model_fields_set - {"enabled"})
        if configured and not self.enabled:
            raise ValueError(f"{configured} only apply with enabled: true; set it or remove them")
        return self


class ImageRecencyConfig(_Switchable):
    """Keep the images of the last `keep_last_groups` items that carry images (and those of the task's
    own input when `protect_initial_context`); an omitted run of them reads `omission_marker`."""

    protect_initial_context: bool = True
    keep_last_groups: int = Field(default=3, ge=0)
    omission_marker: str | None = "[Earlier image omitted]"


class ReasoningRecencyConfig(_Switchable):
    """Keep the reasoning of the last `keep_last_blocks` model calls (and of the first, if asked)."""

    keep_first_block: bool = False
    keep_last_blocks: int = Field(default=3, ge=0)


class RecencyHistoryPolicyConfig(_Settings):
    images: ImageRecencyConfig = Field(default_factory=ImageRecencyConfig)
    reasoning: ReasoningRecencyConfig = Field(default_factory=ReasoningRecencyConfig)

    @model_validator(mode="after")
    def _something_to_thin(self) -> RecencyHistoryPolicyConfig:
        if not (self.images.enabled or self.reasoning.enabled):
            raise ValueError("the recency policy needs images.enabled or reasoning.enabled")
        return self


class HistoryPolicyConfig(_Settings):
    type: str = "identity"
    config: RecencyHistoryPolicyConfig | dict[str, Any] = Field(default_factory=dict, validate_default=True)

    @field_validator("type")
    @classmethod
    def _known_policy(cls, name: str) -> str:
        if name not in POLICY_TYPES:
            raise ValueError(f"unknown policy.type {name!r}; known: {', '.join(POLICY_TYPES)}")
        return name

    @field_validator("config", mode="before")
    @classmethod
    def _settings_of_the_policy(cls, value: Any, info: ValidationInfo) -> Any:
        """The recency policy's settings are checked as such (errors name `config.<key>`)."""
        if info.data.get("type") == "recency":
            return RecencyHistoryPolicyConfig.model_validate(value or {})
        if value:
            raise ValueError("policy.type identity takes no policy.config")
        return {}


class CompactionScheduleConfig(_Settings):
    """`rolling_recency` applies the policy before every call; `turn_chunked_recency` freezes what it
    made for `actions_per_chunk` calls, appending to it, so those calls extend one another's prompts."""

    type: Literal["rolling_recency", "turn_chunked_recency"] = "rolling_recency"
    actions_per_chunk: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _rolling_is_one_action(self) -> CompactionScheduleConfig:
        if self.type == "rolling_recency" and self.actions_per_chunk != 1:
            raise ValueError("rolling_recency compacts before every call: actions_per_chunk must be 1")
        return self


class ContextGuardConfig(_Settings):
    """Limits checked before each call; a request over one is compacted first where the schedule allows,
    and the rollout ends there if it still does not fit."""

    max_total_tokens: int | None = Field(default=None, ge=1)
    reserved_generation_tokens: int = Field(default=0, ge=0)
    max_active_images: int | None = Field(default=None, ge=0)
    max_vision_tokens: int | None = Field(default=None, ge=0)
    projected_vision_tokens_per_image: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _vision_tokens_need_a_projection(self) -> ContextGuardConfig:
        if self.max_vision_tokens is not None and self.projected_vision_tokens_per_image is None:
            raise ValueError("max_vision_tokens needs projected_vision_tokens_per_image")
        return self

    @property
    def any(self) -> bool:
        return any(
            limit is not None
            for limit in (self.max_total_tokens, self.max_active_images, self.max_vision_tokens)
        )


class ContextHistoryConfig(_Settings):
    enabled: bool = False
    policy: HistoryPolicyConfig = Field(default_factory=HistoryPolicyConfig)
    schedule: CompactionScheduleConfig = Field(default_factory=CompactionScheduleConfig)
    guards: ContextGuardConfig = Field(default_factory=ContextGuardConfig)
