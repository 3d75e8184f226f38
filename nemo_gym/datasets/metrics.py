"""The metrics `gym dataset collate` keeps next to each dataset: example count, tools, JSON word count, user
turns, temperature and every other numeric field as count/average/min/max/standard deviation, text fields as
unique/total counts, and key counts, in constant memory.

Standard deviations are sample ones (n - 1 denominator, 0 for fewer than two values), as in the metrics
files shipped with the example data; statistics are rounded as NeMo Gym rounds them (2 decimals, or 3
significant digits below 1) so that the files stay readable, stable across platforms, and equal to its own.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from pydantic import ValidationError

from nemo_gym.datasets.prompts import RUN_REQUEST_KEY
from nemo_gym.wire.rows import BaseRunRequest

WORDS_KEY = "Json-dumped number of words (proxy for token count)"
MEASURES = ("Number of tools", WORDS_KEY, "Number of turns", "Temperature")
STATISTIC_DECIMALS = 2


def rounded_statistic(value: float) -> float:
    """`value` to 2 decimals, or to 3 significant digits when that keeps more (0.548, not 0.55), as NeMo
    Gym writes its metrics files."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, max(STATISTIC_DECIMALS, 2 - math.floor(math.log10(abs(value)))))


class ValueStatistics:
    """Count, mean, spread and range of a numeric field, kept in constant memory (Welford's update)."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self.squares = 0.0
        self.low = math.inf
        self.high = -math.inf

    def add(self, value: Any, times: int) -> None:
        """`times` copies of `value` (a repeated line); anything but a number is ignored."""
        if not _is_number(value):
            return
        total = self.count + times
        delta = float(value) - self.mean
        self.mean += delta * times / total
        self.squares += delta * delta * self.count * times / total
        self.count = total
        self.low, self.high = min(self.low, value), max(self.high, value)

    def summary(self) -> dict[str, Any]:
        deviation = math.sqrt(self.squares / (self.count - 1)) if self.count > 1 else 0.0
        return {
            "Total # non-null values": self.count,
            "Average": rounded_statistic(self.mean),
            "Min": rounded_statistic(float(self.low)) if self.count else 0.0,
            "Max": rounded_statistic(float(self.high)) if self.count else 0.0,
            "Standard deviation": rounded_statistic(deviation),
        }


class TextStatistics:
    """How many strings a field holds and how many differ (kept as short digests, not the strings)."""

    def __init__(self) -> None:
        self.total = 0
        self.digests: set[bytes] = set()

    def add(self, value: Any, times: int) -> None:
        if isinstance(value, str):
            self.total += times
            self.digests.add(hashlib.blake2b(value.encode(), digest_size=16).digest())

    def summary(self) -> dict[str, Any]:
        return {"unique_count": len(self.digests), "total_count": self.total}


class DatasetMetrics:
    """Statistics over run-request rows; rows that are not run requests are only counted as offending.

    Every other top-level field gets numeric statistics if it holds numbers and text statistics if it
    holds strings; a list field is measured over its elements."""

    def __init__(self) -> None:
        self.examples = 0
        self.offending_lines: list[int] = []
        self.measures = {name: ValueStatistics() for name in MEASURES}
        self.fields: dict[str, ValueStatistics | TextStatistics] = {}
        self.key_counts: dict[str, int] = {}

    def add(self, row: dict[str, Any], line_number: int, times: int) -> None:
        try:
            BaseRunRequest.model_validate(row)
        except ValidationError:
            self.offending_lines.append(line_number)
            return
        self.examples += times
        params = row[RUN_REQUEST_KEY]
        tools = params.get("tools")
        self.measures["Number of tools"].add(len(tools) if tools is not None else None, times)
        self.measures[WORDS_KEY].add(len(json.dumps(params).split()), times)
        self.measures["Number of turns"].add(_user_turns(params.get("input")), times)
        self.measures["Temperature"].add(params.get("temperature"), times)
        for key, value in row.items():
            self.key_counts[key] = self.key_counts.get(key, 0) + times
            if key not in MEASURES:
                self._add_field(key, value, times)

    def _add_field(self, key: str, value: Any, times: int) -> None:
        for element in value if isinstance(value, list) else [value]:
            statistics = self.fields.get(key)
            if statistics is None:
                if _is_number(element):
                    statistics = self.fields[key] = ValueStatistics()
                elif isinstance(element, str):
                    statistics = self.fields[key] = TextStatistics()
                else:
                    continue
            statistics.add(element, times)

    def summary(self) -> dict[str, Any]:
        measured = {name: values.summary() for name, values in self.measures.items()}
        fields = {name: values.summary() for name, values in self.fields.items()}
        return {"Number of examples": self.examples, **measured, **fields, "Key counts": self.key_counts}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _user_turns(messages: Any) -> int:
    """A plain-string input is one user turn; otherwise count the messages whose role is `user`."""
    if isinstance(messages, str):
        return 1
    return sum(1 for message in messages or [] if isinstance(message, dict) and message.get("role") == "user")
