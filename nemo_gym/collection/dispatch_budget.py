"""When to stop starting rollouts (NeMo Gym 0.7's `dispatch_budget_s` and `drain_margin_s`).

A collection with a dispatch budget starts rollouts only while there is time left in it for one to finish:
no rollout starts later than `budget - margin` seconds after the first. The margin is `drain_margin_s` when
given, else adaptive: 0 until five rollouts have finished, then the 75th percentile of their durations.
Rows not started write nothing, so a resumed collection picks them up.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable

ADAPTIVE_AFTER_COMPLETIONS = 5
DURATIONS_KEPT = 1000  # the recent durations the adaptive margin is taken from


class DispatchBudget:
    def __init__(
        self,
        budget_s: float | None,
        drain_margin_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if budget_s is not None and budget_s < 0:
            raise ValueError(f"dispatch_budget_s must be at least 0, got {budget_s}")
        if drain_margin_s is not None and drain_margin_s < 0:
            raise ValueError(f"drain_margin_s must be at least 0, got {drain_margin_s}")
        self._budget_s = budget_s
        self._fixed_margin_s = drain_margin_s
        self._clock = clock
        self._started_at: float | None = None
        self._durations: deque[float] = deque(maxlen=DURATIONS_KEPT)
        self._adaptive_margin_s: float | None = None  # worked out again only after a rollout finishes

    @property
    def limited(self) -> bool:
        return self._budget_s is not None

    def margin_s(self) -> float:
        if self._fixed_margin_s is not None:
            return self._fixed_margin_s
        if len(self._durations) < ADAPTIVE_AFTER_COMPLETIONS:
            return 0.0
        if self._adaptive_margin_s is None:
            self._adaptive_margin_s = statistics.quantiles(self._durations, n=4, method="inclusive")[2]
        return self._adaptive_margin_s

    def may_start(self) -> bool:
        """Whether a rollout may start now; the first call starts the budget's clock."""
        now = self._clock()
        if self._started_at is None:
            self._started_at = now
        if self._budget_s is None:
            return True
        return now - self._started_at + self.margin_s() <= self._budget_s

    def finished(self, duration_s: float) -> None:
        """A rollout took `duration_s`: the adaptive margin learns from it."""
        self._durations.append(duration_s)
        self._adaptive_margin_s = None
