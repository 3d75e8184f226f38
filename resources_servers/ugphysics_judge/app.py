"""ugphysics_judge: undergraduate physics answers, math-verify first, then a TRUE/FALSE physics judge.

The server is math_with_judge's (symbolic check in the CPU worker pool, the shared judge layer). When
math-verify finds the boxed answer equivalent to `expected_answer` the reward is its 1.0 and no judge is
asked; otherwise the judge is asked once, shown the problem, the reference solution, the reference answer
and the model's whole output, and its `## Equivalence Judgement` line (TRUE or FALSE) is the reward. A
judge answer without TRUE or FALSE, or a judgment that fails, is reported in `judge_failure`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import ConfigDict, PrivateAttr, field_validator

from nemo_gym.envkit.judged_env import unusable_unless
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.judge import JudgeFailed
from nemo_gym.prompt import PromptConfig, fill_prompt
from resources_servers.math_with_judge.app import MathWithJudgeResourcesServer
from resources_servers.math_with_judge.models import (
    MathVerifyRequest,
    MathVerifyResponse,
    MathWithJudgeConfig,
)
from resources_servers.ugphysics_judge.prompting import load_judge_prompt

FOLDER = Path(__file__).resolve().parent
# The judgement line the prompt asks for; without it, the last standalone TRUE or FALSE of the answer.
HEADED = re.compile(r"##\s*Equivalence\s*Judgement\s*\n\s*(TRUE|FALSE)", re.IGNORECASE)
BARE = re.compile(r"\b(TRUE|FALSE)\b", re.IGNORECASE)

Verdict = Literal["TRUE", "FALSE"]


class UGPhysicsJudgeConfig(MathWithJudgeConfig):
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


class UGPhysicsVerifyRequest(MathVerifyRequest):
    model_config = ConfigDict(extra="allow")  # `id`, `index` and any other key of the row are echoed

    solution: str = ""
    subject: str | None = None


class UGPhysicsVerifyResponse(MathVerifyResponse):
    model_config = ConfigDict(extra="allow")

    solution: str = ""
    subject: str | None = None
    extracted_verdict: Verdict | None = None


def read_verdict(judge_text: str) -> Verdict | None:
    """TRUE or FALSE from the `## Equivalence Judgement` line; else the last standalone TRUE/FALSE word (any
    case); else None (no verdict)."""
    headed = HEADED.search(judge_text)
    if headed is not None:
        return "TRUE" if headed.group(1).upper() == "TRUE" else "FALSE"
    words = BARE.findall(judge_text)
    if not words:
        return None
    return "TRUE" if words[-1].upper() == "TRUE" else "FALSE"


without_verdict = unusable_unless(read_verdict, "has no verdict (TRUE or FALSE)", from_end=True)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """`symbolic_accuracy` (math-verify alone) always; `judge_accuracy` (the final reward: math-verify's 1.0
    or the judge's verdict) unless the judgment failed."""
    library = rollout.get("library_reward")
    scores = {"symbolic_accuracy": float(library) if isinstance(library, int | float) else 0.0}
    if rollout.get("judge_failure") is None:
        scores["judge_accuracy"] = float(rollout.get("reward") or 0.0)
    return scores


class UGPhysicsJudgeResourcesServer(MathWithJudgeResourcesServer):
    config: UGPhysicsJudgeConfig
    pass_at_k = PassAtK(answer_key="extracted_verdict", score_fn=rollout_scores, subset_key="subject")
    _prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        self._prompt = load_judge_prompt(FOLDER, self.config.judge_prompt_path)
        return super().setup_webserver()

    async def verify(self, body: UGPhysicsVerifyRequest) -> UGPhysicsVerifyResponse:
        """math-verify's 1.0 stands (verdict TRUE); otherwise one judge call decides (no order swap)."""
        generated = body.response.output_text
        library = await self._library.grade(body.expected_answer, generated)
        graded = {
            **body.model_dump(exclude={"question"}),
            "extracted_answer": library.extracted_answer,
            "library_reward": library.library_reward,
        }
        if library.library_reward > 0.5:
            return UGPhysicsVerifyResponse(
                **graded, judge_evaluations=None, extracted_verdict="TRUE", reward=library.library_reward
            )
        if self._judge is None:
            return UGPhysicsVerifyResponse(
                **graded, judge_evaluations=None, extracted_verdict="FALSE", reward=library.library_reward
            )
        fields = {
            "problem": body.question,
            "solution": body.solution,
            "expected_answer": body.expected_answer,
            "generation": generated,
        }
        prompt = fill_prompt(self._prompt, fields)
        try:
            judgment = await self._judge.ask(prompt, read_verdict, unusable=without_verdict)
        except JudgeFailed as failed:
            return UGPhysicsVerifyResponse(
                **graded,
                judge_evaluations=[],
                **self._judge.failure_fields(failed),
            )
        verdict = judgment.verdict
        return UGPhysicsVerifyResponse(
            **graded,
            judge_evaluations=[judgment.evaluation],
            extracted_verdict=verdict,
            reward=float(verdict == "TRUE"),
        )


if __name__ == "__main__":
    UGPhysicsJudgeResourcesServer.run_webserver()
