"""generative_reward_model: trains a generative reward model (GenRM) against human judgments.

The prompt shows a conversation, two candidate responses and one or more rubrics; the policy is the
judge and answers with one JSON verdict holding per-rubric and overall scores for both responses and a
ranking (verdict.py). The reward is minus the weighted L1 distance of those numbers from the row's
ground truth (reward.py), so 0.0 is perfect. A reply without exactly one complete verdict, or whose
rubric ids are not the ground truth's, earns the flat `parse_failure_penalty`: the policy's own format
failure, a measured reward, not a masked one.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from resources_servers.generative_reward_model.reward import Comparison, Weights, compare
from resources_servers.generative_reward_model.verdict import SCORE_KEYS, Unreadable, read_verdict


class GenerativeRewardModelConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    score_weight: float = Field(default=1.0, ge=0, description="weight of an individual score's L1 error")
    ranking_weight: float = Field(default=2.0, ge=0, description="weight of a ranking's L1 error")
    rubric_weight: float = Field(default=0.5, ge=0, description="weight of the mean per-rubric penalty")
    parse_failure_penalty: float = Field(
        default=-100.0, description="reward of a reply without a usable verdict"
    )


def _check_scores(block: dict[str, Any], where: str) -> None:
    for key in SCORE_KEYS:
        value = block.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
        ):
            raise ValueError(f"{where}.{key} must be a number, got {value!r}")


class GenerativeRewardModelVerifyRequest(BaseVerifyRequest):
    id: int | str
    ground_truth_overall: dict[str, Any] | None = None
    ground_truth_rubric_scores: list[dict[str, Any]] | None = Field(default=None, validate_default=True)

    @field_validator("ground_truth_overall")
    @classmethod
    def _overall_scores_are_numbers(cls, overall: dict[str, Any] | None) -> dict[str, Any] | None:
        if overall is not None:
            _check_scores(overall, "ground_truth_overall")
        return overall

    @field_validator("ground_truth_rubric_scores")
    @classmethod
    def _rubrics_are_identified_and_something_is_graded(
        cls, rubrics: list[dict[str, Any]] | None, info: ValidationInfo
    ) -> list[dict[str, Any]] | None:
        seen: set[int] = set()
        for position, rubric in enumerate(rubrics or ()):
            identifier = rubric.get("rubric_id")
            if isinstance(identifier, bool) or not isinstance(identifier, int):
                raise ValueError(f"ground_truth_rubric_scores[{position}].rubric_id must be an integer")
            if identifier in seen:
                raise ValueError(f"rubric_id {identifier} appears twice in ground_truth_rubric_scores")
            seen.add(identifier)
            _check_scores(rubric, f"ground_truth_rubric_scores[{position}]")
        overall = info.data.get("ground_truth_overall") or {}
        graded = [
            block
            for block in [overall, *(rubrics or ())]
            if any(block.get(key) is not None for key in SCORE_KEYS)
        ]
        if not graded and "ground_truth_overall" in info.data:
            raise ValueError(
                "the row has no ground truth: set ground_truth_overall or ground_truth_rubric_scores"
            )
        return rubrics


class GenerativeRewardModelVerifyResponse(GenerativeRewardModelVerifyRequest, BaseVerifyResponse):
    predicted_score_1: float | None
    predicted_score_2: float | None
    predicted_ranking: float | None
    format_correct: float
    parse_error: str | None = None
    overall_score_1_l1: float | None
    overall_score_2_l1: float | None
    overall_ranking_l1: float | None
    rubric_score_l1: float | None
    rubric_ranking_l1: float | None
    overall_ranking_binary_acc: float | None


class GenerativeRewardModelResourcesServer(SimpleResourcesServer):
    config: GenerativeRewardModelConfig
    key_metric_patterns = (
        "mean/reward",
        "mean/format_correct",
        "mean/overall_ranking_binary_acc",
        "mean/overall_ranking_l1",
        "mean/overall_score_1_l1",
        "mean/overall_score_2_l1",
        "mean/rubric_ranking_l1",
        "mean/rubric_score_l1",
    )

    async def verify(self, body: GenerativeRewardModelVerifyRequest) -> GenerativeRewardModelVerifyResponse:
        weights = Weights(self.config.score_weight, self.config.ranking_weight, self.config.rubric_weight)
        try:
            verdict = read_verdict(body.response.output_text)
        except Unreadable as unreadable:
            return self._unreadable(body, str(unreadable))
        comparison = compare(verdict, body.ground_truth_overall, body.ground_truth_rubric_scores, weights)
        if comparison is None:
            truth = sorted(int(rubric["rubric_id"]) for rubric in body.ground_truth_rubric_scores or ())
            return self._unreadable(
                body, f"rubric ids {sorted(verdict.rubrics)} are not the ground truth's {truth}"
            )
        return GenerativeRewardModelVerifyResponse(
            **body.model_dump(),
            **_fields_of(comparison),
            predicted_score_1=verdict.overall.score_1,
            predicted_score_2=verdict.overall.score_2,
            predicted_ranking=verdict.overall.ranking,
            format_correct=1.0,
        )

    def _unreadable(
        self, body: GenerativeRewardModelVerifyRequest, why: str
    ) -> GenerativeRewardModelVerifyResponse:
        return GenerativeRewardModelVerifyResponse(
            **body.model_dump(),
            **_fields_of(Comparison(reward=self.config.parse_failure_penalty)),
            predicted_score_1=None,
            predicted_score_2=None,
            predicted_ranking=None,
            format_correct=0.0,
            parse_error=why,
        )


def _fields_of(comparison: Comparison) -> dict[str, Any]:
    return {
        "reward": comparison.reward,
        "overall_score_1_l1": comparison.overall_score_1_l1,
        "overall_score_2_l1": comparison.overall_score_2_l1,
        "overall_ranking_l1": comparison.overall_ranking_l1,
        "overall_ranking_binary_acc": comparison.overall_ranking_binary_acc,
        "rubric_score_l1": comparison.rubric_score_l1,
        "rubric_ranking_l1": comparison.rubric_ranking_l1,
    }


if __name__ == "__main__":
    GenerativeRewardModelResourcesServer.run_webserver()
