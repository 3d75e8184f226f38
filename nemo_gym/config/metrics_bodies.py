"""The bodies of `/aggregate_metrics`: plain data, shared by the servers that answer it and the collector."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class AggregateMetricsRequest(BaseModel):
    """Body of `/aggregate_metrics`: the verify responses of one agent's rollouts."""

    verify_responses: list[dict[str, Any]]


class AggregateMetrics(BaseModel):
    """Answer of `/aggregate_metrics`."""

    group_level_metrics: list[dict[str, Any]] = []
    agent_metrics: dict[str, Any] = {}
    key_metrics: dict[str, Any] = {}
    repeat_level_metrics: list[dict[str, Any]] = []  # NeMo Gym 0.7: one entry per rollout index
    perf_summary: dict[str, Any] | None = None
