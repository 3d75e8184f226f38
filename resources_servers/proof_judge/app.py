"""proof_judge: the policy writes a proof and grades it itself; a verifier judge grades the proof and a
meta-verifier judge grades the self-evaluation (DeepSeekMath-V2 style reward for theorem proving).

The policy answers `## Solution` (the proof) then `## Self Evaluation` ending in `\\boxed{s}`, s in
{0, 0.5, 1}. The verifier's boxed score of the proof is r_y. With `beta` > 0 the meta-verifier's boxed score
of the self-evaluation is r_meta, r_z = (1 - |s - r_y|) * r_meta, and the reward is alpha * r_y + beta * r_z;
with `beta` = 0 the reward is alpha * r_y and the meta-verifier is not asked. A malformed answer earns 0.0
with `format_error` naming what is missing and no judge call. A judge answer without a 0 / 0.5 / 1 boxed
score, or a judgment that fails, is reported in `judge_failure`, never scored as a bad proof.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr

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
    NemoGymJudgeKeys,
    agreement,
    read_score,
    read_self_evaluated_proof,
    without_score,
)

FOLDER = Path(__file__).resolve().parent
VERIFIER_FIELDS = ("problem", "proof")
META_VERIFIER_FIELDS = ("problem", "proof", "proof_analysis")


class ProofJudgeConfig(NemoGymJudgeKeys, JudgedEnvConfig):
    alpha: float = Field(default=1.0, allow_inf_nan=False)
    beta: float = Field(default=0.0, allow_inf_nan=False)
    verifier_prompt_path: str = "prompts/verifier.yaml"
    meta_verifier_prompt_path: str = "prompts/meta_verifier.yaml"


class ProofJudgeVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")  # any other key of the row is echoed

    problem: str = ""


class ProofJudgeVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    proof: str | None = None
    self_score: float | None = None
    format_error: str | None = None
    r_format: float = 1.0
    r_y: float | None = None
    r_meta: float | None = None
    r_z: float | None = None
    verifier_output: str | None = None
    meta_verifier_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(ProofJudgeVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """`accuracy` (the reward), `verifier_score` (r_y), `self_eval_reward` (r_z, when the meta-verifier
    ran) and `well_formed`; a rollout whose judgment failed counts only in `well_formed`."""
    scores = {"well_formed": float(rollout.get("format_error") is None)}
    if rollout.get("judge_failure") is not None:
        return scores
    scores["accuracy"] = float(rollout.get("reward") or 0.0)
    scores["verifier_score"] = float(rollout.get("r_y") or 0.0)
    if rollout.get("r_z") is not None:
        scores["self_eval_reward"] = float(rollout["r_z"])
    return scores


PASS_AT_K = PassAtK(score_fn=rollout_scores)


class ProofJudgeResourcesServer(JudgedResourcesServer):
    config: ProofJudgeConfig
    _verifier_prompt: PromptConfig = PrivateAttr()
    _meta_verifier_prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._verifier_prompt = load_judge_prompt_file(
            FOLDER, self.config.verifier_prompt_path, VERIFIER_FIELDS
        )
        self._meta_verifier_prompt = load_judge_prompt_file(
            FOLDER, self.config.meta_verifier_prompt_path, META_VERIFIER_FIELDS
        )
        return app

    async def _score(
        self, prompt: PromptConfig, fields: dict[str, str], evaluations: list[JudgeEvaluation]
    ) -> tuple[float, str]:
        """One judge call: its boxed score and its text; the call is appended to `evaluations`."""
        judgment = await self._judge.ask(fill_prompt(prompt, fields), read_score, unusable=without_score)
        evaluations.append(judgment.evaluation)
        assert judgment.verdict is not None  # `without_score` refused any other answer
        return judgment.verdict, judgment.text

    async def verify(self, body: ProofJudgeVerifyRequest) -> ProofJudgeVerifyResponse:
        graded = body.model_dump(exclude=GRADING_FIELDS | {"reward"})
        answer = read_self_evaluated_proof(last_assistant_text(body.response), self.config.assert_think_end)
        if isinstance(answer, str):
            return ProofJudgeVerifyResponse(**graded, reward=0.0, r_format=0.0, format_error=answer)
        graded.update(proof=answer.proof, self_score=answer.self_score)
        evaluations: list[JudgeEvaluation] = []
        found: dict[str, Any] = {}
        try:
            r_y, found["verifier_output"] = await self._score(
                self._verifier_prompt, {"problem": body.problem, "proof": answer.proof}, evaluations
            )
            found["r_y"] = r_y
            if self.config.beta == 0:
                reward = self.config.alpha * r_y
            else:
                fields = {
                    "problem": body.problem,
                    "proof": answer.proof,
                    "proof_analysis": answer.self_evaluation,
                }
                r_meta, found["meta_verifier_output"] = await self._score(
                    self._meta_verifier_prompt, fields, evaluations
                )
                r_z = agreement(answer.self_score, r_y) * r_meta
                found.update(r_meta=r_meta, r_z=r_z)
                reward = self.config.alpha * r_y + self.config.beta * r_z
        except JudgeFailed as failed:
            return ProofJudgeVerifyResponse(
                **graded,
                **found,
                **self._judge.failure_fields(failed),
                judge_evaluations=evaluations,
            )
        return ProofJudgeVerifyResponse(**graded, **found, reward=reward, judge_evaluations=evaluations)

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return PASS_AT_K.compute(tasks)


if __name__ == "__main__":
    ProofJudgeResourcesServer.run_webserver()
