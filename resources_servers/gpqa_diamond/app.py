"""gpqa_diamond: four-option graduate-level science questions, rewarded 1.0 when the chosen letter is the gold one.

Rows are mcqa rows (options, expected_answer, template_metadata); the letter is read with GPQA's
conventions: the row's template regex, else the last `\\boxed{X}`, else the last `Answer: X`. Extraction
runs in the CPU worker pool because template regexes come from the data; past its deadline it scores 0.0.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.text.extraction import option_pairs
from resources_servers.gpqa_diamond.grading import extract_letter


class GPQADiamondConfig(BaseResourcesServerConfig):
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction; a slower one scores 0.0"
    )


class TemplateMetadata(BaseModel):
    """Prompt-template details some rows carry; only `output_regex` matters for grading."""

    model_config = ConfigDict(extra="allow")

    output_regex: str | list[str] | None = None


class GPQADiamondVerifyRequest(BaseVerifyRequest):
    options: list[dict[str, str | None]] = Field(default_factory=list)
    expected_answer: str
    # Kept for mcqa-schema compatibility; GPQA's extraction rules apply whatever it says.
    grading_mode: Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"] | None = None
    uuid: str | None = None
    metadata: Any = None
    template_metadata: TemplateMetadata | None = None


class GPQADiamondVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None


def template_patterns(template: TemplateMetadata | None) -> tuple[str, ...]:
    if template is None or template.output_regex is None:
        return ()
    regex = template.output_regex
    return (regex,) if isinstance(regex, str) else tuple(regex)


class GPQADiamondResourcesServer(SimpleResourcesServer):
    config: GPQADiamondConfig
    # pass@k and pass@1[avg-of-k] of accuracy and no_answer, and majority@k over the extracted letters.
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/accuracy",
        "pass@1[avg-of-{k}]/no_answer",
        "pass@{k}/accuracy",
        "majority@{k}/accuracy",
    )

    async def verify(self, body: GPQADiamondVerifyRequest) -> GPQADiamondVerifyResponse:
        gold = body.expected_answer.strip().upper()
        extracted = await run_cpu_bound(
            extract_letter,
            body.response.output_text,
            option_pairs(body.options),
            template_patterns(body.template_metadata),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        return GPQADiamondVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=1.0 if gold and extracted == gold else 0.0,
            expected_answer=gold,
            extracted_answer=extracted,
        )


if __name__ == "__main__":
    GPQADiamondResourcesServer.run_webserver()
