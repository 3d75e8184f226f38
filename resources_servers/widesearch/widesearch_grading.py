"""WideSearch table grading without the judge: reading the policy's Markdown table, the rule-based column
checks, and the row/item precision, recall and F1 that turn per-cell scores into the grade."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

import dateparser

from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics

PREPROCESSORS = ("norm_str", "extract_number", "norm_date")
RULE_METRICS = ("exact_match", "url_match", "number_near", "date_near")
METRICS = (*RULE_METRICS, "llm_judge")
SCORE_NAMES = (
    "score",
    "precision_by_row",
    "recall_by_row",
    "f1_by_row",
    "precision_by_item",
    "recall_by_item",
    "f1_by_item",
)
DATE_SETTINGS = {"PREFER_DAY_OF_MONTH": "first"}
DATE_NEAR_DAYS = 31

MARKDOWN_FENCE = re.compile(r"```markdown(.*?)```", re.DOTALL)
PIPE_LINE = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
JSON_FENCE = re.compile(r"```json\s*(\{.*?\})\s*```", re.DOTALL)
NUMBER = re.compile(r"[-+]?\d*\.\d+%?|[-+]?\d+\.?\d*%?")
URL = re.compile(r"https?://\S+")


class UnparsableTable(ValueError):
    """The policy's table exists but cannot be read as a header and rows."""


def norm_column(name: str) -> str:
    """Column names compare lower-case with no spaces ("Release Date" == "releasedate")."""
    return name.strip().lower().replace(" ", "")


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") else inner
    return [cell.strip() for cell in inner.split("|")]


def _is_separator(line: str) -> bool:
    return set(line.strip()) <= set("|-: ") and "-" in line


def extract_table(text: str) -> tuple[list[str], list[dict[str, str]]] | None:
    """The first ```markdown block's table, else the last run of `| ... |` lines; None when there is no
    table. Answers the normalized header and the rows, dicts keyed by normalized header names; a short row is padded with "", a row with more
    cells than the header, or a header with repeated or empty names, is `UnparsableTable`."""
    fenced = MARKDOWN_FENCE.findall(text)
    if fenced:
        block = fenced[0]
    else:
        runs: list[list[str]] = [[]]
        for line in text.splitlines():
            if PIPE_LINE.match(line):
                runs[-1].append(line)
            elif runs[-1]:
                runs.append([])
        block = "\n".join(next((run for run in reversed(runs) if run), []))
    lines = [line for line in block.splitlines() if "|" in line and not _is_separator(line)]
    if not lines:
        return None
    header = [norm_column(name) for name in _cells(lines[0])]
    if "" in header or len(set(header)) != len(header):
        raise UnparsableTable(
            f"the header row has empty or repeated column names: {lines[0].strip()[:100]!r}"
        )
    rows = []
    for number, line in enumerate(lines[1:], start=1):
        cells = _cells(line)
        if len(cells) > len(header):
            raise UnparsableTable(f"row {number} has {len(cells)} cells for {len(header)} columns")
        rows.append(dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=True)))
    return header, rows


def parse_date(value: str) -> datetime | None:
    try:
        return dateparser.parse(value, settings=DATE_SETTINGS)
    except (TypeError, ValueError, OverflowError):
        return None


def preprocess(value: str, name: str) -> str:
    if name == "norm_str":
        return value.lower().strip().replace(" ", "").replace("*", "")
    if name == "extract_number":
        numbers = NUMBER.findall(value.replace(",", ""))
        return numbers[0] if numbers else "NULL"
    if name == "norm_date":
        parsed = parse_date(value)
        return parsed.strftime("%Y-%m-%d") if parsed else value
    raise ValueError(f"unknown preprocess step {name!r}")


def _number(value: str) -> float:
    return float(value.rstrip("%")) / (100 if value.endswith("%") else 1)


def rule_score(response: str, target: str, metric: str, criterion: Any) -> float:
    """One cell by rule: exact_match (case-insensitive), url_match (same set of URL hosts), number_near
    (relative tolerance `criterion`; "%" divides by 100), date_near (within 31 days)."""
    if metric == "exact_match":
        return float(response.lower() == target.lower())
    if metric == "url_match":
        hosts = [{urlparse(url).netloc for url in URL.findall(value)} for value in (response, target)]
        return float(hosts[0] == hosts[1])
    if metric == "number_near":
        try:
            got, want = _number(response), _number(target)
        except ValueError:
            return float(response == target)
        return float(abs(got - want) <= abs(want) * float(criterion or 0.0))
    if metric == "date_near":
        got, want = parse_date(response), parse_date(target)
        if got is None or want is None:
            return float(got is None and want is None)
        return float(abs((got - want).days) <= DATE_NEAR_DAYS)
    raise ValueError(f"unknown metric {metric!r}")


def judge_json(text: str) -> dict[str, Any] | None:
    """The judge's JSON object: the last ```json block, else the whole answer; None when neither is one."""
    candidates = JSON_FENCE.findall(text)[-1:] or [text.strip()]
    try:
        value = json.loads(candidates[0])
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class TableScores:
    score: float
    precision_by_row: float
    recall_by_row: float
    f1_by_row: float
    precision_by_item: float
    recall_by_item: float
    f1_by_item: float


ZERO = TableScores(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def table_scores(
    cell_scores: Sequence[Sequence[float]], predicted_rows: int, gold_rows: int, columns: int
) -> TableScores:
    """Row level: a matched row counts its lowest cell score; item level: every cell score counts.
    Precision divides by the policy's rows (items), recall by the gold's; `score` is 1 only when all six
    numbers are 1."""
    true_rows = sum(min(row) for row in cell_scores)
    true_items = sum(sum(row) for row in cell_scores)
    p_row = true_rows / predicted_rows if predicted_rows else 0.0
    r_row = true_rows / gold_rows if gold_rows else 0.0
    p_item = true_items / (predicted_rows * columns) if predicted_rows and columns else 0.0
    r_item = true_items / (gold_rows * columns) if gold_rows and columns else 0.0
    numbers = (p_row, r_row, _f1(p_row, r_row), p_item, r_item, _f1(p_item, r_item))
    return TableScores(float(all(number == 1.0 for number in numbers)), *numbers)


def rollout_scores(rollout: dict[str, Any]) -> dict[str, float]:
    return {name: float(rollout.get(name) or 0.0) for name in SCORE_NAMES}


def widesearch_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """pass@k and pass@1[avg-of-k] of `score` (the success rate) and the row/item precision, recall and F1,
    in percent, over the graded rollouts (a failed judgment is counted in `judge_failure_rate` instead)."""
    graded = [[rollout for rollout in task if rollout.get("judge_failure") is None] for task in tasks]
    metrics, *_ = compute_pass_majority_metrics([task for task in graded if task], score_fn=rollout_scores)
    return metrics
