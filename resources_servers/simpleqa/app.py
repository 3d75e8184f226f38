"""simpleqa: short factual questions graded by an LLM judge as CORRECT, INCORRECT or NOT_ATTEMPTED.

The three grades reward knowing when not to answer: a wrong answer and an abstention both earn 0.0, but
the metrics tell them apart (accuracy, not-attempted rate, accuracy given attempted, F1). A judgment that
fails, or a judge answer without a grade, is reported in `judge_failure`, never counted as a grade.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from resources_servers.simpleqa.simpleqa_grading import Verdict, load_prompt, parse_grade, simpleqa_metrics

FOLDER = Path(__file__).resolve().parent


class SimpleQAConfig(JudgedEnvConfig):
    judge_prompt_path: str = "prompts/judge.yaml"
    use_chat_completions_for_judge: bool = False

    @field_validator("use_chat_completions_for_judge")
    @classmethod
    def _responses_only(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "not supported: every Gym model server serves /v1/responses, which the judge uses"
            )
        return value


class SimpleQAVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    id: int | str | None = None
    question: str | None = None
    expected_answer: str | None = None


class SimpleQAVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    expected_answer: str | None = None
    verdict: Verdict | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    is_correct: float = 0.0
    is_incorrect: float = 0.0
    is_not_attempted: float = 0.0
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(SimpleQAVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class SimpleQAResourcesServer(JudgedResourcesServer):
    config: SimpleQAConfig
    _prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_prompt(FOLDER, self.config.judge_prompt_path)
        return app

    async def verify(self, body: SimpleQAVerifyRequest) -> SimpleQAVerifyResponse:
        """reward 1.0 for CORRECT only; no answer text is NOT_ATTEMPTED without asking the judge."""
        generation = last_assistant_text(body.response)
        expected = body.expected_answer or ""
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": generation or None,
            "expected_answer": expected,
        }
        verdict: Verdict = "not_attempted"
        judge_output = None
        evaluations: list[JudgeEvaluation] = []
        if generation:
            prompt = self._prompt.format(
                question=body.question or "", expected_answer=expected, generation=generation
            )
            try:
                judgment = await self._judge.ask(prompt, parse_grade, missing="has no grade (A, B or C)")
            except JudgeFailed as failed:
                return SimpleQAVerifyResponse(**graded, **self._judge.failure_fields(failed))
            evaluations.append(judgment.evaluation)
            judge_output = judgment.text
            verdict = (
                judgment.verdict or "not_attempted"
            )  # never None: `missing` refused an answer without one
        return SimpleQAVerifyResponse(
            **graded,
            reward=float(verdict == "correct"),
            verdict=verdict,
            judge_output=judge_output,
            judge_evaluations=evaluations,
            is_correct=float(verdict == "correct"),
            is_incorrect=float(verdict == "incorrect"),
            is_not_attempted=float(verdict == "not_attempted"),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return simpleqa_metrics(tasks)


if __name__ == "__main__":
    SimpleQAResourcesServer.run_webserver()
