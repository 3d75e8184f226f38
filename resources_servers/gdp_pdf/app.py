"""gdp_pdf: professional questions over a PDF document (GDP.pdf style), graded criterion by criterion.

The policy gets the document as NeMo Gym's gdp_pdf agent hands it over (extracted text plus one rendered
image per page, here already inlined in the row). Each rubric criterion is judged PASS or FAIL in its own
judge call that sees the task, the answer and that criterion only. The reward is the share of criteria
passed (`mean_pass`, a dense reward for RL); `all_pass` (every criterion passed) is GDP.pdf's headline
number. A criterion without a verdict after `judge_max_parse_attempts` calls, or a failed judge call, marks
the whole rollout with `judge_failure`, never a silent 0. A row whose page image does not decode is a 422.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import TOKEN_MEANS, highest_k_metrics
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.gdp_pdf.grading import CriterionVerdict, gdp_pdf_metrics, load_prompt, read_verdict
from resources_servers.labbench2_vlm.prompt_media import require_readable_images

FOLDER = Path(__file__).resolve().parent


class GdpPdfConfig(JudgedEnvConfig):
    judge_prompt_path: str = "prompts/judge.yaml"
    judge_max_parse_attempts: int = Field(default=5, ge=1, le=10)
    # NeMo Gym's benchmark keys for a fixed denominator; not supported here (refused rather than ignored).
    expected_task_count: int | None = None
    expected_num_repeats: int | None = None
    expected_domain_task_counts: dict[str, int] = Field(default_factory=dict)

    @field_validator("expected_task_count", "expected_num_repeats", "expected_domain_task_counts")
    @classmethod
    def _not_supported(cls, value: Any) -> Any:
        if value:
            raise ValueError("not supported: metrics are computed over the rollouts that were scored")
        return value


class RubricCriterion(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str | int | None = None
    criterion: str

    @field_validator("criterion")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a rubric criterion needs its text")
        return value


class GdpPdfMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    task_prompt: str = Field(min_length=1)
    domain: str | None = None
    rubric_criteria: list[RubricCriterion] = Field(min_length=1)


class GdpPdfVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: GdpPdfMetadata


class CriterionEvaluation(BaseModel):
    criterion_id: str
    criterion: str
    passed: bool
    verdict: CriterionVerdict | None = None
    judge_output: str | None = None
    judge_calls: int = 0


class GdpPdfVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: dict[str, Any]
    extracted_answer: str | None = None
    criterion_evaluations: list[CriterionEvaluation] = []
    criteria_passed: int | None = None
    criteria_total: int
    mean_pass: float | None = None
    all_pass: float | None = None
    reward_components: dict[str, float] = {}
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(GdpPdfVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def criterion_id(criterion: RubricCriterion, index: int) -> str:
    return str(criterion.id) if criterion.id is not None else f"rubric-{index + 1}"


def without_verdict(response: NeMoGymResponse) -> str | None:
    if response.status == "incomplete":
        return "the judge's answer was cut off (status incomplete)"
    text = last_assistant_text(response)
    if read_verdict(text) is None:
        return f"the judge's answer has no PASS or FAIL: {text[:100]!r}"
    return None


class GdpPdfResourcesServer(JudgedResourcesServer):
    config: GdpPdfConfig
    _prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_prompt(FOLDER, self.config.judge_prompt_path)
        return app

    async def _judge_criterion(
        self, task_prompt: str, answer: str, criterion: RubricCriterion, index: int
    ) -> tuple[CriterionEvaluation, JudgeEvaluation]:
        """One criterion: asked again (up to `judge_max_parse_attempts` times) while the judge answers
        without a verdict; `JudgeFailed` when no verdict comes or a call fails."""
        name = criterion_id(criterion, index)
        prompt = self._prompt.format(
            task_prompt=task_prompt, candidate_answer=answer, criterion=criterion.criterion
        )
        calls = 0
        for attempt in range(1, self.config.judge_max_parse_attempts + 1):
            try:
                judgment = await self._judge.ask(prompt, read_verdict, unusable=without_verdict)
            except JudgeFailed as failed:
                calls += failed.failure.attempts
                if failed.failure.kind == "bad_response" and attempt < self.config.judge_max_parse_attempts:
                    continue
                failure = failed.failure.model_copy(
                    update={"message": f"criterion {name}: {failed.failure.message}", "attempts": calls}
                )
                raise JudgeFailed(failure) from None
            calls += 1
            text = judgment.text
            verdict = judgment.verdict
            evaluation = CriterionEvaluation(
                criterion_id=name,
                criterion=criterion.criterion,
                passed=verdict == "PASS",
                verdict=verdict,
                judge_output=text,
                judge_calls=calls,
            )
            return evaluation, judgment.evaluation
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def verify(self, body: GdpPdfVerifyRequest) -> GdpPdfVerifyResponse:
        """reward = share of rubric criteria judged PASS; an empty answer fails every criterion unjudged."""
        require_readable_images(body.responses_create_params)
        meta = body.verifier_metadata
        criteria = meta.rubric_criteria
        answer = last_assistant_text(body.response)
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "verifier_metadata": meta.model_dump(exclude_unset=True),
            "extracted_answer": answer or None,
            "criteria_total": len(criteria),
        }
        if not answer:
            evaluations = [
                CriterionEvaluation(criterion_id=criterion_id(c, i), criterion=c.criterion, passed=False)
                for i, c in enumerate(criteria)
            ]
            return self._scored(graded, evaluations, [])
        outcomes = await asyncio.gather(
            *(self._judge_criterion(meta.task_prompt, answer, c, i) for i, c in enumerate(criteria)),
            return_exceptions=True,
        )
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        done = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        if failures:
            unexpected = next((error for error in failures if not isinstance(error, JudgeFailed)), None)
            if unexpected is not None:
                raise unexpected
            first: JudgeFailed = failures[0]  # type: ignore[assignment]
            return GdpPdfVerifyResponse(
                **graded,
                **self._judge.failure_fields(first),
                criterion_evaluations=[evaluation for evaluation, _ in done],
                judge_evaluations=[judged for _, judged in done],
            )
        return self._scored(graded, [evaluation for evaluation, _ in done], [judged for _, judged in done])

    @staticmethod
    def _scored(
        graded: dict[str, Any], evaluations: list[CriterionEvaluation], judged: list[JudgeEvaluation]
    ) -> GdpPdfVerifyResponse:
        passed = sum(evaluation.passed for evaluation in evaluations)
        mean_pass = passed / len(evaluations)
        all_pass = float(passed == len(evaluations))
        return GdpPdfVerifyResponse(
            **graded,
            reward=mean_pass,
            criterion_evaluations=evaluations,
            criteria_passed=passed,
            mean_pass=mean_pass,
            all_pass=all_pass,
            reward_components={"mean_pass": mean_pass, "all_pass": all_pass},
            judge_evaluations=judged,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return gdp_pdf_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {
            name: agent_metrics[name]
            for name in (*TOKEN_MEANS, JUDGE_FAILURE_RATE_KEY)
            if name in agent_metrics
        }
        key.update(
            highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", score_names=["all_pass", "mean_pass"])
        )
        return key


if __name__ == "__main__":
    GdpPdfResourcesServer.run_webserver()
