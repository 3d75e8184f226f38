"""spider2_lite's extraction and comparison (Spider 2.0-Lite's official rule, as NeMo Gym applies it).

A result matches a gold result when every gold column (or only the `condition_cols` among them) equals
some column of the predicted result: extra predicted columns and column order do not matter. Two columns
are equal when they have the same length and, value by value (each column sorted first when
`ignore_order`), numbers agree within 0.01 and anything else is equal. NULL and NaN count as 0, and text
that reads as a number counts as that number (gold results stored as JSON are often all strings).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

SQL_FENCE = re.compile(r"```sql\s*(.*?)```", re.DOTALL | re.IGNORECASE)
ANY_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
STATEMENT_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|CREATE|ALTER|DROP)\s", re.IGNORECASE)
RAW_START = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WITH)\s", re.IGNORECASE)
ABS_TOL = 1e-2

Rows = Sequence[Sequence[Any]]


def extract_spider_sql(text: str) -> str | None:
    """The last ```sql block; else the last plain fenced block that starts like a statement; else the raw
    text from the first SELECT/WITH/... keyword to the last semicolon. None when there is none."""
    labelled = [body.strip() for body in SQL_FENCE.findall(text) if body.strip()]
    if labelled:
        return labelled[-1]
    statements = [
        body.strip() for body in ANY_FENCE.findall(text) if STATEMENT_START.match(body.strip() + " ")
    ]
    if statements:
        return statements[-1]
    start = RAW_START.search(text)
    if start is None:
        return None
    end = text.rfind(";")
    raw = text[start.start() : end if end > start.start() else len(text)].strip()
    return raw or None


def _value(value: Any) -> Any:
    if isinstance(value, str):
        for kind in (int, float):
            try:
                value = kind(value)
                break
            except ValueError:
                continue
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 0
    return value


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers by value, then everything else by its text: any mix of types sorts."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value))
    return (1, str(value))


def _same_column(gold: list[Any], predicted: list[Any], ignore_order: bool) -> bool:
    if len(gold) != len(predicted):
        return False
    if ignore_order:
        gold, predicted = sorted(gold, key=_sort_key), sorted(predicted, key=_sort_key)
    for left, right in zip(gold, predicted, strict=True):
        numbers = all(isinstance(side, (int, float)) for side in (left, right))
        if not (math.isclose(float(left), float(right), abs_tol=ABS_TOL) if numbers else left == right):
            return False
    return True


def matches_result(gold: Rows, predicted: Rows, condition_cols: Sequence[int], ignore_order: bool) -> bool:
    """Every chosen gold column is some predicted column (see the module docstring)."""
    if not gold or not predicted:
        return not gold and not predicted
    width = len(gold[0])
    chosen = [index for index in condition_cols if 0 <= index < width] or list(range(width))
    predicted_columns = [[_value(row[j]) for row in predicted] for j in range(len(predicted[0]))]
    return all(
        any(
            _same_column([_value(row[i]) for row in gold], column, ignore_order)
            for column in predicted_columns
        )
        for i in chosen
    )


def matches_any_gold(
    predicted: Rows, gold_results: Sequence[Rows], condition_cols: Sequence[Any] | None, ignore_order: bool
) -> bool:
    """Whether `predicted` matches one of the gold results. `condition_cols` is one list of column indexes
    for every gold result, or one list per gold result."""
    if condition_cols and all(isinstance(cols, list) for cols in condition_cols):
        per_gold = [list(cols) for cols in condition_cols]
    else:
        per_gold = [list(condition_cols or [])] * len(gold_results)
    return any(
        matches_result(gold, predicted, cols, ignore_order)
        for gold, cols in zip(gold_results, per_gold, strict=False)
    )


def compare_with_gold(
    gold_rows: Rows | None,
    predicted: Rows,
    gold_results: Sequence[Rows] | None,
    condition_cols: Sequence[Any] | None,
    ignore_order: bool,
) -> bool:
    """The worker-side comparison: against the gold query's rows when it ran, else the stored results."""
    golds = [gold_rows] if gold_rows is not None else list(gold_results or [])
    return matches_any_gold(predicted, golds, condition_cols, ignore_order)
