"""fukuyamabench: step-by-step organic reaction mechanisms. From atom-mapped reactants and conditions the
model writes the sequence of elementary steps, each with its product SMILES; the gold mechanism's
checkpoints are matched in order by RDKit canonical product sets, no judge involved.

Reward 1.0 iff every checkpoint is matched; `checkpoint_accuracy` is partial credit, reported beside it.
Scoring runs in the CPU pool (scoring.score_answer) with a deadline; a reward that could not be computed
(gold that no prediction could match, a deadline passed, a worker lost) is masked, never a silent 0.
"""

from __future__ import annotations

import logging
import re
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.reward_profile import compute_subset_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound, shutdown_pool
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.fukuyamabench.scoring import Limits, score_answer

logger = logging.getLogger("fukuyamabench")
TIER_METRIC = re.compile(r"^[A-Z]/")
"""Per-tier metric keys (`B/pass@1/accuracy`): compute_subset_metrics prefixes the `case_set`."""
SCORE_FIELDS = (
    "checkpoints_correct",
    "checkpoints_total",
    "checkpoint_accuracy",
    "any_checkpoint_correct",
    "pred_length",
    "gt_steps",
)


class FukuyamabenchConfig(BaseResourcesServerConfig):
    grading_timeout_s: float = Field(default=20.0, gt=0, description="deadline of one scoring (CPU pool)")
    max_smiles_chars: int = Field(default=1000, ge=1, description="longest predicted SMILES component parsed")
    max_components: int = Field(default=32, ge=1, description="most species one predicted step may name")
    max_steps: int = Field(
        default=200, ge=1, description="predicted steps considered; later ones are ignored"
    )
    max_total_chars: int = Field(
        default=20000,
        ge=1,
        description="product characters read over all predicted steps; later steps are ignored",
    )


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    gt_pathway: list[dict[str, Any]] = Field(min_length=1, description="gold steps: {step_id, products}")
    checkpoints: list[list[int]] = Field(
        min_length=1, description="1-based gold step ids, one group per checkpoint"
    )
    lenient: bool | None = None
    case_id: str | None = None
    case_set: str | None = None
    n_gt_steps: int | None = None
    conditions: str | None = None
    starting_reactants: str | None = None


class FukuyamabenchVerifyRequest(BaseVerifyRequest):
    verifier_metadata: VerifierMetadata


class FukuyamabenchVerifyResponse(BaseVerifyResponse):
    verifier_metadata: VerifierMetadata
    status: str
    case_id: str | None
    case_set: str | None
    checkpoints_correct: float | None = None
    checkpoints_total: float | None = None
    checkpoint_accuracy: float | None = None
    any_checkpoint_correct: bool | None = None
    pred_length: float | None = None
    gt_steps: float | None = None


def answer_text(response: NeMoGymResponse) -> str:
    """Every assistant text of the response, one per line."""
    return "\n".join(text for item in response.output for text in assistant_texts(item)).strip()


class FukuyamabenchResourcesServer(SimpleResourcesServer):
    config: FukuyamabenchConfig

    async def verify(self, body: FukuyamabenchVerifyRequest) -> FukuyamabenchVerifyResponse:
        """reward 1.0 iff every checkpoint of the gold mechanism is matched, in order."""
        meta = body.verifier_metadata
        text = answer_text(body.response)
        if not text:
            return self._answer(body, {"status": "empty_output"})
        limits = Limits(
            self.config.max_smiles_chars,
            self.config.max_components,
            self.config.max_steps,
            self.config.max_total_chars,
        )
        lenient = True if meta.lenient is None else meta.lenient
        try:
            scores = await run_cpu_bound(
                score_answer,
                text,
                meta.gt_pathway,
                meta.checkpoints,
                lenient,
                limits,
                timeout_s=self.config.grading_timeout_s,
                on_timeout={"status": "timeout"},
            )
        except BrokenProcessPool:
            # A worker died under this answer (native code): start a fresh pool for the next ones.
            logger.warning("a scoring worker died on case %r; restarting the CPU pool", meta.case_id)
            shutdown_pool()
            scores = {"status": "worker_lost"}
        return self._answer(body, scores)

    @staticmethod
    def _answer(body: FukuyamabenchVerifyRequest, scores: dict[str, Any]) -> FukuyamabenchVerifyResponse:
        status = scores["status"]
        unmeasured = {
            "bad_gold": f"gold checkpoints {scores.get('bad_checkpoints')} match no parseable gold step",
            "worker_lost": "the scoring worker died",
        }.get(status)
        meta = body.verifier_metadata
        return FukuyamabenchVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response", "verifier_metadata"}),
            reward=1.0 if scores.get("exact_match") else 0.0,
            status=status,
            case_id=meta.case_id,
            case_set=meta.case_set,
            **{name: scores.get(name) for name in SCORE_FIELDS},
            mask_sample=unmeasured is not None,
            failure_kind=VERIFIER_ERROR if unmeasured else None,
            failure_reason=unmeasured,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k per difficulty tier (`case_set`): published tiers differ by about an order of magnitude,
        so a pooled figure describes no benchmark anyone reports."""
        return compute_subset_metrics(tasks, "case_set")

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The per-tier metrics and the means, without the pooled `mean/reward` once tiers are present."""
        tiers = {name: value for name, value in agent_metrics.items() if TIER_METRIC.match(name)}
        if not tiers:
            return super().get_key_metrics(agent_metrics)
        means = {
            name: value
            for name, value in agent_metrics.items()
            if name.startswith("mean/") and name != "mean/reward"
        }
        return {**means, **tiers}


if __name__ == "__main__":
    FukuyamabenchResourcesServer.run_webserver()
