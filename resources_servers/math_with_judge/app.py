"""math_with_judge: reward a math answer by symbolic equivalence (math-verify), optionally rescued by an LLM judge.

The symbolic check runs in the CPU worker pool, never on the event loop, so a slow sympy simplification
cannot stall the server's other requests; past its deadline it scores 0.0. When the check fails and the
judge is enabled, the judge model compares the expected and generated answers twice, the second time
with the two answers swapped, and the reward is 1.0 only if both comparisons say "equal". Judge calls go
through `nemo_gym.judge`: a judgment that fails is reported in `judge_failure`, not scored as wrong.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import PrivateAttr

from nemo_gym.base_resources_server import SimpleResourcesServer
from nemo_gym.envkit.judged_env import PromptJudge, judged_key_metrics
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.judge import JudgeFailed, judge_failure_metrics
from resources_servers.math_with_judge.judging import judge_equal, rollout_scores
from resources_servers.math_with_judge.library import LibraryGrader
from resources_servers.math_with_judge.models import (
    MathVerifyRequest,
    MathVerifyResponse,
    MathWithJudgeConfig,
)


class MathWithJudgeResourcesServer(SimpleResourcesServer):
    config: MathWithJudgeConfig
    pass_at_k = PassAtK(answer_key="extracted_answer", score_fn=rollout_scores)
    _library: LibraryGrader = PrivateAttr()
    _judge: PromptJudge | None = PrivateAttr(default=None)

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        config = self.config
        self._library = LibraryGrader(config.grading_timeout_s, config.library_verifier_max_concurrency)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        if self.config.should_use_judge:
            self._judge = PromptJudge.of(self)
        return app

    async def verify(self, body: MathVerifyRequest) -> MathVerifyResponse:
        generated = body.response.output_text
        library = await self._library.grade(body.expected_answer, generated)
        scored: dict[str, Any] = {"reward": library.library_reward}
        evaluations = None
        if self._judge is not None and library.library_reward <= 0.5:
            evaluations = []
            try:
                scored["reward"] = await judge_equal(
                    self._judge, body.question, body.expected_answer, generated, evaluations
                )
            except JudgeFailed as failed:
                scored = self._judge.failure_fields(failed)
        return MathVerifyResponse(
            **body.model_dump(exclude={"question"}),
            extracted_answer=library.extracted_answer,
            library_reward=library.library_reward,
            judge_evaluations=evaluations,
            **scored,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {**super().compute_metrics(tasks), **judge_failure_metrics(tasks)}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return judged_key_metrics(agent_metrics, best_of=("pass@{k}", "majority@{k}"))


if __name__ == "__main__":
    MathWithJudgeResourcesServer.run_webserver()
