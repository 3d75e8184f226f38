"""string_match: free-form short answers (a word, Yes/No, a number, a short list) graded against the gold one.

The row's `extraction_mode` says where the answer is (the last `\\boxed{}`, the last `Final answer:` line,
the last line, or the whole response); grading.py then compares it with `expected_answer` under a ladder
of normalizations (case, quotes, numbers, LaTeX wrappers, list separators, US state names, units), so a
right answer written differently still earns 1.0 and a numeric near miss earns 0.98. Rows may show images
(`input_image` prompt items): only the text of the response is graded.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.wire.responses import NeMoGymResponse, assistant_texts
from resources_servers.string_match.grading import ExtractionMode, extract_answer, match_score


class StringMatchConfig(BaseResourcesServerConfig):
    pass


class StringMatchVerifyRequest(BaseVerifyRequest):
    expected_answer: str
    extraction_mode: ExtractionMode = "final_answer"
    case_sensitive: bool = False
    metadata: dict[str, Any] | None = None

    @field_validator("expected_answer")
    @classmethod
    def _not_blank(cls, expected_answer: str) -> str:
        if not expected_answer.strip():
            raise ValueError("expected_answer is blank: no answer could ever match it")
        return expected_answer


class StringMatchVerifyResponse(StringMatchVerifyRequest, BaseVerifyResponse):
    extracted_answer: str | None = Field(description="what the extraction mode read; None when nothing")


def response_text(response: NeMoGymResponse) -> str:
    """The assistant's messages, one per line (as NeMo Gym joins them), without reasoning or tool calls."""
    return "\n".join(text for item in response.output for text in assistant_texts(item)).strip()


class StringMatchResourcesServer(SimpleResourcesServer):
    config: StringMatchConfig
    # Rewards are 0, 0.98 or 1; pass@k of a mix is the best of the first k. majority@k votes on the
    # extracted answer, and no_answer counts responses the extraction mode found nothing in.
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/accuracy",
        "pass@1[avg-of-{k}]/no_answer",
        "pass@{k}/accuracy",
        "majority@{k}/accuracy",
    )

    async def verify(self, body: StringMatchVerifyRequest) -> StringMatchVerifyResponse:
        extracted = extract_answer(response_text(body.response), body.extraction_mode)
        reward = (
            0.0 if extracted is None else match_score(body.expected_answer, extracted, body.case_sensitive)
        )
        return StringMatchVerifyResponse(**body.model_dump(), reward=reward, extracted_answer=extracted)


if __name__ == "__main__":
    StringMatchResourcesServer.run_webserver()
