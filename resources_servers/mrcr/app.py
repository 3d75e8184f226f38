"""mrcr: OpenAI's multi-round coreference resolution, rewarded by how closely the model reproduces a needle.

The conversation holds several look-alike pieces (`n_needles` of them are about the asked subject); the
last turn asks the model to reproduce one of them, starting with `random_string_to_prepend`. An answer
that does not start with that string scores 0; otherwise the reward is the difflib similarity of answer
and expected answer, both without the string. difflib is quadratic in the worst case, so it runs in
the CPU pool with a deadline, past which the answer scores 0.0.
"""

from __future__ import annotations

from typing import Any

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK, pass_at_k_key_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.mrcr.grading import similarity

SUBSET_KEY = "n_needles"


class MrcrConfig(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds one similarity computation (past it: 0.0)."""


class MrcrVerifyRequest(BaseVerifyRequest):
    expected_answer: str
    random_string_to_prepend: str
    n_needles: int
    n_tokens: int | None = None  # the conversation's size, for subsets; nothing reads it here


class MrcrVerifyResponse(MrcrVerifyRequest, BaseVerifyResponse):
    prefix_matched: bool
    seq_match_ratio: float


class MrcrResourcesServer(SimpleResourcesServer):
    config: MrcrConfig
    # pass@k over all tasks and per needle count (`n_needles=4/pass@1/accuracy`, ...). The ratio is
    # continuous, so pass@k is the best of the first k unless every score is 0 or 1.
    pass_at_k = PassAtK(subset_key=SUBSET_KEY, key_in_prefix=True)

    async def verify(self, body: MrcrVerifyRequest) -> MrcrVerifyResponse:
        """reward = seq_match_ratio: 0 without the prefix, else the similarity of the prefix-less texts."""
        answer = body.response.output_text.strip()
        prefix_matched = answer.startswith(body.random_string_to_prepend)
        ratio = await self._similarity(answer, body) if prefix_matched else 0.0
        return MrcrVerifyResponse(
            **body.model_dump(), reward=ratio, prefix_matched=prefix_matched, seq_match_ratio=ratio
        )

    async def _similarity(self, answer: str, body: MrcrVerifyRequest) -> float:
        return await run_cpu_bound(
            similarity,
            answer,
            body.expected_answer,
            body.random_string_to_prepend,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=0.0,
        )

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(agent_metrics)


if __name__ == "__main__":
    MrcrResourcesServer.run_webserver()
