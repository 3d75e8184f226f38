"""reasoning_gym: single-turn reasoning puzzles scored by the `reasoning-gym` library's own scorers.

A row carries a reasoning-gym entry (`question`, `answer`, `metadata` with `source_dataset`); the
answer is pulled out of the model's text and handed to that task's `score_answer`, whose score (often
partial credit in [0, 1]) is the reward. Scoring runs in the CPU worker pool: some scorers parse or
simulate (sudoku grids, Brainf*ck programs, ARC boards) and must not stall the event loop.
"""

from typing import ClassVar

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.reasoning_gym.grading import Grade, UnknownTaskError, grade


class ReasoningGymConfig(BaseResourcesServerConfig):
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"verify_timeout_s": "grading_timeout_s"}
    # Generous: the first call in a worker also imports the library (about a second).
    grading_timeout_s: float = Field(default=30.0, gt=0, description="deadline of scoring one answer")


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
    pass_at_k = PassAtK(answer_key="extracted_answer", subset_key="task_name")  # and `<task_name>/...`
    key_metric_patterns = ("mean/reward", "pass@1[avg-of-{k}]/*", "pass@{k}/*")

    async def verify(self, body: ReasoningGymVerifyRequest) -> ReasoningGymVerifyResponse:
        """reward = score = the task's own scorer on the extracted answer; 0.0 if scoring times out."""
        task_name = body.metadata.source_dataset
        entry = {"question": body.question, "answer": body.answer, "metadata": body.metadata.model_dump()}
        try:
            result = await run_cpu_bound(
                grade,
                task_name,
                body.response.output_text,
                entry,
                timeout_s=self.config.grading_timeout_s,
                on_timeout=Grade(score=0.0, extracted_answer=None),
            )
        except UnknownTaskError:
            message = f"reasoning-gym has no task named {task_name!r}"
            problem = {"loc": ["body", "metadata", "source_dataset"], "msg": message, "type": "value_error"}
            raise HTTPException(status_code=422, detail=[{**problem, "input": task_name}]) from None
        return ReasoningGymVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}),
            task_name=task_name,
            score=result.score,
            extracted_answer=result.extracted_answer,
            reward=result.score,
        )


if __name__ == "__main__":
    ReasoningGymResourcesServer.run_webserver()
