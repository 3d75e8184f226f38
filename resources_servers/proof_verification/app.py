"""proof_verification: the policy grades a given proof, and its grade is rewarded against the gold grade
and a meta-verifier judge's rating of its analysis.

The policy's answer (after its reasoning) ends with `\\boxed{s}`, s in {0, 0.5, 1}. r_score =
1 - |s - ground_truth_verify_score|; the meta-verifier judge compares the policy's analysis with the gold
judgement and rates it with a boxed 0 / 0.5 / 1, r_meta; the reward is r_score * r_meta. An answer without
such a score, or one over `max_verification_chars`, earns 0.0 with `format_error` and no judge call. A judge
answer without a 0 / 0.5 / 1 boxed score, or a judgment that fails, is reported in `judge_failure`, never
scored as a bad grade.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.prompt import PromptConfig, fill_prompt, load_judge_prompt_file
from resources_servers.proof_judge.scoring import (
    SCORES,
    NemoGymJudgeKeys,
    after_reasoning,
    agreement,
    read_score,
    without_score,
)

FOLDER = Path(__file__).resolve().parent
META_VERIFIER_FIELDS = ("problem", "proof", "ground_truth_judgement", "candidate_judgement")


class ProofVerificationConfig(NemoGymJudgeKeys, JudgedEnvConfig):
    meta_verifier_prompt_path: str = "prompts/meta_verifier.yaml"
    max_proof_chars: int = Field(default=40_000, ge=1)
    max_verification_chars: int = Field(default=20_000, ge=1)


class ProofVerificationVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")  # any other key of the row is echoed

    problem: str = ""
    proof: str = ""
    ground_truth_judgement: str
    ground_truth_verify_score: float

    @field_validator("ground_truth_verify_score")
    @classmethod
    def _a_score(cls, value: float) -> float:
        if value not in SCORES:
            raise ValueError("must be 0, 0.5 or 1")
        return value


class ProofVerificationVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    predicted_score: float | None = None
    format_error: str | None = None
    r_format: float = 1.0
    r_score: float | None = None
    r_meta: float | None = None
    meta_verifier_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(ProofVerificationVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """`accuracy` (the reward), `meta_score` (r_meta), `score_agreement` (r_score) and `exact_score`
    (the grade equals the gold one); a rollout whose judgment failed counts only in the last two."""
    predicted, gold = rollout.get("predicted_score"), rollout.get("ground_truth_verify_score")
    scores = {
        "score_agreement": float(rollout.get("r_score") or 0.0),
        "exact_score": float(predicted is not None and predicted == gold),
    }
    if rollout.get("judge_failure") is not None:
        return scores
    scores["accuracy"] = float(rollout.get("reward") or 0.0)
    if rollout.get("r_meta") is not None:
        scores["meta_score"] = float(rollout["r_meta"])
    return scores


PASS_AT_K = PassAtK(score_fn=rollout_scores, answer_key="predicted_score")


class ProofVerificationResourcesServer(JudgedResourcesServer):
    config: ProofVerificationConfig
    key_metric_best_of = ("pass@{k}", "majority@{k}")
    _meta_verifier_prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._meta_verifier_prompt = load_judge_prompt_file(
            FOLDER, self.config.meta_verifier_prompt_path, META_VERIFIER_FIELDS
        )
        return app

    def _read_answer(self, body: ProofVerificationVerifyRequest) -> tuple[str, float] | str:
        """(the policy's analysis, its score), or why the answer (or the row) cannot be graded."""
        text = last_assistant_text(body.response)
        if not text:
            return "empty_response"
        analysis = after_reasoning(text, self.config.assert_think_end)
        if analysis is None:
            return "missing_think_end"
        predicted_score = read_score(analysis)
        if predicted_score is None:
            return "invalid_boxed_score"
        if len(body.proof) > self.config.max_proof_chars:
            return "proof_too_long"
        if len(analysis) > self.config.max_verification_chars:
            return "verification_too_long"
        return analysis, predicted_score

    async def verify(self, body: ProofVerificationVerifyRequest) -> ProofVerificationVerifyResponse:
        graded = body.model_dump(exclude=GRADING_FIELDS | {"reward"})
        answer = self._read_answer(body)
        if isinstance(answer, str):
            return ProofVerificationVerifyResponse(**graded, reward=0.0, r_format=0.0, format_error=answer)
        analysis, predicted_score = answer
        r_score = agreement(predicted_score, body.ground_truth_verify_score)
        graded.update(predicted_score=predicted_score, r_score=r_score)
        fields = {
            "problem": body.problem,
            "proof": body.proof,
            "ground_truth_judgement": body.ground_truth_judgement,
            "candidate_judgement": analysis,
        }
        prompt = self._meta_verifier_prompt
        try:
            judgment = await self._judge.ask(fill_prompt(prompt, fields), read_score, unusable=without_score)
        except JudgeFailed as failed:
            return ProofVerificationVerifyResponse(**graded, **self._judge.failure_fields(failed))
        meta_output = judgment.text
        r_meta = judgment.verdict or 0.0  # never None: `without_score` checked it
        return ProofVerificationVerifyResponse(
            **graded,
            reward=r_score * r_meta,
            r_meta=r_meta,
            meta_verifier_output=meta_output,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return PASS_AT_K.compute(tasks)


if __name__ == "__main__":
    ProofVerificationResourcesServer.run_webserver()
