"""polymath: multilingual math (PolyMath) graded as math_with_judge grades, with PolyMath's metrics on top.

Verification is math_with_judge's unchanged: math-verify's symbolic equivalence of the boxed answer
with `expected_answer`, optionally rescued by an LLM judge (off by default). What PolyMath adds is in
the metrics: every pass@k family again per `language` (`zh/pass@1/symbolic_accuracy`) and once more
weighted by the row's difficulty `weight` (`pass@1/symbolic_accuracy_weighted`, weighted.py), which is
the benchmark's headline number.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.math_with_judge.app import MathWithJudgeResourcesServer
from resources_servers.math_with_judge.judging import rollout_scores
from resources_servers.math_with_judge.models import (
    MathVerifyRequest,
    MathVerifyResponse,
    MathWithJudgeConfig,
)
from resources_servers.polymath.weighted import weighted_metrics

ANSWER_KEY = "extracted_answer"


class PolyMathConfig(MathWithJudgeConfig):
    pass


class PolyMathVerifyRequest(MathVerifyRequest):
    # Optional, so rows without them (math_with_judge's own) still verify: weight 1, no language subset.
    weight: float | None = Field(default=None, gt=0)
    language: str | None = None


class PolyMathVerifyResponse(MathVerifyResponse):
    weight: float | None = None
    language: str | None = None


class PolyMathResourcesServer(MathWithJudgeResourcesServer):
    config: PolyMathConfig
    pass_at_k = PassAtK(answer_key=ANSWER_KEY, score_fn=rollout_scores, subset_key="language")

    async def verify(self, body: PolyMathVerifyRequest) -> PolyMathVerifyResponse:
        graded = await super().verify(
            MathVerifyRequest.model_validate(body.model_dump(exclude={"weight", "language"}))
        )
        return PolyMathVerifyResponse(**graded.model_dump(), weight=body.weight, language=body.language)

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """math_with_judge's metrics (pass@k, majority@k, judge failures), per language, then weighted."""
        return {**super().compute_metrics(tasks), **weighted_metrics(tasks, rollout_scores, ANSWER_KEY)}


if __name__ == "__main__":
    PolyMathResourcesServer.run_webserver()
