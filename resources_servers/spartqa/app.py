"""spartqa: SpartQA choose-object (CO) spatial reasoning, rewarded 1.0 when the answer resolves to the gold label.

A row describes a scene and asks which of two objects satisfies a spatial relation; the four candidate
labels are the two objects (`options`), `both of them` and `none of them`, and `target` is the single
gold label. The model ends with `Final answer: <label>`; grading.py reads and resolves it. Since the
reward is 0/1 per rollout, its mean is CO accuracy.
"""

from __future__ import annotations

import statistics
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.spartqa.grading import (
    BOTH_LABEL,
    NONE_LABEL,
    candidate_labels,
    extract_answer,
    label_key,
    normalize,
    resolve_label,
)


class SpartqaConfig(BaseResourcesServerConfig):
    pass


class SpartqaVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    # Some drivers forward only a row's scalar fields; `verifier_metadata` carries target and options
    # for them, and is read when the top-level fields are absent.
    target: str = ""
    options: list[str] = Field(default_factory=list)
    verifier_metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _has_a_gold_label(self) -> SpartqaVerifyRequest:
        if not label_key(self.gold()):
            # Located at `target` (a 422 naming it), though the check also read verifier_metadata.
            reason = "target is empty (and verifier_metadata has none): the reward has no gold label"
            error = PydanticCustomError("missing_gold_label", "{reason}", {"reason": reason})
            raise ValidationError.from_exception_data(
                type(self).__name__, [InitErrorDetails(type=error, loc=("target",), input=self.target)]
            )
        return self

    def gold(self) -> str:
        return self.target or str((self.verifier_metadata or {}).get("target") or "")

    def candidate_options(self) -> list[str]:
        options = self.options or (self.verifier_metadata or {}).get("options") or []
        return [str(option) for option in options] if isinstance(options, list) else []


class SpartqaVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    exact: bool = Field(description="the gold label was copied as asked, not found inside a longer answer")
    parsed: bool = Field(description="a non-empty answer phrase was read")
    extracted: str = Field(description="the answer phrase read (at most 200 characters)")
    predicted_label: str = Field(description="the label it resolved to; empty when none or several")


class SpartqaResourcesServer(SimpleResourcesServer):
    config: SpartqaConfig
    key_metric_patterns = ("mean_reward", "exact_match_rate")

    async def verify(self, body: SpartqaVerifyRequest) -> SpartqaVerifyResponse:
        prediction = extract_answer(body.response.output_text)
        gold = body.gold()
        options = body.candidate_options()
        predicted = resolve_label(prediction, candidate_labels(options or [gold]))
        correct = predicted is not None and label_key(predicted) == label_key(gold)
        return SpartqaVerifyResponse(
            **body.model_dump(),
            reward=1.0 if correct else 0.0,
            exact=correct and label_key(prediction) == label_key(gold),
            parsed=bool(normalize(prediction)),
            extracted=prediction,
            predicted_label=predicted or "",
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Mean reward (= CO accuracy), how often the label was copied exactly, read at all and resolved,
        and the accuracy on `both of them` and `none of them` questions (a model that never says "both"
        shows up there even when the headline looks fine)."""
        rollouts = [rollout for task in tasks for rollout in task]
        if not rollouts:
            return {}

        def rate(field: str, among: list[dict[str, Any]] = rollouts) -> float:
            return statistics.fmean(float(bool(rollout.get(field))) for rollout in among)

        metrics: dict[str, Any] = {
            "mean_reward": statistics.fmean(float(rollout["reward"]) for rollout in rollouts),
            "count": len(rollouts),
            "exact_match_rate": rate("exact"),
            "parse_rate": rate("parsed"),
            "label_resolve_rate": rate("predicted_label"),
        }
        for label in (BOTH_LABEL, NONE_LABEL):
            on_label = [rollout for rollout in rollouts if label_key(_gold_of(rollout)) == label_key(label)]
            if on_label:
                metrics["accuracy_" + label.replace(" ", "_")] = statistics.fmean(
                    float(rollout["reward"] == 1.0) for rollout in on_label
                )
        return metrics


def _gold_of(rollout: dict[str, Any]) -> str:
    metadata = rollout.get("verifier_metadata")
    fallback = metadata.get("target") if isinstance(metadata, dict) else None
    return str(rollout.get("target") or fallback or "")


if __name__ == "__main__":
    SpartqaResourcesServer.run_webserver()
