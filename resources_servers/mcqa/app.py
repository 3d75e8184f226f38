"""mcqa: multiple-choice question answering, rewarded 1.0 when the model's chosen letter is the gold one.

The letter is read from the final text by the row's template regex when it has one, else by a grading
mode (boxed letter, boxed option text, or an `Answer:` line). Extraction runs in the CPU worker pool
because template regexes come from the data and may backtrack badly; past the deadline it scores 0.0.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.cpu_pool import CPUCallTimeoutError, run_cpu_bound
from nemo_gym.reward_profile import compute_pass_majority_metrics, highest_k_metrics
from nemo_gym.text_extraction import option_pairs
from resources_servers.mcqa.mcqa_grading import extract_answer

logger = logging.getLogger("mcqa")

RowGradingMode = Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"]
ConfigGradingMode = Literal[
    "strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"
]


class MCQAConfig(BaseResourcesServerConfig):
    grading_mode: ConfigGradingMode | None = Field(
        default=None, description="when set, used for every row instead of the row's own grading_mode"
    )
    grading_timeout_seconds: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction; a slower one scores 0.0"
    )


class TemplateMetadata(BaseModel):
    """Prompt-template details shipped with some rows; only `output_regex` matters for grading."""

    model_config = ConfigDict(extra="allow")

    output_regex: str | list[str] | None = None


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


def regex_list(template: TemplateMetadata | None) -> tuple[str, ...]:
    if template is None or template.output_regex is None:
        return ()
    if isinstance(template.output_regex, str):
        return (template.output_regex,)
    return tuple(template.output_regex)


class MCQAResourcesServer(SimpleResourcesServer):
    config: MCQAConfig

    async def verify(self, request: Request, body: MCQAVerifyRequest) -> MCQAVerifyResponse:
        gold = body.expected_answer.strip().upper()
        mode = self.config.grading_mode or body.grading_mode
        try:
            extracted = await run_cpu_bound(
                extract_answer,
                body.response.output_text,
                option_pairs(body.options),
                mode,
                regex_list(body.template_metadata),
                timeout_s=self.config.grading_timeout_seconds,
            )
        except CPUCallTimeoutError:
            logger.warning(
                "answer extraction exceeded %s s; scoring 0.0", self.config.grading_timeout_seconds
            )
            extracted = None
        reward = 1.0 if gold and extracted == gold else 0.0
        return MCQAVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=reward,
            expected_answer=gold,
            extracted_answer=extracted,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k and pass@1[avg-of-k] of accuracy and no_answer, and majority@k over the extracted letters."""
        return compute_pass_majority_metrics(tasks, answer_key="extracted_answer")

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """A short headline: mean reward, the largest-k averages, no-answer rate, majority vote, and pass@1."""
        keys: dict[str, Any] = {}
        if "mean/reward" in agent_metrics:
            keys["mean/reward"] = agent_metrics["mean/reward"]
        averages = highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]")
        keys.update(
            {key: value for key, value in averages.items() if key.endswith(("/accuracy", "/no_answer"))}
        )
        passes = highest_k_metrics(agent_metrics, "pass@{k}")
        keys.update({key: value for key, value in passes.items() if key.endswith("/no_answer")})
        majority = highest_k_metrics(agent_metrics, "majority@{k}")
        keys.update({key: value for key, value in majority.items() if key.endswith("/accuracy")})
        if "pass@1/accuracy" in agent_metrics:
            keys["pass@1/accuracy"] = agent_metrics["pass@1/accuracy"]
        return keys


if __name__ == "__main__":
    MCQAResourcesServer.run_webserver()
