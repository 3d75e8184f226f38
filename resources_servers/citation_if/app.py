"""citation_if: rewards following a citation instruction on a frozen retrieval trajectory.

The prompt is a search conversation that has already happened (tool calls and their results, each
document with a citation ID), closed by a user turn asking for the final answer. The reply earns 1.0
when it cites in the row's grammar, only IDs the documents carried, at least the required ones, and
says something besides its citations (scoring.py has the gates). Any tool call scores 0: retrieval is
over. The agent runs one step, and a tool call that still reaches this server gets a fixed terminal
text from the catch-all route.

Scoring applies the row's own `id_regex`, which comes from the data, so it runs in the CPU worker pool
under a deadline; a reply whose scoring runs past it is masked, not scored.
"""

from __future__ import annotations

from typing import Any, ClassVar

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from pydantic import Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.responses import assistant_texts
from resources_servers.citation_if.scoring import TERMINAL_TOOL_RESPONSE, score
from resources_servers.citation_if.verifier import Verifier

TIMED_OUT = (0.0, {"gate_failed": "scoring_timeout"})


class CitationIfConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of scoring one reply; a slower one is masked"
    )


class CitationIfVerifyRequest(BaseVerifyRequest):
    verifier: dict[str, Any]

    @field_validator("verifier")
    @classmethod
    def _a_valid_verifier(cls, verifier: dict[str, Any]) -> dict[str, Any]:
        Verifier.model_validate(verifier)
        return verifier


class CitationIfVerifyResponse(CitationIfVerifyRequest, BaseVerifyResponse):
    match_details: dict[str, Any]


def reply_shape(body: BaseVerifyRequest) -> tuple[str, int]:
    """The assistant text (non-empty parts, one per line, stripped) and how many tool calls the reply made."""
    texts = [text for item in body.response.output for text in assistant_texts(item) if text]
    calls = sum(1 for item in body.response.output if item.type == "function_call")
    return "\n".join(texts).strip(), calls


class CitationIfResourcesServer(SimpleResourcesServer):
    config: CitationIfConfig
    key_metric_patterns = ("mean/reward",)

    def complete_app(self, app: FastAPI) -> FastAPI:
        """After every other route: any other POST is a tool call, answered with the terminal text."""
        app = super().complete_app(app)
        app.post("/{tool_name}")(self.tool_after_retrieval)
        return app

    async def tool_after_retrieval(self, tool_name: str) -> PlainTextResponse:
        """Retrieval is over; the reply that called a tool scores 0 (gate `structural`) whatever this says."""
        return PlainTextResponse(TERMINAL_TOOL_RESPONSE)

    async def verify(self, body: CitationIfVerifyRequest) -> CitationIfVerifyResponse:
        text, calls = reply_shape(body)
        settings = Verifier.model_validate(body.verifier).settings()
        reward, details = await run_cpu_bound(
            score, text, calls, settings, timeout_s=self.config.grading_timeout_s, on_timeout=TIMED_OUT
        )
        return CitationIfVerifyResponse(**body.model_dump(), reward=reward, match_details=details)


if __name__ == "__main__":
    CitationIfResourcesServer.run_webserver()
