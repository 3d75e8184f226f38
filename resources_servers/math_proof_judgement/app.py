"""math_proof_judgement: the policy judges a math proof, rewarded 1.0 when its `Judgement: Yes/No` matches the gold one.

A row gives a problem and a candidate proof in the prompt, and the gold verdict in `expected_judgement`
(`Judgement: Yes` for a correct proof). No judge model is called: grading.py reads the verdict from the
response. Aggregate metrics treat the task as binary classification (Yes = positive): pass@k / majority@k
of accuracy and of the four confusion counts, and precision / recall / F1 averaged over the k samples.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK, highest_k_metrics
from nemo_gym.wire.responses import NeMoGymResponse, assistant_texts
from resources_servers.math_proof_judgement.grading import (
    classification_metrics,
    confusion,
    parse_judgement,
    strip_thinking,
    verdict_label,
)


class MathProofJudgementConfig(BaseResourcesServerConfig):
    skills_parity_mode: bool = Field(
        default=False,
        description="read the verdict from the raw response, reasoning included, exactly as NeMo Skills "
        "does; by default <think> blocks are removed first",
    )


class MathProofJudgementVerifyRequest(BaseVerifyRequest):
    # Row fields beyond these (a source, a grader's notes, ...) pass through and are echoed.
    model_config = ConfigDict(extra="allow")

    expected_judgement: str
    problem_id: str | None = None
    problem: str | None = None
    proof: str | None = None

    @field_validator("expected_judgement")
    @classmethod
    def _a_verdict(cls, expected_judgement: str) -> str:
        if parse_judgement(expected_judgement) is None:
            raise ValueError("expected_judgement must read 'Judgement: Yes' or 'Judgement: No'")
        return expected_judgement


class MathProofJudgementVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    expected_judgement: str
    extracted_judgement: str | None = Field(description="'Yes', 'No', or None when no verdict was read")
    tp: float
    fp: float
    fn: float
    tn: float


def response_text(response: NeMoGymResponse, strip: bool) -> str:
    """The assistant's messages, one per line; without reasoning blocks when `strip`."""
    joined = "\n".join(text for item in response.output for text in assistant_texts(item))
    return strip_thinking(joined) if strip else joined.strip()


def judgement_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """Per-rollout scores for pass@k / majority@k: accuracy and the four one-hot confusion counts."""
    return {
        "accuracy": float(rollout.get("reward", 0.0)),
        "true_positive": float(rollout.get("tp", 0.0)),
        "false_positive": float(rollout.get("fp", 0.0)),
        "false_negative": float(rollout.get("fn", 0.0)),
        "true_negative": float(rollout.get("tn", 0.0)),
    }


class MathProofJudgementResourcesServer(SimpleResourcesServer):
    config: MathProofJudgementConfig
    pass_at_k = PassAtK(answer_key="extracted_judgement", score_fn=judgement_scores)

    async def verify(self, body: MathProofJudgementVerifyRequest) -> MathProofJudgementVerifyResponse:
        predicted = parse_judgement(response_text(body.response, strip=not self.config.skills_parity_mode))
        gold = parse_judgement(body.expected_judgement)
        tp, fp, fn, tn = confusion(predicted, gold)
        return MathProofJudgementVerifyResponse(
            **body.model_dump(),
            reward=1.0 if predicted is not None and predicted == gold else 0.0,
            extracted_judgement=verdict_label(predicted),
            tp=tp,
            fp=fp,
            fn=fn,
            tn=tn,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {**super().compute_metrics(tasks), **classification_metrics(tasks)}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """Mean reward and the highest-k accuracy, F1 (and for pass@1[avg-of-k] precision, recall and
        no_answer) of each family."""
        key = {name: agent_metrics[name] for name in ("mean/reward",) if name in agent_metrics}
        for family, names in (
            ("pass@1[avg-of-{k}]", ["accuracy", "f1", "precision", "recall", "no_answer"]),
            ("pass@{k}", ["accuracy", "f1", "no_answer"]),
            ("majority@{k}", ["accuracy", "f1"]),
        ):
            key.update(highest_k_metrics(agent_metrics, family, score_names=names))
        return key


if __name__ == "__main__":
    MathProofJudgementResourcesServer.run_webserver()
