"""deepsearchqa: multi-step research questions whose answer is one item or a set, graded by answer-set F1.

The judge reads the question, the kind of answer (`answer_type`), the reference and the model's answer,
and returns a JSON decision per reference item (found or not) plus the answer's extra items. Precision,
recall and F1 over the answer set follow from those decisions; the reward is F1. A judge answer that is not
that JSON, or a judgment that fails, is reported in `judge_failure`, never scored as wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.prompt import PromptConfig, fill_prompt, load_judge_prompt_file
from resources_servers.deepsearchqa.deepsearchqa_grading import (
    UnreadableJudgment,
    deepsearchqa_metrics,
    parse_judgment,
    set_scores,
)

FOLDER = Path(__file__).resolve().parent
PLACEHOLDERS = ("problem", "answer_type", "answer", "response")


class DeepSearchQAConfig(JudgedEnvConfig):
    # A YAML file with a `user` (and optionally `system`) template; point it at the official prompt.
    judge_prompt_path: str = "prompts/judge.yaml"


class DeepSearchQAVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    example_id: str
    problem: str
    answer: str
    answer_type: str
    problem_category: str


class DeepSearchQAVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    precision: float = 0.0
    recall: float = 0.0
    f1: float = 0.0
    fully_correct: float = 0.0
    fully_incorrect: float = 0.0
    correct_with_extraneous: float = 0.0
    judge_output: dict[str, Any] | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(DeepSearchQAVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def unreadable(response: NeMoGymResponse) -> str | None:
    text = last_assistant_text(response)
    try:
        parse_judgment(text)
    except UnreadableJudgment as problem:
        return f"the judge's answer is not the expected JSON: {problem}: {text[:100]!r}"
    return None


class DeepSearchQAResourcesServer(JudgedResourcesServer):
    config: DeepSearchQAConfig
    _prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_judge_prompt_file(FOLDER, self.config.judge_prompt_path, PLACEHOLDERS)
        return app

    async def verify(self, body: DeepSearchQAVerifyRequest) -> DeepSearchQAVerifyResponse:
        """reward = answer-set F1 from the judge's decisions (every assistant message is the answer)."""
        graded = body.model_dump(exclude=GRADING_FIELDS | {"reward"})
        answer = body.response.output_text.strip()
        if not answer:  # nothing to judge: no item found
            return DeepSearchQAVerifyResponse(**graded, reward=0.0, fully_incorrect=1.0)
        fields = {"problem": body.problem, "answer_type": body.answer_type, "answer": body.answer}
        try:
            judgment = await self._judge.ask(
                fill_prompt(self._prompt, {**fields, "response": answer}), parse_judgment, unusable=unreadable
            )
        except JudgeFailed as failed:
            return DeepSearchQAVerifyResponse(**graded, **self._judge.failure_fields(failed))
        decisions = judgment.verdict  # readable: `unreadable` checked it
        scores = set_scores(decisions)
        return DeepSearchQAVerifyResponse(
            **graded,
            reward=scores.f1,
            **vars(scores),
            judge_output=decisions,
            judge_evaluations=[judgment.evaluation],
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return deepsearchqa_metrics(tasks)


if __name__ == "__main__":
    DeepSearchQAResourcesServer.run_webserver()
