"""math_with_autograder: math answers checked by math-verify, then graded by a Skills-style autograder.

math-verify runs first (symbolic equivalence with `expected_answer`, in the CPU worker pool). When it does
not find the answers equivalent, one autograder call decides: the judge sees the problem, the model's
answer (the raw LaTeX of its last `\\boxed{...}`, so a set or a function is not mangled by math-verify's
normalization) and the golden answer, and grades the model's answer `\\boxed{Correct}` or
`\\boxed{Incorrect}`. A judge answer with neither label, or a judgment that fails, is reported in
`judge_failure`, never scored as wrong. Metrics are math_with_judge's (symbolic and judge accuracy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr, field_validator

from nemo_gym.envkit.judged_env import unusable_unless
from nemo_gym.judge import JudgeFailed
from nemo_gym.prompt import PromptConfig, fill_prompt, load_judge_prompt_file
from resources_servers.math_with_judge.app import MathWithJudgeResourcesServer
from resources_servers.math_with_judge.models import (
    MathVerifyRequest,
    MathVerifyResponse,
    MathWithJudgeConfig,
)

FOLDER = Path(__file__).resolve().parent
CORRECT_LABEL = r"\boxed{Correct}"
INCORRECT_LABEL = r"\boxed{Incorrect}"
PLACEHOLDERS = ("problem", "predicted_answer", "expected_answer")

Verdict = Literal["correct", "incorrect"]


class MathWithAutograderConfig(MathWithJudgeConfig):
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


class AutograderVerifyRequest(MathVerifyRequest):
    model_config = ConfigDict(extra="allow")  # `id` and any other key of the row are echoed


class AutograderVerifyResponse(MathVerifyResponse):
    model_config = ConfigDict(extra="allow")

    judged_answer: str | None = None
    judge_verdict: Verdict | None = None


def last_boxed(text: str) -> str | None:
    """The raw content of the last balanced `\\boxed{...}` (or, with none, `\\fbox{...}`), else None."""
    for command in ("\\boxed", "\\fbox"):
        start = text.rfind(command + "{")
        if start < 0:
            continue
        opening = start + len(command)
        depth = 0
        for position in range(opening, len(text)):
            if text[position] == "{":
                depth += 1
            elif text[position] == "}":
                depth -= 1
                if depth == 0:
                    return text[opening + 1 : position]
        return None  # the last one is never closed
    return None


def read_verdict(judge_text: str) -> Verdict | None:
    """Whichever label comes first in the judge's answer (exact case, as the prompt asks); None if neither."""
    positions = {
        verdict: found
        for verdict, label in (("correct", CORRECT_LABEL), ("incorrect", INCORRECT_LABEL))
        if (found := judge_text.find(label)) >= 0
    }
    return min(positions, key=positions.__getitem__) if positions else None


without_verdict = unusable_unless(
    read_verdict, f"has no verdict ({CORRECT_LABEL} or {INCORRECT_LABEL})", from_end=True
)


def load_judge_prompt(path: str) -> PromptConfig:
    """The prompt at `path` (this folder first), its templates using only the placeholders."""
    return load_judge_prompt_file(FOLDER, path, PLACEHOLDERS)


class MathWithAutograderResourcesServer(MathWithJudgeResourcesServer):
    config: MathWithAutograderConfig
    _prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        self._prompt = load_judge_prompt(self.config.judge_prompt_path)
        return super().setup_webserver()

    async def verify(self, body: AutograderVerifyRequest) -> AutograderVerifyResponse:
        """math-verify's 1.0 stands; otherwise the autograder's verdict is the reward (one call)."""
        generated = body.response.output_text
        library = await self._library.grade(body.expected_answer, generated)
        graded = {
            **body.model_dump(exclude={"question"}),
            "extracted_answer": library.extracted_answer,
            "library_reward": library.library_reward,
        }
        if self._judge is None or library.library_reward > 0.5:
            return AutograderVerifyResponse(**graded, judge_evaluations=None, reward=library.library_reward)
        judged_answer = last_boxed(generated) or library.extracted_answer or generated
        fields = {
            "problem": body.question,
            "predicted_answer": judged_answer,
            "expected_answer": body.expected_answer,
        }
        prompt = fill_prompt(self._prompt, fields)
        try:
            judgment = await self._judge.ask(prompt, read_verdict, unusable=without_verdict)
        except JudgeFailed as failed:
            return AutograderVerifyResponse(
                **graded,
                judged_answer=judged_answer,
                judge_evaluations=[],
                **self._judge.failure_fields(failed),
            )
        verdict = judgment.verdict
        return AutograderVerifyResponse(
            **graded,
            judged_answer=judged_answer,
            judge_evaluations=[judgment.evaluation],
            judge_verdict=verdict,
            reward=float(verdict == "correct"),
        )


if __name__ == "__main__":
    MathWithAutograderResourcesServer.run_webserver()
