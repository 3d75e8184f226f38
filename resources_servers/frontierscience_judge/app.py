"""frontierscience_judge: FrontierScience answers graded by one LLM judge call, in one of two modes.

`olympiad`: the judge compares the model's answer with the reference answer and ends with
`Judgement: YES` or `Judgement: NO`; YES earns 1.0. `research`: the judge grades the answer against a
10-point rubric and states `Score: X/10`; a score at or above `rubric_pass_score_threshold` (7) earns 1.0.
Reasoning blocks (`<think>...</think>`) are removed before the judge sees the answer, and an answer cut off
inside one counts as no answer. A judge answer that cannot be read, or a judgment that fails, is reported in
`judge_failure`, never scored as wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, field_validator, model_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.prompt import PromptConfig, fill_prompt, load_judge_prompt_file

FOLDER = Path(__file__).resolve().parent
DEFAULT_PROMPTS = {"olympiad": "prompts/judge.yaml", "research": "prompts/research_judge.yaml"}
PLACEHOLDERS = ("question", "expected_answer", "rubric", "generation")

NUMBER = r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))"
JUDGEMENT = re.compile(r"judge?ment\s*:\s*\**\s*(yes|no)\b", re.IGNORECASE)
# `FINAL_SCORE[7] / MAX_SCORE[10]`, `7/10`, `7 out of 10`, then a bare `Score: 7` (points).
BRACKETED_SCORE = re.compile(
    rf"score\s*\[\s*{NUMBER}\s*\]\s*/\s*[\w\s-]*?score\s*\[\s*{NUMBER}\s*\]", re.IGNORECASE
)
FRACTION = re.compile(rf"{NUMBER}\s*(?:/|out\s+of)\s*{NUMBER}", re.IGNORECASE)
LABELED_SCORE = re.compile(rf"score\s*[:=]\s*\**\s*{NUMBER}", re.IGNORECASE)
CLOSED_THOUGHTS = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL)
THOUGHTS_BEFORE_CLOSE = re.compile(r"^.*?</(?:think|thinking)>", re.DOTALL)

Mode = Literal["olympiad", "research"]
Verdict = Literal["YES", "NO"]


class FrontierScienceConfig(JudgedEnvConfig):
    judge_mode: Mode = "olympiad"
    rubric_pass_score_threshold: float = 7.0
    rubric_max_score: float = Field(default=10.0, gt=0)
    # None: the shipped prompt of the mode (prompts/judge.yaml or prompts/research_judge.yaml).
    judge_prompt_path: str | None = None
    use_chat_completions_for_judge: bool = False

    @field_validator("use_chat_completions_for_judge")
    @classmethod
    def _responses_only(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "not supported: every Gym model server serves /v1/responses, which the judge uses"
            )
        return value

    @model_validator(mode="after")
    def _threshold_on_the_scale(self) -> FrontierScienceConfig:
        if not 0 <= self.rubric_pass_score_threshold <= self.rubric_max_score:
            raise ValueError("rubric_pass_score_threshold must be between 0 and rubric_max_score")
        return self


class FrontierScienceVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")  # `id` and any other key of the row are echoed

    question: str | None = None
    expected_answer: str | None = None
    subject: str | None = None
    rubric: str | None = None


class FrontierScienceVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    extracted_answer: str | None = None
    expected_answer: str | None = None
    verdict: Verdict | None = None
    judge_output: str | None = None
    rubric_score: float | None = None
    rubric_score_normalized: float | None = None
    invalid_judge_response: bool = False
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(FrontierScienceVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def final_answer(text: str) -> str:
    """The answer without reasoning blocks; "" when a reasoning block is opened and never closed (the answer
    was cut off while the model was still thinking)."""
    opened = "<think>" in text or "<thinking>" in text
    closed = "</think>" in text or "</thinking>" in text
    if opened and not closed:
        return ""
    return THOUGHTS_BEFORE_CLOSE.sub("", CLOSED_THOUGHTS.sub("", text)).strip()


def read_judgement(judge_text: str) -> Verdict | None:
    """The last `Judgement: YES` / `Judgement: NO` of the judge's answer (any case), else None."""
    found = JUDGEMENT.findall(judge_text)
    return found[-1].upper() if found else None  # type: ignore[return-value]


def read_rubric_score(judge_text: str, max_score: float) -> float | None:
    """The score of the last line that names a score, in points out of `max_score`: a fraction (`7/10`,
    `7 out of 10`, `SCORE[7] / MAX_SCORE[10]`) is rescaled onto `max_score`, a bare `Score: 7` is taken as
    points. None when no line gives one (or a fraction's denominator is not positive)."""
    for line in reversed(judge_text.splitlines()):
        if "score" not in line.lower():
            continue
        fraction = BRACKETED_SCORE.search(line) or FRACTION.search(line)
        if fraction:
            points, out_of = float(fraction.group(1)), float(fraction.group(2))
            return points / out_of * max_score if out_of > 0 else None
        labeled = LABELED_SCORE.search(line)
        if labeled:
            return float(labeled.group(1))
    return None


def load_judge_prompt(path: str) -> PromptConfig:
    """The prompt at `path` (this folder first), its templates using only the placeholders."""
    return load_judge_prompt_file(FOLDER, path, PLACEHOLDERS)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    """`accuracy` (the reward) and, in research mode, `rubric_score` (normalized to 0..1), for the rollouts
    that were graded: a failed judgment has no grade."""
    if rollout.get("judge_failure") is not None:
        return {}
    scores = {"accuracy": float(rollout["reward"])}
    if rollout.get("rubric_score_normalized") is not None:
        scores["rubric_score"] = float(rollout["rubric_score_normalized"])
    return scores


class FrontierScienceJudgeServer(JudgedResourcesServer):
    config: FrontierScienceConfig
    key_metric_best_of = ("pass@{k}", "majority@{k}")
    pass_at_k = PassAtK(answer_key="extracted_answer", score_fn=rollout_scores, subset_key="subject")
    _prompt: PromptConfig = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_judge_prompt(
            self.config.judge_prompt_path or DEFAULT_PROMPTS[self.config.judge_mode]
        )
        return app

    def _unreadable(self, response: NeMoGymResponse) -> str | None:
        judge_text = last_assistant_text(response)
        if read_judgement(judge_text) is not None:
            return None
        if self.config.judge_mode == "research":
            if read_rubric_score(judge_text, self.config.rubric_max_score) is not None:
                return None
            return f"the judge's answer has neither a score nor a Judgement: YES/NO: {judge_text[-100:]!r}"
        return f"the judge's answer has no Judgement: YES/NO: {judge_text[-100:]!r}"

    async def verify(self, body: FrontierScienceVerifyRequest) -> FrontierScienceVerifyResponse:
        """One judge call; reward 1.0 for YES (olympiad) or a rubric score at the threshold (research)."""
        generation = final_answer(last_assistant_text(body.response))
        expected = body.expected_answer or ""
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "extracted_answer": generation or None,
            "expected_answer": expected,
        }
        if not generation:  # nothing to grade: no answer earns 0.0 without asking the judge
            return FrontierScienceVerifyResponse(**graded, reward=0.0)
        fields = {
            "question": body.question or "",
            "expected_answer": expected,
            "rubric": body.rubric or expected,
            "generation": generation,
        }
        try:
            judgment = await self._judge.ask(fill_prompt(self._prompt, fields), unusable=self._unreadable)
        except JudgeFailed as failed:
            return FrontierScienceVerifyResponse(**graded, **self._judge.failure_fields(failed))
        judge_output = judgment.text
        verdict = read_judgement(judge_output)
        score = normalized = None
        invalid = False
        if self.config.judge_mode == "research":
            score = read_rubric_score(judge_output, self.config.rubric_max_score)
            if score is None:  # a Judgement line without a score: the verdict decides, flagged
                invalid = True
            else:
                normalized = min(max(score, 0.0), self.config.rubric_max_score) / self.config.rubric_max_score
                verdict = verdict or ("YES" if score >= self.config.rubric_pass_score_threshold else "NO")
        passed = score >= self.config.rubric_pass_score_threshold if score is not None else verdict == "YES"
        return FrontierScienceVerifyResponse(
            **graded,
            reward=float(passed),
            verdict=verdict,
            judge_output=judge_output,
            rubric_score=score,
            rubric_score_normalized=normalized,
            invalid_judge_response=invalid,
            judge_evaluations=[judgment.evaluation],
        )


if __name__ == "__main__":
    FrontierScienceJudgeServer.run_webserver()
