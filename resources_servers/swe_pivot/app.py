"""swe_pivot: PivotRL on coding-agent trajectories. A trajectory is cut before one of its steps and the
model must take that step; its first tool call is graded against the demonstrated one by tool (name or
family), target (file, editor sub-command, shell verb and paths) and argument similarity. No judge: the
grade is computed, so it is cheap enough for every RL sample.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.swe_pivot.grading import (
    Call,
    FailureCode,
    Grade,
    GradingSettings,
    decode_arguments,
    grade_step,
)


class SwePivotConfig(BaseResourcesServerConfig):
    reward_mode: Literal["binary", "continuous"] = Field(
        default="binary",
        description="binary: 1 at or above similarity_full_credit, else 0; continuous: partial",
    )
    enable_target_match: bool = True
    enable_argument_similarity: bool = True
    similarity_threshold: float = Field(
        default=0.4, ge=0, le=1, description="continuous: 0.5 credit from here"
    )
    similarity_full_credit: float = Field(default=0.8, ge=0, le=1, description="full credit from here")
    enable_diff_size_shaping: bool = Field(default=True, description="continuous only: cost for large edits")
    diff_size_alpha: float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered_thresholds(self) -> SwePivotConfig:
        if self.similarity_threshold > self.similarity_full_credit:
            raise ValueError("similarity_threshold must not exceed similarity_full_credit")
        return self

    def settings(self) -> GradingSettings:
        return GradingSettings(
            reward_mode=self.reward_mode,
            enable_target_match=self.enable_target_match,
            enable_argument_similarity=self.enable_argument_similarity,
            similarity_threshold=self.similarity_threshold,
            similarity_full_credit=self.similarity_full_credit,
            enable_diff_size_shaping=self.enable_diff_size_shaping,
            diff_size_alpha=self.diff_size_alpha,
        )


def _as_call(candidate: Any) -> Call | None:
    """A `{"type": "function_call", "name", "arguments"}` object as a Call; anything else None."""
    if isinstance(candidate, dict) and candidate.get("type") == "function_call":
        name = candidate.get("name")
        if isinstance(name, str) and name:
            return Call(name, decode_arguments(candidate.get("arguments", "")))
    return None


def _decoded(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


class SwePivotVerifyRequest(BaseVerifyRequest):
    """The gold step is `expected_action`, else `expected_answer` as its JSON text, else
    `metadata.expected_action` (the three places NeMo Gym's rows use)."""

    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str | None = None
    expected_action: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _has_a_gold_call(self) -> SwePivotVerifyRequest:
        if self.gold_call() is None:
            raise ValueError(
                "expected_action (or expected_answer as JSON, or metadata.expected_action) must be "
                '{"type": "function_call", "name": <non-empty string>, "arguments": ...}'
            )
        return self

    def gold_call(self) -> Call | None:
        for candidate in (
            self.expected_action,
            _decoded(self.expected_answer),
            (self.metadata or {}).get("expected_action"),
        ):
            if (call := _as_call(candidate)) is not None:
                return call
        return None


class SwePivotVerifyResponse(BaseVerifyResponse):
    """The graded layers, and the row's fields echoed so that a result row can be verified again."""

    model_config = ConfigDict(extra="allow")

    expected_action: dict[str, Any] | None = None
    uuid: str | int | None = None
    expected_answer: str
    model_output: str
    tool_name_match: bool
    target_match: bool | None = None
    similarity_score: float | None = None
    diff_size_penalty: float | None = None
    metadata: dict[str, Any] | None = None


RESULT_FIELDS = frozenset(SwePivotVerifyResponse.model_fields)


def first_call(response: NeMoGymResponse) -> Call | None:
    for item in response.output:
        if getattr(item, "type", None) == "function_call":
            return Call(item.name, decode_arguments(item.arguments))
    return None


def _masked_on_timeout() -> Grade:
    return Grade(failure_reason=FailureCode.UNKNOWN_ERROR)


class SwePivotResourcesServer(SimpleResourcesServer):
    config: SwePivotConfig
    pass_at_k = PassAtK()
    key_metric_patterns = ("mean/reward", "pass@1[avg-of-{k}]/*", "pass@{k}/*", "failure/*")

    async def verify(self, body: SwePivotVerifyRequest) -> SwePivotVerifyResponse:
        actual = first_call(body.response)
        grade = await run_cpu_bound(
            grade_step,
            actual,
            body.gold_call(),
            self.config.settings(),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=_masked_on_timeout(),
        )
        if actual is None:
            model_output = "(no function_call in response)"
        else:
            model_output = f"{actual.name}({json.dumps(actual.arguments)[:500]})"
        answer = SwePivotVerifyResponse(
            **{key: value for key, value in (body.model_extra or {}).items() if key not in RESULT_FIELDS},
            expected_action=body.expected_action,
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=grade.reward,
            uuid=body.uuid,
            expected_answer=body.expected_answer or "",
            model_output=model_output,
            tool_name_match=grade.tool_name_match,
            target_match=grade.target_match,
            similarity_score=grade.similarity_score,
            diff_size_penalty=grade.diff_size_penalty,
            metadata=body.metadata,
        )
        answer.failure_reason = grade.failure_reason.value
        if grade.failure_reason is FailureCode.UNKNOWN_ERROR:
            answer.mask_sample, answer.failure_kind = True, VERIFIER_ERROR
        return answer

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the reward, and the share of rollouts stopped at each layer (`failure/<code>`)."""
        rollouts = [rollout for task in tasks for rollout in task]
        known = {code.value for code in FailureCode}
        counts = Counter(r.get("failure_reason") for r in rollouts if r.get("failure_reason") in known)
        shares = {f"failure/{code}": count / len(rollouts) for code, count in sorted(counts.items())}
        return {**super().compute_metrics(tasks), **shares}


if __name__ == "__main__":
    SwePivotResourcesServer.run_webserver()
