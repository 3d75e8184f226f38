"""terminus_judge: one turn of a terminal agent driven by the Terminus harness. The model answers with the
harness's JSON (analysis, plan, commands of keystrokes, completion flag) and is rewarded 1.0 when that JSON
parses, fits the row's harness schema (terminus_1 or terminus_2), agrees with the demonstrated turn on
whether the task is complete, and types nearly the same keystrokes (difflib ratio at the threshold).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import ConfigDict, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.cpu_pool import run_cpu_bound
from nemo_gym.errors import GymError
from nemo_gym.failure_kinds import VERIFIER_ERROR
from nemo_gym.pass_at_k_metrics import PassAtK
from resources_servers.terminus_judge.grading import HARNESSES, FailureCode, TurnGrade, grade_turn, turn_text


class TerminusJudgeConfig(BaseResourcesServerConfig):
    """NeMo Gym's judge keys load (so its configs work) but the judge stage is not offered here: a
    config that would need it stops the server at startup instead of silently scoring without it."""

    model_config = ConfigDict(extra="allow")

    enable_string_similarity: bool = True
    string_similarity_threshold: float | None = Field(default=None, ge=0, le=1)
    enable_llm_judge: bool = False
    grading_timeout_s: float = Field(default=10.0, gt=0, description="past it the sample is masked")

    @model_validator(mode="after")
    def _grading_without_judge(self) -> TerminusJudgeConfig:
        if self.enable_llm_judge:
            raise ValueError("enable_llm_judge: the equivalence-judge stage is not available in this port")
        if not self.enable_string_similarity:
            raise ValueError("enable_string_similarity must be true: without the judge it is the only grade")
        return self


class TerminusJudgeVerifyRequest(BaseVerifyRequest):
    """`expected_answer` (or `metadata.expected_answer`) is the demonstrated turn as JSON text;
    `metadata.harness` names its format; `threshold` overrides the config's similarity threshold."""

    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str | None = None
    metadata: dict[str, Any] | None = None
    threshold: float | None = Field(default=None, ge=0, le=1)

    @model_validator(mode="after")
    def _gradable_row(self) -> TerminusJudgeVerifyRequest:
        if not isinstance(self.expected_turn(), dict):
            raise ValueError("expected_answer (or metadata.expected_answer) must be a JSON object as text")
        if self.harness() not in HARNESSES:
            raise ValueError(f"metadata.harness must be one of {sorted(HARNESSES)}")
        return self

    def expected_text(self) -> str:
        if self.expected_answer:
            return self.expected_answer
        found = (self.metadata or {}).get("expected_answer")
        return "" if found is None else str(found)

    def expected_turn(self) -> Any:
        try:
            return json.loads(self.expected_text())
        except (ValueError, RecursionError):
            return None

    def harness(self) -> Any:
        return (self.metadata or {}).get("harness")


class TerminusJudgeVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str
    model_output: str
    parsed_output: dict[str, Any] | None = None
    similarity_score: float = -1.0
    schema_check_passed: bool = False
    schema_problem: str | None = None
    task_complete_check_passed: bool = False
    string_similarity_passed: bool = False
    judge_passed: bool = False
    judge_evaluations: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] | None = None
    threshold: float | None = None


RESULT_FIELDS = frozenset(TerminusJudgeVerifyResponse.model_fields)


class TerminusJudgeResourcesServer(SimpleResourcesServer):
    config: TerminusJudgeConfig
    pass_at_k = PassAtK()
    key_metric_patterns = (
        "mean/reward",
        "mean/similarity_score",
        "pass@1[avg-of-{k}]/*",
        "pass@{k}/*",
        "failure/*",
    )

    async def verify(self, body: TerminusJudgeVerifyRequest) -> TerminusJudgeVerifyResponse:
        threshold = body.threshold if body.threshold is not None else self.config.string_similarity_threshold
        if threshold is None:
            # Checked per row: NeMo Gym's rows may carry their own threshold and its configs none.
            raise GymError(422, "invalid_row", "threshold: the row has none and the config sets none")
        text = turn_text(last_assistant_text(body))
        grade = await run_cpu_bound(
            grade_turn,
            text,
            body.expected_turn(),
            body.harness(),
            threshold,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=TurnGrade(failure_reason=FailureCode.UNKNOWN_ERROR),
        )
        extras = {key: value for key, value in (body.model_extra or {}).items() if key not in RESULT_FIELDS}
        answer = TerminusJudgeVerifyResponse(
            **extras,
            responses_create_params=body.responses_create_params,
            response=body.response,
            uuid=body.uuid,
            metadata=body.metadata,
            threshold=body.threshold,
            expected_answer=body.expected_text(),
            model_output=text,
            reward=grade.reward,
            parsed_output=grade.parsed_output,
            similarity_score=grade.similarity_score,
            schema_check_passed=grade.schema_check_passed,
            schema_problem=grade.schema_problem,
            task_complete_check_passed=grade.task_complete_check_passed,
            string_similarity_passed=grade.string_similarity_passed,
        )
        answer.failure_reason = grade.failure_reason.value
        if grade.failure_reason is FailureCode.UNKNOWN_ERROR:
            answer.mask_sample, answer.failure_kind = True, VERIFIER_ERROR
        return answer

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the reward, and the share of rollouts stopped at each check (`failure/<code>`)."""
        rollouts = [rollout for task in tasks for rollout in task]
        known = {code.value for code in FailureCode}
        counts = Counter(r.get("failure_reason") for r in rollouts if r.get("failure_reason") in known)
        shares = {f"failure/{code}": count / len(rollouts) for code, count in sorted(counts.items())}
        return {**super().compute_metrics(tasks), **shares}


def last_assistant_text(body: BaseVerifyRequest) -> str:
    """The text of the last assistant message of the output (the turn the harness would execute)."""
    for item in reversed(body.response.output):
        if getattr(item, "type", None) == "message" and getattr(item, "role", None) == "assistant":
            content = item.content
            if isinstance(content, str):
                return content
            return "\n".join(part.text for part in content if isinstance(getattr(part, "text", None), str))
    return ""


if __name__ == "__main__":
    TerminusJudgeResourcesServer.run_webserver()
