"""Milestone similarity, ToolSandbox's reward: how closely the episode's trajectory of world snapshots meets
each milestone, in order, averaged; 0 when any minefield is met at all.

A trajectory is the list of snapshots the episode went through: the initial world, then one per tool call
(the world after it and the call's trace) and one per text reply of the agent. A milestone is a list of
constraints; its similarity at a snapshot is the geometric mean of its constraints' similarities there
(each in [0, 1]). Milestones are matched to snapshots in their order (a later milestone never to an
earlier snapshot) so that the sum of similarities is the largest; the reward is that sum over the number
of milestones. A minefield is scored the same way on its own; any minefield with a similarity above 0
makes the reward 0, as in ToolSandbox.

Constraint kinds (`kind`):
  tool_trace    a call of `tool_name` at that snapshot whose arguments include `arguments` (0/1)
  addition      the rows added to `database` since the start match `rows`
  removal       the rows removed from `database` since the start match `rows`
  state         the whole `database` matches `rows` (same row count)
  agent_reply   the agent's text reply at that snapshot matches `text`
Rows are compared column by column with the measure named in `columns` (exact by default; rouge_l, contains,
close with `atol`); a row's similarity is the geometric mean of its columns', and a row set's the geometric
mean over the best one-to-one pairing of rows (0 if the counts differ).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field
from rouge_score import rouge_scorer

Measure = Literal["exact", "rouge_l", "contains", "close"]
MAX_PAIRED_ROWS = 6  # rows compared by trying every pairing: 720 pairings at most
_ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


class Constraint(BaseModel):
    kind: Literal["tool_trace", "addition", "removal", "state", "agent_reply"]
    tool_name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    database: Literal["contact", "messaging", "reminder", "setting"] | None = None
    rows: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_PAIRED_ROWS)
    columns: dict[str, Measure] = Field(default_factory=dict)
    atol: dict[str, float] = Field(default_factory=dict)
    text: str | None = None
    measure: Measure = "rouge_l"


class Milestone(BaseModel):
    constraints: list[Constraint] = Field(min_length=1)


@dataclass
class Snapshot:
    tables: dict[str, list[dict[str, Any]]]
    traces: list[dict[str, Any]] = field(default_factory=list)
    reply: str | None = None


@dataclass
class Evaluation:
    milestone_similarity: float
    milestone_mapping: list[tuple[int, float]]  # (snapshot index, similarity) per milestone
    minefield_similarities: list[float]

    @property
    def minefield_hit(self) -> bool:
        return any(similarity > 0 for similarity in self.minefield_similarities)

    @property
    def reward(self) -> float:
        return 0.0 if self.minefield_hit else self.milestone_similarity


def value_similarity(measure: Measure, actual: Any, expected: Any, atol: float | None = None) -> float:
    if measure == "rouge_l":
        if not isinstance(actual, str) or not isinstance(expected, str):
            return 0.0
        return float(_ROUGE.score(expected, actual)["rougeL"].fmeasure)
    if measure == "contains":
        return float(isinstance(actual, str) and str(expected).lower() in actual.lower())
    if measure == "close":
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (actual, expected))
        return float(numbers and abs(actual - expected) <= (atol or 0.0))
    return float(actual == expected)


def row_similarity(actual: dict[str, Any], expected: dict[str, Any], constraint: Constraint) -> float:
    scores = [
        value_similarity(
            constraint.columns.get(column, "exact"), actual.get(column), value, constraint.atol.get(column)
        )
        for column, value in expected.items()
    ]
    return geometric_mean(scores)


def rows_similarity(
    actual: list[dict[str, Any]], expected: list[dict[str, Any]], constraint: Constraint
) -> float:
    if len(actual) != len(expected):
        return 0.0
    if not expected:
        return 1.0
    if len(actual) > MAX_PAIRED_ROWS:
        return 0.0
    matrix = [[row_similarity(a, e, constraint) for a in actual] for e in expected]
    return max(
        geometric_mean([matrix[i][j] for i, j in enumerate(order)])
        for order in itertools.permutations(range(len(actual)))
    )


def geometric_mean(scores: list[float]) -> float:
    if not scores or min(scores) <= 0:
        return 0.0
    return math.exp(sum(math.log(score) for score in scores) / len(scores))


def _difference(left: list[dict[str, Any]], right: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Rows of `left` not in `right` (as a multiset); None when `right` is not contained in `left`."""
    remaining = list(left)
    for row in right:
        if row not in remaining:
            return None
        remaining.remove(row)
    return remaining


def constraint_similarity(constraint: Constraint, snapshot: Snapshot, initial: Snapshot) -> float:
    if constraint.kind == "tool_trace":
        return float(
            any(
                trace["tool_name"] == constraint.tool_name
                and all(
                    value_similarity(
                        "close" if name in constraint.atol else "exact",
                        trace["arguments"].get(name),
                        value,
                        constraint.atol.get(name),
                    )
                    == 1.0
                    for name, value in constraint.arguments.items()
                )
                for trace in snapshot.traces
            )
        )
    if constraint.kind == "agent_reply":
        if snapshot.reply is None or constraint.text is None:
            return 0.0
        return value_similarity(constraint.measure, snapshot.reply, constraint.text)
    assert constraint.database is not None
    now, before = snapshot.tables[constraint.database], initial.tables[constraint.database]
    if constraint.kind == "state":
        return rows_similarity(now, constraint.rows, constraint)
    changed = _difference(now, before) if constraint.kind == "addition" else _difference(before, now)
    if changed is None:
        return 0.0
    return rows_similarity(changed, constraint.rows, constraint)


def milestone_similarity(milestone: Milestone, snapshot: Snapshot, initial: Snapshot) -> float:
    return geometric_mean([constraint_similarity(c, snapshot, initial) for c in milestone.constraints])


def evaluate(
    trajectory: list[Snapshot], milestones: list[Milestone], minefields: list[Milestone]
) -> Evaluation:
    """Best in-order matching of milestones to snapshots (dynamic programming over (milestone, snapshot))."""
    initial = trajectory[0]
    scores = [[milestone_similarity(m, s, initial) for s in trajectory] for m in milestones]
    best: list[list[float]] = []
    choice: list[list[int]] = []
    for i, row in enumerate(scores):
        best.append([])
        choice.append([])
        running, running_at = -1.0, 0
        for j, score in enumerate(row):
            if i == 0:
                best[i].append(score)
                continue
            if best[i - 1][j] > running:
                running, running_at = best[i - 1][j], j
            best[i].append(running + score)
            choice[i].append(running_at)
    mapping: list[tuple[int, float]] = []
    if milestones:
        last = max(range(len(trajectory)), key=lambda j: (best[-1][j], j))
        for i in reversed(range(len(milestones))):
            mapping.append((last, scores[i][last]))
            if i:
                last = choice[i][last]
        mapping.reverse()
    similarity = sum(score for _, score in mapping) / len(milestones) if milestones else 1.0
    minefield_scores = [max(milestone_similarity(m, s, initial) for s in trajectory) for m in minefields]
    return Evaluation(similarity, mapping, minefield_scores)
