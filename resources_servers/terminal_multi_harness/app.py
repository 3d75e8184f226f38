"""terminal_multi_harness: next-action checking for terminal agents run by tool-calling harnesses (Codex,
OpenCode). A demonstrated trajectory is cut before one step; the model's next step (a message, a tool
call, or a batch of calls in one turn) earns 1.0 when it is the demonstrated one, compared structurally
rather than as serialized text, so that a harness's own argument order or volatile settings do not count.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import ConfigDict

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.terminal_multi_harness.grading import (
    MATCHES,
    ExpectedAction,
    StepRewardCategory,
    ToolCallComparatorConfig,
    action_of,
    grade_action,
)

CATEGORY_NAMES = {category.value: category.name for category in StepRewardCategory}


class TerminalMultiHarnessConfig(BaseResourcesServerConfig):
    tool_call_comparator_config: ToolCallComparatorConfig


class TerminalMultiHarnessVerifyRequest(BaseVerifyRequest):
    """`harness` names the trajectory's harness (kept for metrics and echoed); other row fields are echoed."""

    model_config = ConfigDict(extra="allow")

    harness: str = "generic"
    expected_action: ExpectedAction


class TerminalMultiHarnessVerifyResponse(TerminalMultiHarnessVerifyRequest, BaseVerifyResponse):
    category: StepRewardCategory


RESULT_FIELDS = {"reward", "category", "mask_sample", "failure_kind", "failure_reason"}


class TerminalMultiHarnessResourcesServer(SimpleResourcesServer):
    config: TerminalMultiHarnessConfig
    pass_at_k = PassAtK(subset_key="harness")
    key_metric_patterns = ("mean/reward", "pass@1[avg-of-{k}]/*", "pass@{k}/*", "category/*")

    async def verify(self, body: TerminalMultiHarnessVerifyRequest) -> TerminalMultiHarnessVerifyResponse:
        category = await run_cpu_bound(
            grade_action,
            body.expected_action,
            action_of(body.response),
            self.config.tool_call_comparator_config,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=StepRewardCategory.ARGUMENT_VALUE_DIFFERENT,
        )
        row = body.model_dump(exclude=RESULT_FIELDS)
        return TerminalMultiHarnessVerifyResponse(
            **row, reward=1.0 if category in MATCHES else 0.0, category=category
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the reward (overall and per harness), and the share of rollouts in each category
        (`category/<NAME>`)."""
        rollouts = [rollout for task in tasks for rollout in task]
        counts = Counter(r.get("category") for r in rollouts if r.get("category") in CATEGORY_NAMES)
        shares = {
            f"category/{CATEGORY_NAMES[value]}": n / len(rollouts) for value, n in sorted(counts.items())
        }
        return {**super().compute_metrics(tasks), **shares}


if __name__ == "__main__":
    TerminalMultiHarnessResourcesServer.run_webserver()
