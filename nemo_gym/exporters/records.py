"""What the exporters log, shaped once for all of them: flat metric names from a collection's aggregate
entries, and a table of rollouts small enough for a dashboard (the full results stay in the JSONL file)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nemo_gym.config.server_refs import AGENT_REF_KEY

# Dashboards render tables of at most this many rows well.
MAX_TABLE_ROWS = 10_000
ROLLOUT_TABLE_COLUMNS = ["task", "rollout", "agent", "reward", "final_text"]


@dataclass
class RolloutTable:
    columns: list[str] = field(default_factory=lambda: list(ROLLOUT_TABLE_COLUMNS))
    rows: list[list[Any]] = field(default_factory=list)


def final_text(result: dict[str, Any]) -> str:
    """The text of the last assistant message of a rollout ("" when it ended on a tool call)."""
    for item in reversed((result.get("response") or {}).get("output") or []):
        if item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


def rollout_table(results: Iterable[dict[str, Any]]) -> RolloutTable:
    """The first MAX_TABLE_ROWS rollouts: task, rollout, agent, reward, final text."""
    table = RolloutTable()
    for result in results:
        if len(table.rows) >= MAX_TABLE_ROWS:
            break
        agent = (result.get(AGENT_REF_KEY) or {}).get("name")
        table.rows.append(
            [result.get("_ng_task_index"), result.get("_ng_rollout_index"), agent, result.get("reward"),
             final_text(result)]
        )  # fmt: skip
    return table


def primitive_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metrics.items() if isinstance(value, bool | int | float | str)}


def aggregate_metric_values(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """`<agent>/<metric>` for every primitive agent metric and `key_metrics/<agent>/<metric>`."""
    values: dict[str, Any] = {}
    for entry in entries:
        agent = entry[AGENT_REF_KEY]["name"]
        values.update(
            {f"{agent}/{key}": value for key, value in primitive_metrics(entry["agent_metrics"]).items()}
        )
        values.update(
            {
                f"key_metrics/{agent}/{key}": value
                for key, value in primitive_metrics(entry["key_metrics"]).items()
            }
        )
    return values
