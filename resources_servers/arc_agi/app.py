"""arc_agi: ARC-AGI grid puzzles, rewarded 1.0 when the model's answer grid equals the expected one.

The row carries the demonstration pairs (`train`) and the `test_input` the prompt was built from, and
the `expected_output` grid. The answer is the first `\\boxed{[[...]]}` grid of the assistant's text (else
the first bare `[[...]]`) that reads as a non-empty integer matrix. Extraction is linear in the text but
runs in the CPU pool with a deadline anyway: a model can write megabytes, and a grading past its
deadline scores 0.0 rather than stall the server.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.arc_agi.grading import Grid, extract_grid


class ArcAgiConfig(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds one answer extraction (past it: 0.0)."""


class ArcAgiVerifyRequest(BaseVerifyRequest):
    expected_output: Grid
    # Prompt-side fields: the grader reads only expected_output.
    train: list[dict[str, Any]] = Field(default_factory=list)
    test_input: Grid = Field(default_factory=list)
    task_id: str | None = None


class ArcAgiVerifyResponse(BaseVerifyResponse):
    expected_output: Grid
    predicted_output: Grid | None
    extraction_successful: bool
    task_id: str | None


def answer_text(response: NeMoGymResponse) -> str:
    """Every assistant text of the response, one per line (a grid may straddle two parts)."""
    return "\n".join(text for item in response.output for text in assistant_texts(item))


class ArcAgiResourcesServer(SimpleResourcesServer):
    config: ArcAgiConfig

    async def verify(self, body: ArcAgiVerifyRequest) -> ArcAgiVerifyResponse:
        """reward 1.0 iff an answer grid was found and equals `expected_output`."""
        predicted = await self._extract(answer_text(body.response))
        return ArcAgiVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response", "expected_output", "task_id"}),
            predicted_output=predicted,
            extraction_successful=predicted is not None,
            reward=1.0 if predicted is not None and predicted == body.expected_output else 0.0,
        )

    async def _extract(self, text: str) -> Grid | None:
        return await run_cpu_bound(
            extract_grid, text, timeout_s=self.config.grading_timeout_s, on_timeout=None
        )


if __name__ == "__main__":
    ArcAgiResourcesServer.run_webserver()
