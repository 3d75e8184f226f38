"""math_with_judge's settings and the shapes of its /verify request and answer."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from nemo_gym.base_resources_server import BaseResourcesServerConfig, BaseVerifyRequest, BaseVerifyResponse
from nemo_gym.judge import JudgeConfig, JudgeEvaluation, JudgeFailure


class MathWithJudgeConfig(JudgeConfig, BaseResourcesServerConfig):
    """The judge settings (`judge_model_server`, ...) come from `JudgeConfig`; the judge is asked only when
    the symbolic check fails and `should_use_judge` is true."""

    should_use_judge: bool = False
    # The base `grading_timeout_s` (10 s) bounds the symbolic check; NeMo Gym's key still sets it.
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"library_verifier_timeout_seconds": "grading_timeout_s"}
    library_verifier_max_concurrency: int = Field(default=32, ge=1)

    @model_validator(mode="after")
    def _judge_needs_a_model(self) -> MathWithJudgeConfig:
        if self.should_use_judge and self.judge_model_server is None:
            raise ValueError("should_use_judge is true but judge_model_server is not set")
        return self


class MathVerifyRequest(BaseVerifyRequest):
    question: str
    expected_answer: str


class MathVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None
    library_reward: float
    judge_evaluations: list[JudgeEvaluation] | None
    judge_failure: JudgeFailure | None = None
