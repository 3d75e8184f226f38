"""longmemeval: questions about a long multi-session chat history, judged yes/no by an LLM judge with a
rubric chosen by the question's type (temporal reasoning, knowledge update, single-session user /
assistant / preference, multi-session) or, for unanswerable questions, an abstention rubric.

The history is already in the prompt (rendered when the dataset was built), so verify needs only the
question, the gold answer and the policy's last message. A judgment that fails, or a judge answer that is
neither yes nor no, is reported in `judge_failure` and left out of the accuracy, never counted as a "no".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from resources_servers.longmemeval.longmemeval_grading import (
    RUBRICS,
    load_prompts,
    longmemeval_metrics,
    parse_verdict,
    rubric_for,
    without_reasoning,
)

FOLDER = Path(__file__).resolve().parent
QuestionType = Literal[
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
]


class LongMemEvalConfig(JudgedEnvConfig):
    # One YAML prompt file per rubric (key `user`, placeholders {question}, {answer}, {response}).
    judge_prompt_paths: dict[str, str] = Field(
        default_factory=lambda: {rubric: f"prompts/{rubric}.yaml" for rubric in RUBRICS}
    )


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    question_id: str = ""
    question_type: QuestionType
    question: str = Field(min_length=1)
    answer: str = ""
    abstention: bool = False


class LongMemEvalVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: VerifierMetadata


class LongMemEvalVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    question_id: str = ""
    question_type: str = ""
    abstention: bool = False
    rubric: str = ""
    generation: str = ""
    empty_response: bool = False
    judge_label: bool | None = None
    judge_raw: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(LongMemEvalVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class LongMemEvalResourcesServer(JudgedResourcesServer):
    config: LongMemEvalConfig
    _prompts: dict[str, str] = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompts = load_prompts(FOLDER, self.config.judge_prompt_paths)
        return app

    async def verify(self, body: LongMemEvalVerifyRequest) -> LongMemEvalVerifyResponse:
        """reward 1.0 when the judge says yes; an empty answer is 0.0 without asking the judge."""
        meta = body.verifier_metadata
        abstention = meta.abstention or "_abs" in meta.question_id
        rubric = rubric_for(meta.question_type, meta.question_id, abstention)
        generation = without_reasoning(last_assistant_text(body.response))
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "question_id": meta.question_id,
            "question_type": meta.question_type,
            "abstention": abstention,
            "rubric": rubric,
            "generation": generation,
        }
        if not generation:
            return LongMemEvalVerifyResponse(**graded, reward=0.0, empty_response=True, judge_label=False)
        prompt = self._prompts[rubric].format(question=meta.question, answer=meta.answer, response=generation)
        try:
            judgment = await self._judge.ask(prompt, parse_verdict, missing="is neither yes nor no")
        except JudgeFailed as failed:
            return LongMemEvalVerifyResponse(**graded, **self._judge.failure_fields(failed))
        judge_raw = judgment.text
        label = bool(judgment.verdict)  # never None: `missing` refused an answer without one
        return LongMemEvalVerifyResponse(
            **graded,
            reward=float(label),
            judge_label=label,
            judge_raw=judge_raw,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return longmemeval_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        keys = ("accuracy", "abstention/accuracy", JUDGE_FAILURE_RATE_KEY)
        return {key: agent_metrics[key] for key in keys if key in agent_metrics}


if __name__ == "__main__":
    LongMemEvalResourcesServer.run_webserver()
