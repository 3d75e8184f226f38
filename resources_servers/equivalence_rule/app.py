"""equivalence_rule: grade a free-text answer against `expected_answer` with a fixed string rule.

No judge model: the answer is compared after normalization (case, surrounding and repeated whitespace),
either exactly or by difflib similarity, so the reward is cheap, deterministic and reproducible. The
similarity rules are quadratic in the worst case on long answers, so they run in the CPU pool with a
deadline; a grading that runs out of time earns 0.0.
"""

from typing import Literal

from pydantic import ConfigDict

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.equivalence_rule.grading import exact_score, grade

GradingRule = Literal["exact", "seq_match", "weighted_seq_match"]


class EquivalenceRuleConfig(BaseResourcesServerConfig):
    grading_rule: GradingRule = "exact"


class EquivalenceVerifyRequest(BaseVerifyRequest):
    """Other row fields (question, source, ids, ...) are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    expected_answer: str


class EquivalenceVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    expected_answer: str
    equivalence_score: float


class EquivalenceRuleResourcesServer(SimpleResourcesServer):
    config: EquivalenceRuleConfig

    async def score(self, response_text: str, expected: str) -> float:
        rule = self.config.grading_rule
        if rule == "exact":  # linear: cheaper inline than a trip to the pool
            return exact_score(response_text, expected)
        return await run_cpu_bound(
            grade, rule, response_text, expected, timeout_s=self.config.grading_timeout_s, on_timeout=0.0
        )

    async def verify(self, body: EquivalenceVerifyRequest) -> EquivalenceVerifyResponse:
        """reward = equivalence_score, from the configured `grading_rule`."""
        score = await self.score(body.response.output_text, body.expected_answer)
        row = body.model_dump(exclude={"reward", "equivalence_score"})
        return EquivalenceVerifyResponse(**row, reward=score, equivalence_score=score)


if __name__ == "__main__":
    EquivalenceRuleResourcesServer.run_webserver()
