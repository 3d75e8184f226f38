"""omniscience: open factual questions graded by an LLM judge on four tiers (AA-Omniscience style).

The judge grades the policy's answer against `expected_answer` as A (CORRECT), B (INCORRECT), C
(PARTIAL_ANSWER) or D (NOT_ATTEMPTED). Only a correct answer earns reward (1.0); every other grade earns
0.0. Per rollout, `omniscience_index` is +1 for correct, -1 for incorrect (a confident wrong answer, also
flagged `is_hallucination`) and 0 otherwise, so the aggregated index rewards abstaining over guessing. A
judgment that fails, or a judge answer without a grade, is reported in `judge_failure`, never scored.
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
from resources_servers.omniscience.omniscience_grading import (
    Verdict,
    final_answer,
    load_prompt,
    omniscience_metrics,
    parse_grade,
)

FOLDER = Path(__file__).resolve().parent


class OmniscienceConfig(JudgedEnvConfig):
    # A YAML file with the prompt under `user` ({question}, {expected_answer}, {generation}), relative to
    # this folder unless absolute.
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


class OmniscienceVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    id: int | str | None = None
    domain: str | None = None
    topic: str | None = None
    question: str | None = None
    expected_answer: str | None = None


class OmniscienceVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    expected_answer: str | None = None
    verdict: Verdict | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    is_correct: float = 0.0
    is_incorrect: float = 0.0
    is_partial: float = 0.0
    is_not_attempted: float = 0.0
    omniscience_index: float = 0.0
    is_hallucination: float = 0.0
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(OmniscienceVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class OmniscienceResourcesServer(JudgedResourcesServer):
    config: OmniscienceConfig
    _prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_prompt(FOLDER, self.config.judge_prompt_path)
        return app

    async def verify(self, body: OmniscienceVerifyRequest) -> OmniscienceVerifyResponse:
        """The last assistant message without its reasoning, graded by the judge against `expected_answer`;
        no answer (nothing written, or reasoning never closed) is NOT_ATTEMPTED without a judge call."""
        extracted = final_answer(last_assistant_text(body.response))
        expected = body.expected_answer or ""
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": extracted or None,
            "expected_answer": expected,
        }
        verdict: Verdict = "not_attempted"
        judge_output = None
        evaluations: list[JudgeEvaluation] = []
        if extracted:
            prompt = self._prompt.format(
                question=body.question or "", expected_answer=expected, generation=extracted
            )
            try:
                judgment = await self._judge.ask(prompt, parse_grade, missing="has no grade (A, B, C or D)")
            except JudgeFailed as failed:
                return OmniscienceVerifyResponse(**graded, **self._judge.failure_fields(failed))
            evaluations.append(judgment.evaluation)
            judge_output = judgment.text
            verdict = judgment.verdict or "incorrect"  # never None: `missing` refused an answer without one
        is_correct, is_incorrect = float(verdict == "correct"), float(verdict == "incorrect")
        return OmniscienceVerifyResponse(
            **graded,
            reward=is_correct,
            verdict=verdict,
            judge_output=judge_output,
            judge_evaluations=evaluations,
            is_correct=is_correct,
            is_incorrect=is_incorrect,
            is_partial=float(verdict == "partial"),
            is_not_attempted=float(verdict == "not_attempted"),
            omniscience_index=is_correct - is_incorrect,
            is_hallucination=is_incorrect,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return omniscience_metrics(tasks)


if __name__ == "__main__":
    OmniscienceResourcesServer.run_webserver()
