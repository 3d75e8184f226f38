"""physics_judge: physics answers graded like math_with_judge's, with a physics judge behind math-verify.

math-verify checks the answer first (its symbolic equivalence with `expected_answer`, in the CPU worker
pool); only when it does not find them equivalent is the judge asked, once, whether the model's whole
final answer states the reference's result, and it ends with `[Correct]` or `[Incorrect]`. A judge answer
with neither token, or a judgment that fails, is reported in `judge_failure`, never scored as wrong.
Metrics are math_with_judge's (symbolic and judge accuracy), repeated per `domain` when rows have one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr, field_validator

from nemo_gym.envkit.judged_env import unusable_unless
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.judge import JudgeFailed
from nemo_gym.prompt import PromptConfig, fill_prompt
from resources_servers.math_with_judge.app import MathWithJudgeResourcesServer
from resources_servers.math_with_judge.judging import rollout_scores
from resources_servers.math_with_judge.models import (
    MathVerifyRequest,
    MathVerifyResponse,
    MathWithJudgeConfig,
)
from resources_servers.physics_judge.prompting import load_judge_prompt

FOLDER = Path(__file__).resolve().parent
CORRECT = re.compile(r"\[correct\]", re.IGNORECASE)
INCORRECT = re.compile(r"\[incorrect\]", re.IGNORECASE)

Verdict = Literal["correct", "incorrect"]


class PhysicsJudgeConfig(MathWithJudgeConfig):
    judge_prompt_path: str = "prompts/judge.yaml"
    use_chat_completions_for_judge: bool = False

    @field_validator("use_chat_completions_for_judge")
    @classmethod
    def _responses_only(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "not supported: every Gym model server serves /v1/responses, which the judge uses"
            )
        return value


class PhysicsVerifyRequest(MathVerifyRequest):
    model_config = ConfigDict(extra="allow")  # `id` and any other key of the row are echoed

    domain: str | None = None


class PhysicsVerifyResponse(MathVerifyResponse):
    model_config = ConfigDict(extra="allow")

    domain: str | None = None
    judge_verdict: Verdict | None = None


def read_verdict(judge_text: str) -> Verdict | None:
    """`[Correct]` anywhere (any case) wins, as in NeMo Skills' physics metrics; else `[Incorrect]`; else
    None (the judge did not give a verdict)."""
    if CORRECT.search(judge_text):
        return "correct"
    if INCORRECT.search(judge_text):
        return "incorrect"
    return None


without_verdict = unusable_unless(read_verdict, "has no verdict ([Correct] or [Incorrect])", from_end=True)


class PhysicsJudgeResourcesServer(MathWithJudgeResourcesServer):
    config: PhysicsJudgeConfig
    pass_at_k = PassAtK(answer_key="extracted_answer", score_fn=rollout_scores, subset_key="domain")
    _prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        self._prompt = load_judge_prompt(FOLDER, self.config.judge_prompt_path)
        return super().setup_webserver()

    async def verify(self, body: PhysicsVerifyRequest) -> PhysicsVerifyResponse:
        """math-verify's 1.0 stands; otherwise the judge's verdict is the reward (one call, no swap)."""
        generated = body.response.output_text
        library = await self._library.grade(body.expected_answer, generated)
        graded = {
            **body.model_dump(exclude={"question"}),
            "extracted_answer": library.extracted_answer,
            "library_reward": library.library_reward,
        }
        if self._judge is None or library.library_reward > 0.5:
            return PhysicsVerifyResponse(**graded, judge_evaluations=None, reward=library.library_reward)
        fields = {"problem": body.question, "generation": generated, "expected_answer": body.expected_answer}
        prompt = fill_prompt(self._prompt, fields)
        try:
            judgment = await self._judge.ask(prompt, read_verdict, unusable=without_verdict)
        except JudgeFailed as failed:
            return PhysicsVerifyResponse(
                **graded,
                judge_evaluations=[],
                **self._judge.failure_fields(failed),
            )
        verdict = judgment.verdict
        return PhysicsVerifyResponse(
            **graded,
            judge_evaluations=[judgment.evaluation],
            judge_verdict=verdict,
            reward=float(verdict == "correct"),
        )


if __name__ == "__main__":
    PhysicsJudgeResourcesServer.run_webserver()
