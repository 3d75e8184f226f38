"""Reading proof answers and 0 / 0.5 / 1 scores, shared by proof_judge and proof_verification.

A score is the content of the last `\\boxed{...}` and must be exactly 0, 0.5 or 1 (written any way `float`
reads it: `1.0`, ` 0.50 `); anything else is no score. Reasoning is dropped the way NeMo Gym does it: all
up to the last `</think>` goes, and with `assert_think_end` an answer that never closed its reasoning is
malformed.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field, model_validator

from nemo_gym.judge import last_assistant_text
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.text.extraction import last_boxed

SCORES = (0.0, 0.5, 1.0)
THINK_END = "</think>"
SOLUTION_HEADER = "## Solution"
SELF_EVALUATION_HEADER = "## Self Evaluation"


def read_score(text: str) -> float | None:
    """The last boxed score of `text` when it is 0, 0.5 or 1, else None."""
    boxed = last_boxed(text)
    if boxed is None:
        return None
    try:
        score = float(boxed.strip())
    except ValueError:
        return None
    return score if score in SCORES else None


def without_score(response: NeMoGymResponse) -> str | None:
    """Why a judge's answer is unusable (no 0 / 0.5 / 1 boxed score), or None when it has one."""
    judge_text = last_assistant_text(response)
    if read_score(judge_text) is None:
        return f"the judge's answer has no \\boxed{{}} score of 0, 0.5 or 1: {judge_text[-100:]!r}"
    return None


def after_reasoning(text: str, assert_think_end: bool) -> str | None:
    """`text` after its last `</think>`, stripped; None when `assert_think_end` and there is none."""
    if assert_think_end and THINK_END not in text:
        return None
    return text.rsplit(THINK_END, 1)[-1].strip()


class SelfEvaluatedProof(BaseModel):
    proof: str
    self_evaluation: str
    self_score: float


def read_self_evaluated_proof(text: str, assert_think_end: bool) -> SelfEvaluatedProof | str:
    """The proof under `## Solution`, the self-evaluation under `## Self Evaluation` after it and the
    self-evaluation's boxed score; or the reason the answer is malformed (a short snake_case name)."""
    if not text.strip():
        return "empty_response"
    answer = after_reasoning(text, assert_think_end)
    if answer is None:
        return "missing_think_end"
    if SOLUTION_HEADER not in answer:
        return "missing_solution_header"
    after_solution = answer.split(SOLUTION_HEADER, 1)[1]
    if SELF_EVALUATION_HEADER not in after_solution:
        return "missing_self_eval_header"
    proof, self_evaluation = (part.strip() for part in after_solution.split(SELF_EVALUATION_HEADER, 1))
    self_score = read_score(self_evaluation)
    if self_score is None:
        return "invalid_boxed_score"
    return SelfEvaluatedProof(proof=proof, self_evaluation=self_evaluation, self_score=self_score)


class NemoGymJudgeKeys(BaseModel):
    """NeMo Gym's flat judge sampling keys for these environments. Each one set here replaces the same
    setting of `judge_responses_create_params` (`max_tokens` is `max_output_tokens` there);
    `judge_model_name`, when not empty, is sent as the judge request's `model`."""

    judge_model_name: str = ""
    temperature: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    assert_think_end: bool = False

    @model_validator(mode="after")
    def _into_judge_params(self) -> NemoGymJudgeKeys:
        params = getattr(self, "judge_responses_create_params", None)
        if not isinstance(params, NeMoGymResponseCreateParamsNonStreaming):
            return self
        overrides = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_output_tokens": self.max_tokens,
            "model": self.judge_model_name or None,
        }
        overrides = {key: value for key, value in overrides.items() if value is not None}
        if overrides:
            settings = params.model_dump(mode="json", exclude_unset=True)
            merged = NeMoGymResponseCreateParamsNonStreaming.model_validate({**settings, **overrides})
            object.__setattr__(self, "judge_responses_create_params", merged)
        return self


def agreement(predicted: float, actual: float) -> float:
    """1 - |predicted - actual|: 1 when the scores match, 0.5 half a step off, 0 at opposite ends."""
    value = 1.0 - abs(predicted - actual)
    return 0.0 if math.isclose(value, 0.0) else value
