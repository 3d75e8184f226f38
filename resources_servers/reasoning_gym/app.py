"""reasoning_gym: single-turn reasoning puzzles scored by the `reasoning-gym` library's own scorers.

A row carries a reasoning-gym entry (`question`, `answer`, `metadata` with `source_dataset`); the
answer is pulled out of the model's text and handed to that task's `score_answer`, whose score (often
partial credit in [0, 1]) is the reward. Scoring runs in the CPU worker pool: some scorers parse or
simulate (sudoku grids, Brainf*ck programs, ARC boards) and must not stall the event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.cpu_pool import CPUCallTimeoutError, run_cpu_bound
from nemo_gym.pass_at_k_metrics import subset_pass_majority_metrics
from nemo_gym.reward_profile import highest_k_metrics
from resources_servers.reasoning_gym.grading import Grade, UnknownTaskError, grade

logger = logging.getLogger("reasoning_gym")


class ReasoningGymConfig(BaseResourcesServerConfig):
    # Generous: the first call in a worker also imports the library (about a second).
    verify_timeout_s: float = Field(default=30.0, gt=0)


class ReasoningGymMetadata(BaseModel):
    """The library's entry metadata; only the task name is needed here, the rest goes to the scorer."""

    model_config = ConfigDict(extra="allow")
    source_dataset: str


class ReasoningGymVerifyRequest(BaseVerifyRequest):
    question: str
    answer: str | None = None
    metadata: ReasoningGymMetadata


class ReasoningGymVerifyResponse(BaseVerifyResponse):
    task_name: str
    score: float
    extracted_answer: str | None


class ReasoningGymResourcesServer(SimpleResourcesServer):
    config: ReasoningGymConfig

    async def verify(self, request: Request, body: ReasoningGymVerifyRequest) -> ReasoningGymVerifyResponse:
        """reward = score = the task's own scorer on the extracted answer; 0.0 if scoring times out."""
        task_name = body.metadata.source_dataset
        entry = {"question": body.question, "answer": body.answer, "metadata": body.metadata.model_dump()}
        timeout_s = self.config.verify_timeout_s
        try:
            result = await run_cpu_bound(
                grade, task_name, body.response.output_text, entry, timeout_s=timeout_s
            )
        except UnknownTaskError:
            raise HTTPException(
                status_code=422,
                detail=[
                    {
                        "loc": ["body", "metadata", "source_dataset"],
                        "msg": f"reasoning-gym has no task named {task_name!r}",
                        "type": "value_error",
                        "input": task_name,
                    }
                ],
            ) from None
        except CPUCallTimeoutError:
            logger.warning("scoring a %s answer took over %.1f s; it scores 0.0", task_name, timeout_s)
            result = Grade(score=0.0, extracted_answer=None)
        return ReasoningGymVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}),
            task_name=task_name,
            score=result.score,
            extracted_answer=result.extracted_answer,
            reward=result.score,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k / majority@k over all tasks, and the same per reasoning-gym task (`<task_name>/...`)."""
        return subset_pass_majority_metrics(tasks, "task_name", answer_key="extracted_answer")

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key_metrics = {name: agent_metrics[name] for name in ("mean/reward",) if name in agent_metrics}
        key_metrics.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", "pass@{k}"))
        return key_metrics


if __name__ == "__main__":
    ReasoningGymResourcesServer.run_webserver()
