"""imo_gradingbench: the policy grades a proof; rewarded 1.0 when its grade is the expert's.

The prompt holds a problem and a candidate proof; the reply must end with one of `incorrect`,
`partial`, `almost`, `correct`. No judge model is involved: the grade is the reply's last word
(grading.py) and is compared with the row's `expected_answer`. Besides the exact match, each answer
says whether the grade landed on the right side of the pass line (`binary_match`) and how many points
it is off (`score_diff`), which feed the benchmark's binarized accuracy and mean absolute error.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.wire.responses import assistant_texts
from resources_servers.imo_gradingbench.grading import (
    extract_grade,
    normalize_grade,
    points_gap,
    same_half,
)
from resources_servers.imo_gradingbench.metrics import mae_metrics


class ImoGradingBenchConfig(BaseResourcesServerConfig):
    # Grading reads only the stored reply, so a stored rollout can be verified again.
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS


class ImoGradingBenchVerifyRequest(BaseVerifyRequest):
    expected_answer: str
    grading_id: str | None = None
    problem_id: str | None = None

    @field_validator("expected_answer")
    @classmethod
    def _one_of_the_four_grades(cls, value: str) -> str:
        return normalize_grade(value)


class ImoGradingBenchVerifyResponse(ImoGradingBenchVerifyRequest, BaseVerifyResponse):
    extracted_grade: str | None
    binary_match: bool
    score_diff: float | None


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """The two accuracies pass@k and majority@k are computed for."""
    return {
        "exact_accuracy": float(rollout["reward"]),
        "binarized_accuracy": float(bool(rollout.get("binary_match"))),
    }


class ImoGradingBenchResourcesServer(SimpleResourcesServer):
    config: ImoGradingBenchConfig
    pass_at_k = PassAtK(answer_key="extracted_grade", score_fn=rollout_scores)
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/exact_accuracy",
        "pass@1[avg-of-{k}]/binarized_accuracy",
        "pass@1[avg-of-{k}]/mae",
        "pass@1[avg-of-{k}]/no_answer",
        "pass@{k}/exact_accuracy",
        "pass@{k}/binarized_accuracy",
        "pass@{k}/mae",
        "majority@{k}/exact_accuracy",
        "majority@{k}/binarized_accuracy",
        "mae",
        "mae_count",
    )

    async def verify(self, body: ImoGradingBenchVerifyRequest) -> ImoGradingBenchVerifyResponse:
        # Assistant messages only (reasoning items are not the verdict), one per line as NeMo Gym joins them.
        text = "\n".join(text for item in body.response.output for text in assistant_texts(item))
        grade = extract_grade(text)
        return ImoGradingBenchVerifyResponse(
            **body.model_dump(),
            reward=1.0 if grade == body.expected_answer else 0.0,
            extracted_grade=grade,
            binary_match=same_half(grade, body.expected_answer),
            score_diff=points_gap(grade, body.expected_answer),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k / pass@1[avg-of-k] / majority@k of both accuracies (and `no_answer`), then the MAE family."""
        return {**super().compute_metrics(tasks), **mae_metrics(tasks)}


if __name__ == "__main__":
    ImoGradingBenchResourcesServer.run_webserver()
