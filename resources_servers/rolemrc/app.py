"""rolemrc: RoleMRC role-play reading comprehension, scored against the gold reply.

The model plays a character who answers (or, out of the character's knowledge, declines) a question
about given passages, sometimes under nested or conflicting instructions. Its reply, with any
`<think>` blocks removed, is compared with the row's `reference`: the reward is ROUGE-L, and ROUGE-1/2/
Lsum and BLEU ride along (METEOR and BERTScore are not computed: they need downloaded data and
weights). ROUGE-L's subsequence search is quadratic, so scoring runs in the CPU pool with a deadline.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.rolemrc.grading import reference_metrics, strip_reasoning, task_dimension

logger = logging.getLogger(__name__)

GENERATION_MAX_CHARS = 500
# The reference metrics averaged over the corpus (`auto/<metric>/mean`), as RoleMRC's report gives them.
AUTO_METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum", "bleu", "meteor")


class RoleMRCConfig(BaseResourcesServerConfig):
    mode: Literal["reference", "judge"] = Field(
        default="reference", description="reference metrics; NeMo Gym's judge mode is not supported here"
    )
    include_bertscore: bool = Field(
        default=False, description="accepted for NeMo Gym configs; BERTScore is never computed here"
    )

    @field_validator("mode")
    @classmethod
    def _reference_mode_only(cls, mode: str) -> str:
        if mode != "reference":
            raise ValueError("rolemrc here scores against the reference only; judge mode is not supported")
        return mode


class RoleMRCVerifyRequest(BaseVerifyRequest):
    """Extra row fields are allowed and echoed, as NeMo Gym's rows carry them."""

    model_config = ConfigDict(extra="allow")

    reference: str
    task: str = ""
    dimension: str = ""

    @field_validator("reference")
    @classmethod
    def _a_gold_reply(cls, reference: str) -> str:
        if not reference.strip():
            raise ValueError("reference must hold the gold reply; a blank one cannot be scored against")
        return reference


class RoleMRCVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    task: str = ""
    dimension: str = ""
    generation: str = ""
    rouge1: float = 0.0
    rouge2: float = 0.0
    rougeL: float = 0.0  # noqa: N815 - NeMo Gym's field name
    rougeLsum: float = 0.0  # noqa: N815 - NeMo Gym's field name
    bleu: float = 0.0
    meteor: float | None = None


def means(rows: list[dict[str, Any]], name: str) -> tuple[float, int] | None:
    values = [float(row[name]) for row in rows if isinstance(row.get(name), (int, float))]
    return (sum(values) / len(values), len(values)) if values else None


class RoleMRCResourcesServer(SimpleResourcesServer):
    config: RoleMRCConfig

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        if self.config.include_bertscore:
            logger.warning(
                "include_bertscore is set, but BERTScore needs model weights and is not computed here"
            )

    async def verify(self, body: RoleMRCVerifyRequest) -> RoleMRCVerifyResponse:
        """reward = ROUGE-L F-measure of the reply (reasoning removed) against the reference."""
        reply = strip_reasoning(body.response.output_text)
        scores = await run_cpu_bound(
            reference_metrics,
            reply,
            body.reference,
            timeout_s=self.config.grading_timeout_s,
            on_timeout={},
        )
        own = set(RoleMRCVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)
        row = {
            key: value
            for key, value in body.model_dump().items()
            if key not in own and not key.startswith("_ng_")
        }
        return RoleMRCVerifyResponse(
            **row,
            task=body.task,
            dimension=body.dimension or task_dimension(body.task),
            reward=scores.get("rougeL", 0.0),
            generation=reply[:GENERATION_MAX_CHARS],
            **scores,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """The mean reward overall and per dimension, and the corpus mean of each reference metric."""
        rows = [rollout for task in tasks for rollout in task]
        metrics: dict[str, Any] = {}
        if (overall := means(rows, "reward")) is not None:
            metrics["mean_reward"], metrics["count"] = overall
        by_dimension: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_dimension[row.get("dimension") or "unknown"].append(row)
        for dimension, group in sorted(by_dimension.items()):
            if (stats := means(group, "reward")) is not None:
                metrics[f"dimension/{dimension}/mean_reward"], metrics[f"dimension/{dimension}/count"] = stats
        for name in AUTO_METRICS:
            if (stats := means(rows, name)) is not None:
                metrics[f"auto/{name}/mean"], metrics[f"auto/{name}/count"] = stats
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {name: agent_metrics[name] for name in ("mean_reward", "mean/reward") if name in agent_metrics}
        key.update(
            {name: value for name, value in agent_metrics.items() if name.endswith(("/mean_reward", "/mean"))}
        )
        return key


if __name__ == "__main__":
    RoleMRCResourcesServer.run_webserver()
