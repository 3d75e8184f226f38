"""abstention: HotPotQA-style questions where saying "I don't know" beats a wrong answer.

Three tiers: a correct answer earns `correct_reward` (1.0), an abstention `abstention_reward` (0.5) and a
wrong answer `incorrect_reward` (0.0). The policy abstains with `\\boxed{[IDK]}` (recognised here, no judge
call) or by an answer the judge grades NOT_ATTEMPTED. A judgment that fails, or a judge answer without a
grade, is reported in `judge_failure`, never scored as a wrong answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr, field_validator, model_validator

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
from resources_servers.abstention.abstention_grading import (
    Verdict,
    abstention_metrics,
    checked_template,
    final_answer,
    load_prompt,
    normalized,
    parse_grade,
    without_thinking,
)

FOLDER = Path(__file__).resolve().parent


class AbstentionConfig(JudgedEnvConfig):
    # A YAML file with the prompt under `user`; `judge_prompt_template` (NeMo Gym's key: the prompt text
    # itself) wins when set.
    judge_prompt_path: str = "prompts/judge.yaml"
    judge_prompt_template: str | None = None
    use_chat_completions_for_judge: bool = False
    abstention_token: str = "[IDK]"
    correct_reward: float = 1.0
    abstention_reward: float = 0.5
    incorrect_reward: float = 0.0

    @field_validator("use_chat_completions_for_judge")
    @classmethod
    def _responses_only(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "not supported: every Gym model server serves /v1/responses, which the judge uses"
            )
        return value

    @field_validator("abstention_token")
    @classmethod
    def _token_is_recognisable(cls, value: str) -> str:
        if not normalized(value):
            raise ValueError("must contain a letter or digit (it is compared without punctuation)")
        return value

    @model_validator(mode="after")
    def _tiers_in_order(self) -> AbstentionConfig:
        if not self.incorrect_reward < self.abstention_reward < self.correct_reward:
            raise ValueError(
                "the rewards must satisfy incorrect_reward < abstention_reward < correct_reward, got "
                f"{self.incorrect_reward} < {self.abstention_reward} < {self.correct_reward}"
            )
        return self


class AbstentionVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    id: int | str | None = None
    question: str | None = None
    answer: str | None = None


class AbstentionVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    ground_truth: str | None = None
    verdict: Verdict | None = None
    judge_output: str | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    is_correct: float = 0.0
    is_abstain: float = 0.0
    is_incorrect: float = 0.0
    omniscience_index: float = 0.0
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(AbstentionVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class AbstentionResourcesServer(JudgedResourcesServer):
    config: AbstentionConfig
    _prompt: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        if self.config.judge_prompt_template is not None:
            self._prompt = checked_template(self.config.judge_prompt_template, "judge_prompt_template")
        else:
            self._prompt = load_prompt(FOLDER, self.config.judge_prompt_path)
        return app

    def _reward(self, verdict: Verdict) -> float:
        return {
            "correct": self.config.correct_reward,
            "abstain": self.config.abstention_reward,
            "incorrect": self.config.incorrect_reward,
        }[verdict]

    async def verify(self, body: AbstentionVerifyRequest) -> AbstentionVerifyResponse:
        """The boxed answer (else the whole reply, reasoning removed); the abstention token or no answer is an
        abstention without a judge call, anything else is graded by the judge against `answer`."""
        extracted = final_answer(without_thinking(last_assistant_text(body.response)))
        ground_truth = body.answer or ""
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": extracted or None,
            "ground_truth": ground_truth,
        }
        verdict: Verdict = "abstain"
        judge_output = None
        evaluations: list[JudgeEvaluation] = []
        if extracted and normalized(extracted) != normalized(self.config.abstention_token):
            prompt = self._prompt.format(
                question=body.question or "", target=ground_truth, predicted_answer=extracted
            )
            try:
                judgment = await self._judge.ask(prompt, parse_grade, missing="has no grade (A, B or C)")
            except JudgeFailed as failed:
                return AbstentionVerifyResponse(**graded, **self._judge.failure_fields(failed))
            evaluations.append(judgment.evaluation)
            judge_output = judgment.text
            verdict = judgment.verdict or "incorrect"  # never None: `missing` refused an answer without one
        is_correct, is_incorrect = float(verdict == "correct"), float(verdict == "incorrect")
        return AbstentionVerifyResponse(
            **graded,
            reward=self._reward(verdict),
            verdict=verdict,
            judge_output=judge_output,
            judge_evaluations=evaluations,
            is_correct=is_correct,
            is_abstain=float(verdict == "abstain"),
            is_incorrect=is_incorrect,
            omniscience_index=is_correct - is_incorrect,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return abstention_metrics(tasks)


if __name__ == "__main__":
    AbstentionResourcesServer.run_webserver()
