"""hotpotqa_qa: multi-hop questions over supporting paragraphs, graded SQuAD-style against the gold answer.

The short answer is cut out of the model's text and compared after normalization (case, punctuation,
articles, spacing): exact match and token F1, best over the gold answer and its aliases. The reward is
the F1 (or the exact match, per `reward_metric`). Grading runs in the CPU pool: finding the last JSON
object in an adversarial text can take quadratic time, and past the deadline the rollout scores 0.0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import TOKEN_MEANS, pass_at_k_key_metrics
from nemo_gym.reward_profile import compute_pass_majority_metrics, is_metric
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.hotpotqa_qa.grading import Grade, grade

SCORES = ("exact_match", "f1")


class HotpotQAConfig(BaseResourcesServerConfig):
    reward_metric: Literal["f1", "exact_match"] = Field(
        default="f1", description="which score becomes the reward"
    )
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one grading; a slower one scores 0.0"
    )


class HotpotQAVerifyRequest(BaseVerifyRequest):
    """Other row fields (question, id, type, level, ...) are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    expected_answer: str
    answer_aliases: list[str] = Field(default_factory=list)


class HotpotQAVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    expected_answer: str
    extracted_answer: str | None
    exact_match: float
    f1: float


def scores_of(rollout: dict[str, Any]) -> dict[str, float]:
    """The rollout's scores; a score missing or not a number (a hand-written rollout) is left out."""
    return {name: rollout[name] for name in SCORES if is_metric(rollout.get(name))}


class HotpotQAResourcesServer(SimpleResourcesServer):
    config: HotpotQAConfig

    async def verify(self, body: HotpotQAVerifyRequest) -> HotpotQAVerifyResponse:
        golds = (body.expected_answer, *body.answer_aliases)
        result = await run_cpu_bound(
            grade,
            body.response.output_text,
            golds,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=Grade(None, 0.0, 0.0),
        )
        row = body.model_dump(exclude={"reward", "extracted_answer", *SCORES})
        return HotpotQAVerifyResponse(
            **row,
            reward=getattr(result, self.config.reward_metric),
            extracted_answer=result.extracted_answer,
            exact_match=result.exact_match,
            f1=result.f1,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k, pass@1[avg-of-k] and majority@k (voting on extracted_answer) of exact_match and f1."""
        return compute_pass_majority_metrics(tasks, score_fn=scores_of, answer_key="extracted_answer")[0]

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """Mean reward and tokens, the largest-k averages (no-answer rate too), pass@k and majority vote."""
        return pass_at_k_key_metrics(agent_metrics, leading=("mean/reward", *TOKEN_MEANS))


if __name__ == "__main__":
    HotpotQAResourcesServer.run_webserver()
