"""Pairwise judging against a saved baseline answer, shared by `arena` and `arena_judge`.

Each rollout is judged twice with the answers' positions swapped (policy first, then baseline first), so a
judge that prefers whichever answer it reads first cannot move the score. A verdict is the one label
`[[A>>B]]` .. `[[B>>A]]` the judge wrote; a judge answer with none, or with two different ones, is a
malformed verdict: kept as None and flagged, never read as a loss. The run's headline is the policy's
win rate against the baseline from a Bradley-Terry fit over all games, with a seeded bootstrap interval.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from nemo_gym.envkit.judged_env import PromptJudge
from nemo_gym.judge import JudgeEvaluation

LABEL = re.compile(r"\[\[([AB<>=]+)\]\]")
VERDICTS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
BOTH_BAD = "BB"
# What one game is worth to the answer in position A; the answer in B gets 1 minus that.
A_SCORE = {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0}
STRONG = {"A>>B", "B>>A"}


def parse_verdict(text: str, allow_both_bad: bool = False) -> str | None:
    """The single label in the judge's text, or None when there is none, several that differ, or an
    unknown one (`[[BB]]`, both answers bad, is known only when `allow_both_bad`)."""
    labels = set(LABEL.findall(text or ""))
    if len(labels) != 1:
        return None
    (label,) = labels
    if label in VERDICTS or (allow_both_bad and label == BOTH_BAD):
        return label
    return None


def policy_scores(verdict: str | None, policy_is_a: bool, weight: int, both_bad_as_tie: bool) -> list[float]:
    """The policy's scores from one game: a strong verdict counts `weight` times, a tie is 0.5; a malformed
    verdict gives none, and `[[BB]]` gives one tie or none (`both_bad_as_tie`)."""
    if verdict == BOTH_BAD:
        return [0.5] if both_bad_as_tie else []
    if verdict not in A_SCORE:
        return []
    score = A_SCORE[verdict] if policy_is_a else 1.0 - A_SCORE[verdict]
    return [score] * (weight if verdict in STRONG else 1)


class PairwiseGame(BaseModel):
    """One judge game: which answer was A, what the judge was asked and answered, and the verdict read."""

    policy_position: str
    judge_output: str
    verdict: str | None


async def judge_both_orders(
    judge: PromptJudge,
    system: str | None,
    user_template: str,
    question: str,
    policy_answer: str,
    baseline_answer: str,
    allow_both_bad: bool = False,
) -> tuple[list[PairwiseGame], list[JudgeEvaluation]]:
    """The templates see {question} and the answers as {answer_a}/{answer_b} (or {answer_1}/{answer_2}).
    Game 1 with the policy as A, game 2 with it as B, one after the other (so a scripted or recorded
    judge sees them in a fixed order). `JudgeFailed` from either call propagates: no judgment, no grade."""
    games: list[PairwiseGame] = []
    evaluations: list[JudgeEvaluation] = []
    for position, (answer_a, answer_b) in (
        ("A", (policy_answer, baseline_answer)),
        ("B", (baseline_answer, policy_answer)),
    ):
        fill = {
            **dict.fromkeys(("answer_a", "answer_1"), answer_a),
            **dict.fromkeys(("answer_b", "answer_2"), answer_b),
        }
        fill["question"] = question
        messages = [{"role": "system", "content": system.format_map(fill)}] if system else []
        messages.append({"role": "user", "content": user_template.format_map(fill)})
        judgment = await judge.ask(messages, lambda text: parse_verdict(text, allow_both_bad))
        evaluations.append(judgment.evaluation)
        games.append(
            PairwiseGame(policy_position=position, judge_output=judgment.text, verdict=judgment.verdict)
        )
    return games, evaluations


# ---- Bradley-Terry win rate with a bootstrap interval ---------------------------------------------------


def battle_outcomes(pairs: Iterable[tuple[str | None, str | None]], weight: int) -> tuple[list[float], int]:
    """The policy's outcome (1 win, 0.5 tie, 0 loss) in every battle the verdict pairs (policy-as-A verdict,
    policy-as-B verdict) imply, strong verdicts counted `weight` times; and how many verdicts were invalid."""
    outcomes: list[float] = []
    invalid = 0
    for first, second in pairs:
        for verdict, policy_is_a in ((first, True), (second, False)):
            if verdict not in A_SCORE:
                invalid += 1
                continue
            outcomes.extend(policy_scores(verdict, policy_is_a, weight, both_bad_as_tie=False))
    return outcomes, invalid


def bradley_terry_win_rate(outcomes: Sequence[float] | np.ndarray) -> float:
    """The policy's win probability against the baseline under the Bradley-Terry model fitted by maximum
    likelihood (a tie is half a win each way). With two players the likelihood
    w*log(s) + (n-w)*log(1-s), s = 1/(1+10^(-(r_policy - r_base)/400)), is maximal at s = w/n: the fit is
    exact, no optimiser needed (and unlike an unpenalised logistic fit it has no trouble with a sweep)."""
    values = np.asarray(outcomes, dtype=float)
    return float(values.mean()) if values.size else math.nan


def elo_from_win_rate(win_rate: float, base: float = 1000.0) -> float:
    """The policy's Elo rating with the baseline at `base`; a sweep is clipped to +-1000 points."""
    if math.isnan(win_rate):
        return math.nan
    clipped = min(max(win_rate, 1e-3 / 2), 1 - 1e-3 / 2)
    return base + max(-1000.0, min(1000.0, 400 * math.log10(clipped / (1 - clipped))))


def arena_elo(outcomes: Sequence[float], invalid: int, rounds: int, seed: int) -> dict[str, float]:
    """`score` (win rate vs the baseline, percent), `ci_lower`/`ci_upper` (2.5th and 97.5th percentile of
    `rounds` bootstrap resamples of the battles, as offsets from the score, like arena-hard-auto), `elo`,
    `invalid_scores` and `n` (battles). The same seed and battles give the same numbers."""
    values = np.asarray(outcomes, dtype=float)
    score = bradley_terry_win_rate(values)
    result = {"invalid_scores": float(invalid), "n": float(values.size)}
    if not values.size:
        return {**result, "score": math.nan, "ci_lower": math.nan, "ci_upper": math.nan, "elo": math.nan}
    rng = np.random.default_rng(seed)
    samples = rng.integers(0, values.size, size=(rounds, values.size))
    boot = values[samples].mean(axis=1)
    lower, upper = np.percentile(boot, [2.5, 97.5])
    return {
        **result,
        "score": round(100 * score, 2),
        "ci_lower": round(100 * (float(lower) - score), 2),
        "ci_upper": round(100 * (float(upper) - score), 2),
        "elo": round(elo_from_win_rate(score), 2),
    }


def judge_call_failed(rollout: dict[str, Any]) -> bool:
    failure = rollout.get("judge_failure")
    return isinstance(failure, dict) and failure.get("kind") != "bad_response"


def arena_elo_metrics(
    tasks: Sequence[Sequence[dict[str, Any]]], weight: int, rounds: int, seed: int, prefix: str = "arena_elo"
) -> dict[str, float]:
    """`arena_elo/*` over every rollout's two verdicts, and `arena_elo/<category>/*` per category. A rollout
    whose judge call failed has no verdicts and is left out; a malformed verdict counts in `invalid_scores`."""
    rollouts = [rollout for task in tasks for rollout in task if not judge_call_failed(rollout)]
    groups: dict[str, list[dict[str, Any]]] = {"": rollouts}
    for rollout in rollouts:
        if isinstance(category := rollout.get("category"), str) and category:
            groups.setdefault(f"{category}/", []).append(rollout)
    metrics: dict[str, float] = {}
    for group, members in groups.items():
        pairs = [(rollout.get("verdict_gen_base"), rollout.get("verdict_base_gen")) for rollout in members]
        outcomes, invalid = battle_outcomes(pairs, weight)
        for key, value in arena_elo(outcomes, invalid, rounds, seed).items():
            metrics[f"{prefix}/{group}{key}"] = value
    return metrics
