"""When a collection with a dispatch budget stops starting rollouts (a hand-driven clock, no waiting)."""

from __future__ import annotations

import pytest

from nemo_gym.collection.dispatch_budget import DispatchBudget


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_without_a_budget_every_rollout_may_start() -> None:
    clock = Clock()
    budget = DispatchBudget(None, clock=clock)
    clock.now += 1e9
    assert not budget.limited and budget.may_start()


def test_a_fixed_margin_stops_starts_that_much_before_the_budget_ends() -> None:
    clock = Clock()
    budget = DispatchBudget(60, drain_margin_s=10, clock=clock)
    assert budget.may_start()  # the clock starts with the first start
    clock.now += 50
    assert budget.may_start()
    clock.now += 0.5
    assert not budget.may_start()


def test_the_adaptive_margin_is_the_75th_percentile_after_five_rollouts() -> None:
    clock = Clock()
    budget = DispatchBudget(100, clock=clock)
    assert budget.may_start()
    for duration in (10, 20, 30, 40):
        budget.finished(duration)
    assert budget.margin_s() == 0.0  # too few to judge
    budget.finished(50)
    assert budget.margin_s() == 40.0
    clock.now += 60
    assert budget.may_start()
    clock.now += 1
    assert not budget.may_start()


@pytest.mark.parametrize(
    ("budget_s", "margin_s", "field"), [(-1, None, "dispatch_budget_s"), (1, -1, "drain_margin_s")]
)
def test_negative_settings_are_refused_by_name(budget_s: float, margin_s: float | None, field: str) -> None:
    with pytest.raises(ValueError, match=f"{field} must be at least 0"):
        DispatchBudget(budget_s, margin_s)
