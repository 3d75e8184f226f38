"""Rubric grading: one judge call per rubric item, the item verdicts, and the reward they add up to.

Shared by multichallenge and inverse_if (which builds on this folder). The item calls run concurrently;
`nemo_gym.judge` bounds them (the judge model server's cap, rate limit and circuit breaker, a deadline per
call). Every item keeps its own record: the verdict the judge gave, or why there is none. One item without
a verdict makes the aggregate not computable, so the rollout carries a `judge_failure` instead of a reward
that would silently count the missing item as failed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel

from nemo_gym.envkit.judged_env import PromptJudge
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics, compute_subset_metrics
from nemo_gym.judge import (
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

PER_SAMPLE_AGGREGATE_KEY = "per_sample_aggregate"
THINKING = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL)
# A closing tag without its opening one: the opening tag was part of the prompt template.
UNPAIRED_THINKING = re.compile(r"^.*?</(?:think|thinking)>", re.DOTALL)
Item = TypeVar("Item", bound=BaseModel)


class AggregationMode(StrEnum):
    """How item scores (1.0 passed, 0.0 failed) make the reward; NeMo Gym's `aggregation_mode` values."""

    MEAN = "mean"
    MIN = "min"
    MAX = "max"
    ALL = "all"
    ANY = "any"
    WEIGHTED = "weighted"


def aggregate(scores: Sequence[float], weights: Sequence[float], mode: AggregationMode) -> float:
    """The reward of a fully judged rubric (`scores` is never empty: an empty rubric is refused)."""
    if mode is AggregationMode.MEAN:
        return sum(scores) / len(scores)
    if mode is AggregationMode.MIN:
        return min(scores)
    if mode is AggregationMode.MAX:
        return max(scores)
    if mode is AggregationMode.ALL:
        return float(all(score == 1.0 for score in scores))
    if mode is AggregationMode.ANY:
        return float(any(score == 1.0 for score in scores))
    total = sum(weights)
    return sum(s * w for s, w in zip(scores, weights, strict=True)) / total if total > 0 else 0.0


def without_thinking(text: str) -> str:
    """The answer a judge is shown: the text with its <think>/<thinking> blocks removed."""
    return UNPAIRED_THINKING.sub("", THINKING.sub("", text)).strip()


def answer_text(response: NeMoGymResponse) -> str:
    return without_thinking(last_assistant_text(response))


def rubric_or_metadata(
    rubric: list[Item], metadata: dict[str, Any] | None, item_type: type[Item], what: str
) -> list[Item]:
    """The row's rubric, else the one in its `metadata`; a task without one is refused (`what` names an item)."""
    if not rubric and isinstance(metadata, dict) and metadata.get("rubric"):
        rubric = [item_type.model_validate(item) for item in metadata["rubric"]]
    if not rubric:
        raise ValueError(f"rubric: the task needs at least one {what} (none here or in metadata)")
    return rubric


def last_line_word(text: str, words: tuple[str, ...]) -> str | None:
    """The last line of `text` when, its letters alone and upper-cased, it is one of `words`; else None."""
    lines = text.strip().splitlines()
    word = re.sub(r"[^A-Za-z]", "", lines[-1]).upper() if lines else ""
    return word if word in words else None


class ItemVerdict(BaseModel):
    """One rubric item as judged: the verdict and score, or the failure that left it without one."""

    index: int
    verdict: str | None = None
    score: float | None = None
    judge_output: str | None = None
    judge_failure: JudgeFailure | None = None


# Reads a judge's answer: (verdict, score), or None when the answer carries no readable verdict.
ReadVerdict = Callable[[str], tuple[str, float] | None]


@dataclass(frozen=True)
class ItemCall:
    params: NeMoGymResponseCreateParamsNonStreaming
    read: ReadVerdict
    unreadable: str  # what the judge had to write, for the failure message


@dataclass
class RubricResult:
    items: list[ItemVerdict]
    evaluations: list[JudgeEvaluation]

    @property
    def failure(self) -> JudgeFailure | None:
        """The rollout's failure: the first item's, naming the item and how many items lack a verdict."""
        failed = [item for item in self.items if item.judge_failure is not None]
        if not failed:
            return None
        first = failed[0].judge_failure
        assert first is not None
        message = (
            f"{len(failed)} of {len(self.items)} rubric item(s) without a verdict; item {failed[0].index}: "
        )
        return JudgeFailure(kind=first.kind, message=message + first.message, attempts=first.attempts)


async def judge_rubric(judge: PromptJudge, calls: Sequence[ItemCall], concurrently: bool) -> RubricResult:
    """Ask the judge about every item (all at once, or one after the other) and record each verdict."""

    async def one(index: int, call: ItemCall) -> tuple[ItemVerdict, JudgeEvaluation | None]:
        def unusable(response: NeMoGymResponse) -> str | None:
            text = answer_text(response)
            if call.read(text) is None:
                return f"no verdict ({call.unreadable}) in the judge's answer: {text[:100]!r}"
            return None

        try:
            judgment = await judge.ask(
                call.params, lambda text: call.read(without_thinking(text)), unusable=unusable
            )
        except JudgeFailed as failed:
            return ItemVerdict(index=index, judge_failure=failed.failure), None
        verdict, score = judgment.verdict or ("", 0.0)  # never the fallback: `unusable` checked it
        item = ItemVerdict(
            index=index, verdict=verdict, score=score, judge_output=without_thinking(judgment.text)
        )
        return item, judgment.evaluation

    if concurrently:
        outcomes = await asyncio.gather(*(one(index, call) for index, call in enumerate(calls)))
    else:
        outcomes = [await one(index, call) for index, call in enumerate(calls)]
    return RubricResult(
        items=[item for item, _ in outcomes],
        evaluations=[evaluation for _, evaluation in outcomes if evaluation is not None],
    )


def rubric_grade(
    result: RubricResult, weights: Sequence[float], mode: AggregationMode, failure_reward: float
) -> dict[str, Any]:
    """A verify answer's grading fields: the reward (the aggregate of the item scores, or `failure_reward`
    when an item lacks a verdict), the mode, the pass counts, and the judge's records and failure."""
    failure = result.failure
    scores = [item.score for item in result.items if item.score is not None]
    return {
        "reward": failure_reward if failure is not None else aggregate(scores, weights, mode),
        "aggregation_mode": mode.value,
        "num_passed": sum(score == 1.0 for score in scores),
        "num_total": len(result.items),
        "judge_evaluations": result.evaluations,
        "judge_failure": failure,
    }


def transcript(messages: Sequence[Any]) -> str:
    """A conversation as the judge reads it: `[ROLE]: text` blocks (what NeMo Gym's `context` holds)."""
    blocks = []
    for message in messages:
        item = message if isinstance(message, Mapping) else message.model_dump()
        role, content = item.get("role"), item.get("content")
        if role is None:
            continue
        if isinstance(content, list):
            content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
        blocks.append(f"[{str(role).upper()}]: {content or ''}")
    return "\n\n".join(blocks)


def rubric_metrics(
    tasks: Sequence[Sequence[Mapping[str, Any]]], axis: Callable[[Mapping], Any] | None
) -> dict:
    """pass@k / pass@1[avg-of-k] of the reward (`accuracy`) and of a fully passed rubric (`all_passed`)
    over the judged rollouts, per axis too when `axis(rollout)` names one; failed judgments are left out
    (judge_failure_metrics counts them)."""
    judged = [[r for r in task if r.get("judge_failure") is None] for task in tasks]
    judged = [task for task in judged if task]

    def scores(rollout: Mapping[str, Any]) -> dict[str, float]:
        total = rollout.get("num_total") or 0
        return {
            "accuracy": rollout["reward"],
            "all_passed": float(total > 0 and rollout["num_passed"] == total),
        }

    metrics, *_ = compute_pass_majority_metrics(judged, scores)
    metrics.pop(PER_SAMPLE_AGGREGATE_KEY, None)
    if axis is not None:
        labelled = [[{**r, "_axis": axis(r)} for r in task] for task in judged]
        metrics.update(compute_subset_metrics(labelled, "_axis", scores))
    return metrics


def metadata_axis(key: str) -> Callable[[Mapping], Any]:
    """The `rubric_metrics` axis a rollout's `metadata[key]` names (None without one)."""

    def axis(rollout: Mapping[str, Any]) -> Any:
        metadata = rollout.get("metadata")
        return metadata.get(key) if isinstance(metadata, dict) else None

    return axis
