"""mcqa: multiple-choice question answering, rewarded 1.0 when the model's chosen letter is the gold one.

The letter is read from the final text by the row's template regex when it has one, else by a grading
mode (boxed letter, boxed option text, or an `Answer:` line). Extraction runs in the CPU worker pool
because template regexes come from the data and may backtrack badly; past the deadline it scores 0.0.
"""

from typing import Any

from pydantic import Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.text.extraction import option_pairs
from resources_servers.mcqa.mcqa_grading import extract_answer
from resources_servers.mcqa.rows import ConfigGradingMode, RowGradingMode, TemplateMetadata, regex_list


class MCQAConfig(BaseResourcesServerConfig):
    grading_mode: ConfigGradingMode | None = Field(
        default=None, description="when set, used for every row instead of the row's own grading_mode"
    )
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction; a slower one scores 0.0"
    )


class MCQAVerifyRequest(BaseVerifyRequest):
    options: list[dict[str, str | None]] = Field(default_factory=list)
    expected_answer: str
    grading_mode: RowGradingMode = "strict_single_letter_boxed"
    uuid: str | None = None
    metadata: Any = None
    template_metadata: TemplateMetadata | None = None


class MCQAVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None


class MCQAResourcesServer(SimpleResourcesServer):
    config: MCQAConfig
    pass_at_k = PassAtK(answer_key="extracted_answer")
    key_metric_patterns = (
        "mean/reward",
        "pass@1[avg-of-{k}]/*",
        "pass@{k}/no_answer",
        "majority@{k}/accuracy",
        "pass@1/accuracy",
    )

    async def verify(self, body: MCQAVerifyRequest) -> MCQAVerifyResponse:
        gold = body.expected_answer.strip().upper()
        extracted = await run_cpu_bound(
            extract_answer,
            body.response.output_text,
            option_pairs(body.options),
            self.config.grading_mode or body.grading_mode,
            regex_list(body.template_metadata),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        return MCQAVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}),
            reward=1.0 if gold and extracted == gold else 0.0,
            expected_answer=gold,
            extracted_answer=extracted,
        )


if __name__ == "__main__":
    MCQAResourcesServer.run_webserver()
