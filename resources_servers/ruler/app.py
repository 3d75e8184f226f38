"""ruler: RULER long-context probes (needles in a haystack, variable tracking, word counts, QA).

Each row lists the reference strings the answer should contain (`outputs`). For the QA subsets any one
reference is enough (1.0 or 0.0); for the others the reward is the share of references the answer
contains. Matching is case-insensitive substring search on the stripped output text; it runs in the
CPU pool with a deadline because its cost is references × text length, both set by the caller.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.ruler.grading import string_match

# RULER's 13 tasks. The answer also carries the reward under the name of its task, so /aggregate_metrics
# reports a mean per task (`mean/niah_single_1`, ...); other subset names get no such field.
KNOWN_SUBSETS = frozenset(
    {
        *(f"niah_single_{n}" for n in (1, 2, 3)),
        *(f"niah_multikey_{n}" for n in (1, 2, 3)),
        "niah_multiquery",
        "niah_multivalue",
        "vt",
        "cwe",
        "fwe",
        "qa_1",
        "qa_2",
    }
)


class RulerConfig(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds one string-match grading (past it: 0.0)."""


class RulerVerifyRequest(BaseVerifyRequest):
    outputs: list[str] = Field(min_length=1)
    length: int
    subset: str


class RulerVerifyResponse(BaseVerifyResponse):
    """Also one field named after the subset when it is one of KNOWN_SUBSETS."""

    model_config = ConfigDict(extra="allow")

    subset: str


class RulerResourcesServer(SimpleResourcesServer):
    config: RulerConfig

    async def verify(self, body: RulerVerifyRequest) -> RulerVerifyResponse:
        reward = await self._score(body)
        per_subset = {body.subset: reward} if body.subset in KNOWN_SUBSETS else {}
        return RulerVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response", "subset"}),
            reward=reward,
            **per_subset,
        )

    async def _score(self, body: RulerVerifyRequest) -> float:
        return await run_cpu_bound(
            string_match,
            body.subset,
            body.response.output_text,
            body.outputs,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=0.0,
        )


if __name__ == "__main__":
    RulerResourcesServer.run_webserver()
