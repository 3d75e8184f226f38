"""AgentIF's constraint pipeline outside the judge: reading YES/NO, filling a row's judge prompt, running a
row's code checker in the sandbox, and the ISR/CSR metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nemo_gym.reward_profile import count_of
from nemo_gym.sandbox import SandboxSlots
from nemo_gym.text.extraction import without_reasoning

HARNESS = (Path(__file__).resolve().parent / "checker_harness.py").read_text(encoding="utf-8")
VERDICT = re.compile(r"\b(YES|NO)\b")
RESPONSE_SLOT = "{response}"
# Appended to a row's judge prompt that has no {response} slot.
RESPONSE_SUFFIX = "\n\nThe response to check:\n{response}"
DIMENSIONS = {"unconditional": "vanilla", "conditional": "condition", "example_driven": "example"}
TYPES = {"formatting": "formatting", "semantic": "semantic", "resource": "tool"}


def parse_yes_no(judge_text: str) -> bool | None:
    """The judge's last standalone YES or NO (in capitals, as the AgentIF prompts ask), None if it has none."""
    words = VERDICT.findall(without_reasoning(judge_text))
    return words[-1] == "YES" if words else None


def fill_prompt(template: str, text: str) -> str:
    """The row's judge prompt with the text in its {response} slot (a plain replace: these prompts hold
    literal braces, e.g. JSON examples)."""
    if RESPONSE_SLOT not in template:
        template += RESPONSE_SUFFIX
    return template.replace(RESPONSE_SLOT, text)


async def run_checker(source: str, text: str, sandbox: SandboxSlots) -> tuple[bool | None, str | None]:
    """(verdict, None), or (None, why) when the checker raised, returned a non-bool or hit a limit. The
    row's code runs only in the sandbox, never in this process."""
    files = {"harness.py": HARNESS, "checker.py": source}
    run = await sandbox.run_python("harness.py", stdin=text, files=files)
    if run.timed_out:
        return None, f"the checker ran out of time ({sandbox.limits.wall_seconds:g} s)"
    if run.signal is not None or run.exit_code:
        detail = f"signal {run.signal}" if run.signal is not None else f"exit status {run.exit_code}"
        return None, f"the checker stopped: {detail} {run.stderr[-200:]}".strip()
    try:
        report = json.loads(run.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, f"the checker printed no report: {run.stdout[-200:]!r}"
    if isinstance(report, dict) and isinstance(report.get("result"), bool):
        return report["result"], None
    return None, str(report.get("error") if isinstance(report, dict) else report)[:300]


def tally(constraint: dict[str, Any], verdict: bool, by_dimension: dict, by_type: dict) -> None:
    key = "n_true" if verdict else "n_false"
    dimension = constraint.get("dimension")
    if dimension in DIMENSIONS:
        by_dimension.setdefault(dimension, {"n_true": 0, "n_false": 0})[key] += 1
    kinds = constraint.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind in TYPES:
            by_type.setdefault(kind, {"n_true": 0, "n_false": 0})[key] += 1


def _count(rollout: dict[str, Any], *path: str) -> int:
    """The count at `path` in a verify answer sent back for aggregation (a missing level counts 0)."""
    value: Any = rollout
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return count_of(value, ".".join(path))


def agentif_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """ISR (rows whose scored constraints all passed, over rows with any scored), CSR (passed over scored
    constraints, corpus-wide), per dimension and type; rollouts whose judgment failed are left out."""
    rows = [rollout for task in tasks for rollout in task if rollout.get("judge_failure") is None]
    metrics: dict[str, Any] = {"count": len(rows), "n_null_total": sum(_count(r, "n_null") for r in rows)}
    n_true = sum(_count(r, "n_true") for r in rows)
    n_false = sum(_count(r, "n_false") for r in rows)
    if n_true + n_false:
        metrics["csr"] = n_true / (n_true + n_false)
    counted = sum(_count(r, "isr_counted") for r in rows)
    if counted:
        metrics["isr"] = sum(_count(r, "isr_pass") for r in rows) / counted
    for field, names, prefix in (("by_dimension", DIMENSIONS, "by_dimension"), ("by_type", TYPES, "by_type")):
        for key, name in names.items():
            true = sum(_count(r, field, key, "n_true") for r in rows)
            false = sum(_count(r, field, key, "n_false") for r in rows)
            if true + false:
                metrics[f"{prefix}/{name}/accuracy"] = true / (true + false)
    rewards = [float(r["reward"]) for r in rows if isinstance(r.get("reward"), int | float)]
    if rewards:
        metrics["mean_reward"] = sum(rewards) / len(rewards)
    return metrics
