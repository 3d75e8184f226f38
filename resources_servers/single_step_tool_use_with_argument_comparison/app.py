"""single_step_tool_use_with_argument_comparison: reward the model's next step in a conversation against
the one step the task expects: a function call (same tool, arguments compared one by one) or a chat
message. Trajectories of an expert are cut into such steps (behaviour cloning, one step at a time).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.reward_profile import compute_pass_majority_metrics, default_key_metrics, highest_k_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.single_step_tool_use_with_argument_comparison.argument_comparison import (
    Action,
    ActionGrade,
    ExpectedAction,
    StepRewardCategory,
    ToolCallComparatorConfig,
    expected_of,
    grade_action,
)

CATEGORY_NAMES = {category.value: category.name for category in StepRewardCategory}


class SingleStepConfig(BaseResourcesServerConfig):
    tool_call_comparator_config: ToolCallComparatorConfig = Field(default_factory=ToolCallComparatorConfig)


class SingleStepVerifyRequest(BaseVerifyRequest):
    """Other row fields are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    expected_action: ExpectedAction


class SingleStepVerifyResponse(SingleStepVerifyRequest, BaseVerifyResponse):
    category: StepRewardCategory
    name_match: bool | None
    argument_scores: dict[str, float]


def first_action(response: NeMoGymResponse) -> Action | None:
    """The response's first function call; else its text as a message if it says anything; else None."""
    for item in response.output:
        if getattr(item, "type", None) == "function_call":
            return Action("function_call", item.name, item.arguments)
    return Action("message") if response.output_text.strip() else None


class SingleStepResourcesServer(SimpleResourcesServer):
    config: SingleStepConfig

    async def verify(self, body: SingleStepVerifyRequest) -> SingleStepVerifyResponse:
        result = await self._grade(expected_of(body.expected_action), first_action(body.response))
        row = body.model_dump(exclude={"reward", "category", "name_match", "argument_scores"})
        return SingleStepVerifyResponse(**row, **vars(result))

    async def _grade(self, expected: Action, actual: Action | None) -> ActionGrade:
        return await run_cpu_bound(
            grade_action,
            expected,
            actual,
            self.config.tool_call_comparator_config,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=ActionGrade(0.0, StepRewardCategory.ARGUMENT_VALUE_DIFFERENT),
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the reward, and the share of rollouts in each category (`category/<NAME>`)."""
        rollouts = [rollout for task in tasks for rollout in task]
        values = (rollout.get("category") for rollout in rollouts)
        counts = Counter(value for value in values if isinstance(value, str) and value in CATEGORY_NAMES)
        shares = {
            f"category/{CATEGORY_NAMES[value]}": count / len(rollouts) for value, count in counts.items()
        }
        return {**compute_pass_majority_metrics(tasks)[0], **shares}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return {
            **default_key_metrics(agent_metrics),
            **highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]"),
            **highest_k_metrics(agent_metrics, "pass@{k}"),
        }


if __name__ == "__main__":
    SingleStepResourcesServer.run_webserver()
