"""gpqa_diamond: four-option graduate-level science questions, rewarded 1.0 when the chosen letter is the gold one.

Rows are mcqa rows (options, expected_answer, template_metadata); the letter is read with GPQA's
conventions: the row's template regex, else the last `\\boxed{X}`, else the last `Answer: X`. Extraction
runs in the CPU worker pool because template regexes come from the data; past its deadline it scores 0.0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from nemo_gym.base_resources_server import BaseResourcesServerConfig, SimpleResourcesServer
from nemo_gym.envkit.multiple_choice import template_patterns
from nemo_gym.envkit.multiple_choice_verify import (
    MultipleChoiceVerifyRequest,
    MultipleChoiceVerifyResponse,
    grade_choice,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.gpqa_diamond.grading import extract_letter


class GPQADiamondConfig(BaseResourcesServerConfig):
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction; a slower one scores 0.0"
    )


class GPQADiamondVerifyRequest(MultipleChoiceVerifyRequest):
    # Kept for mcqa-schema compatibility; GPQA's extraction rules apply whatever it says.
    grading_mode: Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"] | None = None


class GPQADiamondVerifyResponse(MultipleChoiceVerifyResponse):
    pass


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
        return await grade_choice(
            body,
            extract_letter,
            template_patterns(body.template_metadata),
            timeout_s=self.config.grading_timeout_s,
            response_type=GPQADiamondVerifyResponse,
        )


if __name__ == "__main__":
    GPQADiamondResourcesServer.run_webserver()
