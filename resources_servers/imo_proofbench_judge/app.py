"""imo_proofbench_judge: olympiad proofs graded out of 7 by an LLM judge with a reference solution and rubric.

The model's answer is the content of its last `\\boxed{...}` (after its reasoning is removed). No boxed
answer: reward 0.0, the judge is not asked. When the row has an `expected_answer` and math-verify finds
the boxed answer equivalent to it (math_with_judge's check, in the CPU worker pool), reward 1.0 without a
judge. Otherwise one judge call grades the answer against the problem, reference solution and rubric, and
the proof is correct iff the judge's `<points>N out of 7</points>` has N >= 6 (a `Judgement: Yes/No` or
`\\boxed{Correct}` verdict takes precedence when present). A judge answer with no verdict, or a judgment
that fails, is reported in `judge_failure`, never scored as a wrong proof.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import (
    JudgedEnvConfig,
    JudgedResourcesServer,
    unusable_unless,
)
from nemo_gym.envkit.pass_at_k_metrics import (
    compute_pass_majority_metrics,
    compute_subset_metrics,
)
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.prompt import PromptConfig, fill_prompt
from resources_servers.imo_proofbench_judge.grading import (
    last_boxed,
    read_points,
    read_verdict,
    without_reasoning,
)
from resources_servers.imo_proofbench_judge.prompting import load_judge_prompt
from resources_servers.math_with_judge.library import LibraryGrader

FOLDER = Path(__file__).resolve().parent
SUBSET_KEYS = ("category", "level")
SCORED_POINTS = (7, 6, 1, 0)  # the scores the rubric names; each gets its own rate


class ImoProofBenchConfig(JudgedEnvConfig):
    judge_prompt_path: str = "prompts/judge.yaml"
    use_chat_completions_for_judge: bool = False
    # The base `grading_timeout_s` (10 s) bounds the symbolic check; NeMo Gym's key still sets it.
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"library_verifier_timeout_seconds": "grading_timeout_s"}
    library_verifier_max_concurrency: int = Field(default=32, ge=1)

    @field_validator("use_chat_completions_for_judge")
    @classmethod
    def _responses_only(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "not supported: every Gym model server serves /v1/responses, which the judge uses"
            )
        return value


class ImoProofBenchVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")  # any other key of the row is echoed

    problem_id: str | None = None
    problem: str | None = None
    reference_solution: str | None = None
    rubric: str | None = None
    category: str | None = None
    level: str | None = None
    expected_answer: str | None = None
    source: str | None = None


class ImoProofBenchVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    judge_output: str | None = None
    judge_points: int | None = None
    judge_correct: float = 0.0
    symbolic_correct: float = 0.0
    any_correct: float = 0.0
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(ImoProofBenchVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


without_verdict = unusable_unless(read_verdict, "has no verdict (<points>N out of 7</points>)", from_end=True)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """The headline `any_correct` (math-verify or judge), `symbolic_correct`, `judge_correct` and the rate of
    each rubric score; a rollout whose judgment failed counts only in `symbolic_correct`."""
    scores = {"symbolic_correct": float(rollout.get("symbolic_correct") or 0.0)}
    if rollout.get("judge_failure") is not None:
        return scores
    scores["any_correct"] = float(rollout.get("any_correct") or 0.0)
    scores["judge_correct"] = float(rollout.get("judge_correct") or 0.0)
    for points in SCORED_POINTS:
        scores[f"judge_score_{points}"] = float(rollout.get("judge_points") == points)
    return scores


class ImoProofBenchJudgeServer(JudgedResourcesServer):
    config: ImoProofBenchConfig
    key_metric_best_of = ("pass@{k}", "majority@{k}")
    _prompt: PromptConfig = PrivateAttr()
    _library: LibraryGrader = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_judge_prompt(FOLDER, self.config.judge_prompt_path)
        self._library = LibraryGrader(
            self.config.grading_timeout_s, self.config.library_verifier_max_concurrency
        )
        return app

    async def verify(self, body: ImoProofBenchVerifyRequest) -> ImoProofBenchVerifyResponse:
        answered = last_boxed(without_reasoning(last_assistant_text(body.response)))
        graded = {**body.model_dump(exclude=GRADING_FIELDS | {"reward"}), "extracted_answer": answered}
        if not answered:
            return ImoProofBenchVerifyResponse(**graded, reward=0.0)
        if body.expected_answer:
            library = await self._library.grade(body.expected_answer, "\\boxed{" + answered + "}")
            if library.library_reward > 0.5:
                return ImoProofBenchVerifyResponse(
                    **graded, reward=1.0, symbolic_correct=1.0, judge_correct=1.0, any_correct=1.0
                )
        fields = {
            "problem": body.problem or "",
            "reference_solution": body.reference_solution or "",
            "rubric": body.rubric or "",
            "predicted_answer": answered,
        }
        try:
            judgment = await self._judge.ask(
                fill_prompt(self._prompt, fields), read_verdict, unusable=without_verdict
            )
        except JudgeFailed as failed:
            return ImoProofBenchVerifyResponse(**graded, **self._judge.failure_fields(failed))
        judge_output = judgment.text
        correct = float(bool(judgment.verdict))
        return ImoProofBenchVerifyResponse(
            **graded,
            reward=correct,
            judge_output=judge_output,
            judge_points=read_points(judge_output),
            judge_correct=correct,
            any_correct=correct,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics = compute_pass_majority_metrics(tasks, rollout_scores, "extracted_answer")[0]
        for subset_key in SUBSET_KEYS:
            metrics.update(compute_subset_metrics(tasks, subset_key, rollout_scores, "extracted_answer"))
        return metrics


if __name__ == "__main__":
    ImoProofBenchJudgeServer.run_webserver()
