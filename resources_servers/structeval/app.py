"""structeval: reward a document written in the requested format (JSON, YAML, CSV, TOML, XML) that
parses and holds the structural paths the task row lists (StructEval's non-renderable tasks).

reward = 0.2 · render_score + 0.8 · key_validation_score (rounded to 2 decimals) when the row lists
paths, else render_score. Parsing and path lookup run in the CPU pool with a deadline.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.reward_profile import is_metric
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.structeval.grading import FORMATS, StructGrade, grade

RENDER_WEIGHT, KEY_WEIGHT = 0.2, 0.8
RESULT_FIELDS = {
    "reward",
    "render_score",
    "key_validation_score",
    "raw_output_score",
    "error_type",
    "error_message",
}


class StructEvalConfig(BaseResourcesServerConfig):
    max_output_chars: int = Field(default=200_000, gt=0)


class StructEvalVerifyRequest(BaseVerifyRequest):
    """Other row fields are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    output_type: str
    raw_output_metric: list[str] = Field(default_factory=list)
    task_id: str | None = None
    task_name: str | None = None
    input_type: str | None = None
    rendering: bool = False

    @field_validator("output_type")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value.lower() not in FORMATS:
            raise ValueError(f"must be one of {', '.join(FORMATS)} (any case)")
        return value.lower()


class StructEvalVerifyResponse(StructEvalVerifyRequest, BaseVerifyResponse):
    render_score: float
    key_validation_score: float
    raw_output_score: float
    error_type: str | None
    error_message: str | None


def final_reward(result: StructGrade, paths: list[str]) -> float:
    if not paths:
        return result.render_score
    return round(RENDER_WEIGHT * result.render_score + KEY_WEIGHT * result.key_validation_score, 2)


def grouped_metrics(rollout: dict[str, Any]) -> list[tuple[str, str]]:
    """(metric name, rollout field) pairs a rollout counts in, by its output and input formats."""
    pairs = []
    output_type, input_type = rollout.get("output_type"), rollout.get("input_type")
    if isinstance(output_type, str):
        pairs += [(f"{field}_{output_type}", field) for field in ("render_score", "key_validation_score")]
        pairs.append((f"reward_output_{output_type}", "reward"))
    if isinstance(input_type, str):
        pairs.append((f"reward_input_{input_type.lower()}", "reward"))
    return pairs


class StructEvalResourcesServer(SimpleResourcesServer):
    config: StructEvalConfig

    async def verify(self, body: StructEvalVerifyRequest) -> StructEvalVerifyResponse:
        paths = body.raw_output_metric
        result = await self._grade(body.response.output_text, body.output_type, paths)
        row = body.model_dump(exclude=RESULT_FIELDS)
        return StructEvalVerifyResponse(**row, **vars(result), reward=final_reward(result, paths))

    async def _grade(self, answer: str, output_type: str, paths: list[str]) -> StructGrade:
        deadline_s = self.config.grading_timeout_s
        timed_out = StructGrade(0.0, 0.0, 0.0, "timeout", f"grading exceeded {deadline_s} s")
        return await run_cpu_bound(
            grade,
            answer,
            output_type,
            paths,
            self.config.max_output_chars,
            timeout_s=deadline_s,
            on_timeout=timed_out,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Means per output format (`mean/reward_output_yaml`, `mean/render_score_yaml`,
        `mean/key_validation_score_yaml`) and per input format (`mean/reward_input_csv`), as StructEval
        summarises its results."""
        groups: dict[str, list[float]] = defaultdict(list)
        for rollout in (rollout for task in tasks for rollout in task):
            for metric, field in grouped_metrics(rollout):
                if is_metric(value := rollout.get(field)):
                    groups[f"mean/{metric}"].append(value)
        return {key: fmean(values) for key, values in groups.items()}


if __name__ == "__main__":
    StructEvalResourcesServer.run_webserver()
