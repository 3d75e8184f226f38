"""ragtruth: RAGTruth case-level hallucination detection.

The prompt gives a reference context and a candidate response (a QA answer, a summary, or data-to-text)
and asks the model to list the candidate's hallucinated spans as `{"hallucination list": [...]}`. The
verdict is binary: a non-empty list says "hallucinated". The reward is 1.0 when that verdict equals the
gold label `is_halu`, else 0.0; an answer with no readable JSON object says "none found". The metrics
add RAGTruth's precision / recall / F1 of the hallucinated class, overall and per `task_type`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from resources_servers.ragtruth.grading import hallucination_list, parse_answer

EXTRACTED_MAX_CHARS = 500


class RagtruthConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    think_tag: str = Field(
        default="think",
        min_length=1,
        description="tag of the reasoning blocks dropped before the JSON is read",
    )


class RagtruthVerifyRequest(BaseVerifyRequest):
    """Extra row fields (ids, the source case) are allowed and echoed."""

    model_config = ConfigDict(extra="allow")

    is_halu: bool
    task_type: str = ""


class RagtruthVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    task_type: str = ""
    is_halu: int
    pred_halu: int
    parse_fail: int
    extracted: str


def precision_recall_f1(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Of the hallucinated class: precision, recall and F1 (0.0 where a denominator is 0)."""
    tp = sum(1 for row in rows if row.get("pred_halu") and row.get("is_halu"))
    fp = sum(1 for row in rows if row.get("pred_halu") and not row.get("is_halu"))
    fn = sum(1 for row in rows if not row.get("pred_halu") and row.get("is_halu"))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def mean_reward(rows: list[dict[str, Any]]) -> float:
    return sum(float(row["reward"]) for row in rows) / len(rows) if rows else 0.0


class RagtruthResourcesServer(SimpleResourcesServer):
    config: RagtruthConfig

    async def verify(self, body: RagtruthVerifyRequest) -> RagtruthVerifyResponse:
        """reward 1.0 when "the list is not empty" equals is_halu."""
        parsed = parse_answer(body.response.output_text, self.config.think_tag)
        spans = hallucination_list(parsed)
        predicted = bool(spans)
        own = set(RagtruthVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)
        row = {
            key: value
            for key, value in body.model_dump().items()
            if key not in own and not key.startswith("_ng_")
        }
        return RagtruthVerifyResponse(
            **row,
            task_type=body.task_type,
            reward=1.0 if predicted == body.is_halu else 0.0,
            is_halu=int(body.is_halu),
            pred_halu=int(predicted),
            parse_fail=int(parsed is None),
            extracted=json.dumps(spans, ensure_ascii=False)[:EXTRACTED_MAX_CHARS]
            if spans is not None
            else "",
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Over every rollout: mean reward, parse failures, and the hallucinated class's precision,
        recall and F1, overall and per task type (with accuracy and count)."""
        rows = [rollout for task in tasks for rollout in task]
        if not rows:
            return {}
        metrics: dict[str, Any] = {
            "mean_reward": mean_reward(rows),
            "count": len(rows),
            "parse_fail_rate": sum(1 for row in rows if row.get("parse_fail")) / len(rows),
            **precision_recall_f1(rows),
        }
        by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_type[row.get("task_type") or "unknown"].append(row)
        for task_type, group in sorted(by_type.items()):
            stats = {**precision_recall_f1(group), "accuracy": mean_reward(group), "count": len(group)}
            metrics.update({f"task_type/{task_type}/{name}": value for name, value in stats.items()})
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = {
            name: agent_metrics[name]
            for name in ("mean_reward", "f1", "precision", "recall")
            if name in agent_metrics
        }
        key.update(
            {name: value for name, value in agent_metrics.items() if name.endswith(("/f1", "/accuracy"))}
        )
        return key


if __name__ == "__main__":
    RagtruthResourcesServer.run_webserver()
