"""mcqa: multiple-choice question answering, rewarded 1.0 when the model's chosen letter is the gold one.

The letter is read from the final text by the row's template regex when it has one, else by a grading
mode (boxed letter, boxed option text, or an `Answer:` line). Extraction runs in the CPU worker pool
because template regexes come from the data and may backtrack badly; past the deadline it scores 0.0.
"""

from pydantic import Field

from nemo_gym.base_resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from nemo_gym.envkit.multiple_choice import template_patterns
from nemo_gym.envkit.multiple_choice_verify import (
    MultipleChoiceVerifyRequest,
    MultipleChoiceVerifyResponse,
    grade_choice,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.mcqa.mcqa_grading import extract_answer
from resources_servers.mcqa.rows import ConfigGradingMode, RowGradingMode


class MCQAConfig(BaseResourcesServerConfig):
    grading_mode: ConfigGradingMode | None = Field(
        default=None, description="when set, used for every row instead of the row's own grading_mode"
    )
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction; a slower one scores 0.0"
    )


class MCQAVerifyRequest(MultipleChoiceVerifyRequest):
    grading_mode: RowGradingMode = "strict_single_letter_boxed"


class MCQAVerifyResponse(MultipleChoiceVerifyResponse):
    pass


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
        return await grade_choice(
            body,
            extract_answer,
            self.config.grading_mode or body.grading_mode,
            template_patterns(body.template_metadata),
            timeout_s=self.config.grading_timeout_s,
            response_type=MCQAVerifyResponse,
        )


if __name__ == "__main__":
    MCQAResourcesServer.run_webserver()
