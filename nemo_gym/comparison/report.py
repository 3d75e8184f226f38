"""A comparison as people and programs read it: the terminal summary, `compare_report.md` (with the
per-task differences and an ASCII histogram of them) and `compare_report.json`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from nemo_gym.comparison.comparison import Comparison, Side, TaskDelta, TaskKey
from nemo_gym.comparison.statistics import MeanEstimate
from nemo_gym.text.tables import format_table

MAX_TASKS_LISTED = 50
HISTOGRAM_BINS = 11  # odd: zero is the middle of a bin
HISTOGRAM_WIDTH = 40


def terminal_summary(comparison: Comparison) -> str:
    """The side table, the difference, the test and the verdict, as `gym eval compare` prints them."""
    return "\n".join([format_table(_side_rows(comparison)), "", *_findings(comparison)])


def markdown_report(comparison: Comparison, command: str) -> str:
    lines = ["# gym eval compare", "", f"`{command}`", "", _markdown_table(_side_rows(comparison)), ""]
    lines += [f"- {finding}" for finding in _findings(comparison)]
    lines += ["", "## Per-task differences", "", *_changed_tasks(comparison.deltas)]
    lines += ["", "Histogram of the per-task differences (candidate - baseline):", "", "```"]
    lines += [delta_histogram([delta.delta for delta in comparison.deltas]), "```"]
    for side, keys in (("baseline", comparison.only_baseline), ("candidate", comparison.only_candidate)):
        if keys:
            lines += ["", f"## Tasks measured by the {side} only ({len(keys)})", "", _task_list(keys)]
    if comparison.key_metrics:
        rows = [("agent", "metric", "baseline", "candidate", "delta")]
        rows += [
            (metric.agent, metric.name, _number(metric.baseline), _number(metric.candidate),
             _signed(metric.candidate - metric.baseline))
            for metric in comparison.key_metrics
        ]  # fmt: skip
        lines += ["", "## Key metrics (aggregate metrics files)", "", _markdown_table(rows)]
    return "\n".join(lines) + "\n"


def json_report(comparison: Comparison, command: str) -> dict[str, Any]:
    """Every figure of the comparison, with the verdict, as plain JSON types."""
    report = dataclasses.asdict(comparison)
    for side in ("baseline", "candidate"):
        report[side]["path"] = str(report[side]["path"])
    for delta in report["deltas"]:
        delta["delta"] = delta["candidate"] - delta["baseline"]
    return {"command": command, "verdict": comparison.verdict, **report}


def delta_histogram(deltas: Sequence[float]) -> str:
    """One line per bin of equal width, symmetric around zero so that the middle bin holds the unchanged
    tasks and the sides read as losses (above it) and gains (below it)."""
    bound = max(abs(delta) for delta in deltas)
    if bound == 0:
        return f"{_signed(0)}  {'#' * HISTOGRAM_WIDTH}  {len(deltas)}"
    width = 2 * bound / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for delta in deltas:
        counts[min(int((delta + bound) / width), HISTOGRAM_BINS - 1)] += 1
    most = max(counts)
    lines = []
    for index, count in enumerate(counts):
        closing = "]" if index == HISTOGRAM_BINS - 1 else ")"
        label = f"[{_signed(-bound + index * width)}, {_signed(-bound + (index + 1) * width)}{closing}"
        lines.append(f"{label}  {'#' * round(HISTOGRAM_WIDTH * count / most):<{HISTOGRAM_WIDTH}}  {count}")
    return "\n".join(lines)


def _side_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    rows = [("side", "file", "agents", "tasks", "rollouts", "left out", "mean reward", "95% CI")]
    for name, side in (("baseline", comparison.baseline), ("candidate", comparison.candidate)):
        rows.append(
            (name, str(side.path), ",".join(side.agents), str(side.tasks), str(side.measured_rollouts),
             _left_out(side), _number(side.mean_reward.mean), _interval(side.mean_reward))
        )  # fmt: skip
    return rows


def _findings(comparison: Comparison) -> list[str]:
    difference, test = comparison.difference, comparison.test
    only = f"{len(comparison.only_baseline)} baseline-only, {len(comparison.only_candidate)} candidate-only"
    return [
        f"difference (candidate - baseline) over {difference.count} common task(s): "
        f"{_signed(difference.mean)}, 95% CI {_interval(difference)}; tasks not compared: {only}",
        f"test: {test.name}: {test.differing_tasks} task(s) differ, p = {test.p_value:.4g} ({test.method})",
        f"verdict: {comparison.verdict}",
    ]


def _left_out(side: Side) -> str:
    parts = [(side.masked, "masked"), (side.failed, "failed"), (side.without_reward, "no reward")]
    return ", ".join(f"{count} {why}" for count, why in parts if count) or "0"


def _changed_tasks(deltas: list[TaskDelta]) -> list[str]:
    changed = sorted(
        (delta for delta in deltas if delta.delta), key=lambda delta: (-abs(delta.delta), delta.task)
    )
    if not changed:
        return ["No task's mean reward changed."]
    rows = [("agent", "task", "baseline", "candidate", "delta", "rollouts (b/c)")]
    rows += [
        (delta.agent, str(delta.task), _number(delta.baseline), _number(delta.candidate), _signed(delta.delta),
         f"{delta.baseline_rollouts}/{delta.candidate_rollouts}")
        for delta in changed[:MAX_TASKS_LISTED]
    ]  # fmt: skip
    more = len(changed) - MAX_TASKS_LISTED
    tail = ["", f"... and {more} more changed task(s) in compare_report.json."] if more > 0 else []
    return [
        f"{len(changed)} of {len(deltas)} common task(s) changed, largest first:",
        "",
        _markdown_table(rows),
        *tail,
    ]


def _task_list(keys: list[TaskKey]) -> str:
    shown = ", ".join(f"{agent}#{task}" for agent, task in keys[:MAX_TASKS_LISTED])
    return shown + (f", ... ({len(keys) - MAX_TASKS_LISTED} more)" if len(keys) > MAX_TASKS_LISTED else "")


def _markdown_table(rows: list[tuple[str, ...]]) -> str:
    header, *body = rows
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(
        lines + ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    )


def _interval(estimate: MeanEstimate) -> str:
    if estimate.low is None or estimate.high is None:
        return "n/a (one task)"
    return f"[{_number(estimate.low)}, {_number(estimate.high)}]"


def _number(value: float) -> str:
    return f"{value:.3f}"


def _signed(value: float) -> str:
    return f"{value:+.3f}"
