"""moldetox: toxicity-aware molecule editing (MolDeTox, Task 3). The model is shown a molecule flagged
toxic for an endpoint and must edit it into the expert's non-toxic counterpart, answering
`{"answer": "<SMILES>"}`. Reward 1.0 iff the answer is the gold molecule (RDKit canonical structures).

Only the `smiles` scoring mode is served: NeMo Gym's `safe` and fragment modes need `safe-mol`, which does
not install cleanly here (it would downgrade a shared dependency); their rows are masked as unsupported.
Scoring runs in the CPU pool with a deadline; a reward that cannot be computed is masked, never a 0.
"""

from __future__ import annotations

import logging
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.serving.cpu_pool import run_cpu_bound, shutdown_pool
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.moldetox.chem import extract_answer, score_answer

logger = logging.getLogger("moldetox")
ScoringMode = Literal["smiles", "safe", "fragments_task1", "fragments_task2"]
SUPPORTED_MODES = ("smiles",)
SCORE_FIELDS = (
    "levenshtein",
    "validity",
    "tanimoto_rdk",
    "tanimoto_maccs",
    "tanimoto_morgan",
    "is_input_copy",
)
KEY_METRICS = ("mean/reward", "mean/input_tokens", "mean/output_tokens", "mean/total_tokens")
UNMEASURED = {
    "unsupported_mode": "scoring_mode {mode!r} needs safe-mol, which this server does not install",
    "bad_gold": "the gold answer is not a molecule RDKit reads",
    "timeout": "scoring passed its deadline",
    "worker_lost": "the scoring worker died",
}


class MoldetoxConfig(BaseResourcesServerConfig):
    max_answer_chars: int = Field(
        default=2000,
        ge=1,
        description="longest answer handed to RDKit; a longer one scores 0 (answer_too_long)",
    )


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    answer: str = Field(min_length=1, description="the gold molecule (SMILES in smiles mode)")
    scoring_mode: ScoringMode = "smiles"
    toxic_smiles: str | None = None
    endpoint: str | None = None
    dataset_name: str | None = None
    config: str | None = None
    task: str | None = None
    variant: str | None = None
    id: str | int | None = None


class MoldetoxVerifyRequest(BaseVerifyRequest):
    verifier_metadata: VerifierMetadata


class MoldetoxVerifyResponse(BaseVerifyResponse):
    verifier_metadata: VerifierMetadata
    status: str
    extracted_answer: str | None = None
    endpoint: str | None = None
    dataset_name: str | None = None
    levenshtein: float | None = None
    validity: float | None = None
    tanimoto_rdk: float | None = None
    tanimoto_maccs: float | None = None
    tanimoto_morgan: float | None = None
    is_input_copy: bool | None = None


def answer_text(response: NeMoGymResponse) -> str:
    """Every assistant text of the response, one per line."""
    return "\n".join(text for item in response.output for text in assistant_texts(item)).strip()


class MoldetoxResourcesServer(SimpleResourcesServer):
    config: MoldetoxConfig

    async def verify(self, body: MoldetoxVerifyRequest) -> MoldetoxVerifyResponse:
        """reward 1.0 iff the answer is the gold molecule."""
        meta = body.verifier_metadata
        if meta.scoring_mode not in SUPPORTED_MODES:
            return self._answer(body, {"status": "unsupported_mode"})
        text = answer_text(body.response)
        if not text:
            return self._answer(body, {"status": "empty_output"})
        answer = extract_answer(text)
        if answer is None:
            return self._answer(body, {"status": "no_answer"})
        if len(answer) > self.config.max_answer_chars:
            return self._answer(body, {"status": "answer_too_long"}, answer[: self.config.max_answer_chars])
        try:
            scores = await run_cpu_bound(
                score_answer,
                answer,
                meta.answer,
                meta.toxic_smiles,
                timeout_s=self.config.grading_timeout_s,
                on_timeout={"status": "timeout"},
            )
        except BrokenProcessPool:
            # A worker died under this answer (native code): start a fresh pool for the next ones.
            logger.warning("a scoring worker died on %r; restarting the CPU pool", answer[:80])
            shutdown_pool()
            scores = {"status": "worker_lost"}
        return self._answer(body, scores, answer)

    @staticmethod
    def _answer(
        body: MoldetoxVerifyRequest, scores: dict[str, Any], answer: str | None = None
    ) -> MoldetoxVerifyResponse:
        meta = body.verifier_metadata
        reason = UNMEASURED.get(scores["status"])
        return MoldetoxVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response", "verifier_metadata"}),
            reward=scores.get("exact_match", 0.0),
            status=scores["status"],
            extracted_answer=answer,
            endpoint=meta.endpoint,
            dataset_name=meta.dataset_name,
            **{name: scores.get(name) for name in SCORE_FIELDS},
            mask_sample=reason is not None,
            failure_kind=VERIFIER_ERROR if reason else None,
            failure_reason=reason.format(mode=meta.scoring_mode) if reason else None,
        )

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """Accuracy and tokens only: similarity and validity must not headline, since echoing the toxic
        input unchanged scores high on both while never being right."""
        return {name: agent_metrics[name] for name in KEY_METRICS if name in agent_metrics}


if __name__ == "__main__":
    MoldetoxResourcesServer.run_webserver()
