"""EvalPlus's released problem files (HumanEvalPlus, MbppPlus: gzipped JSON lines with the inputs but not
the outputs) as benchmark rows that carry their whole problem, for the human_eval and mbpp benchmarks.

The expected outputs are the reference solution's values, computed once here by running it through the
same harness and sandbox as the answers, so both sides' values are normalised alike (tuples as lists,
sets sorted). JSON holds tuples, sets and complex numbers only as lists and strings; where the task's
example assert (MBPP+ prompts have one) passes such a literal, the problem records the argument's shape and
the harness rebuilds it. An input the reference still cannot answer is dropped and counted; a task left
without base inputs is dropped.
"""

from __future__ import annotations

import ast
import asyncio
import gzip
import json
import os
from typing import Any

from nemo_gym.config.errors import ConfigError
from nemo_gym.sandbox import SandboxLimits, SandboxSlots, SandboxUnavailableError
from resources_servers.evalplus.app import run_harness

REFERENCE_CALL_SECONDS = 10.0
REFERENCE_OUTPUT_BYTES = 256 * 1024 * 1024
REFERENCE_LIMITS = SandboxLimits(
    memory_mb=2048,
    max_processes=4,
    output_bytes=REFERENCE_OUTPUT_BYTES,
    file_size_mb=REFERENCE_OUTPUT_BYTES // (1024 * 1024),
)
GROUPS = ("base", "plus")


def read_release(blob: bytes) -> list[dict[str, Any]]:
    """The problems of a release file (gzipped JSON lines), read with the standard json module, which keeps
    integers beyond 64 bits and non-finite floats."""
    return [json.loads(line) for line in gzip.decompress(blob).decode("utf-8").splitlines() if line.strip()]


def literal_shape(node: ast.expr) -> dict[str, Any] | None:
    """What JSON loses of a literal: a tuple, set or complex number, or a list of such (None: nothing)."""
    kinds = {ast.Tuple: "tuple", ast.Set: "set", ast.List: "list"}
    if type(node) in kinds:
        item_shapes = [literal_shape(item) for item in node.elts]  # type: ignore[attr-defined]
        items = (
            item_shapes[0] if item_shapes and all(shape == item_shapes[0] for shape in item_shapes) else None
        )
        return (
            None if type(node) is ast.List and items is None else {"kind": kinds[type(node)], "items": items}
        )
    try:
        return {"kind": "complex"} if isinstance(ast.literal_eval(node), complex) else None
    except (ValueError, TypeError):
        return None


def argument_shapes(prompt: str, entry_point: str) -> list[dict[str, Any] | None] | None:
    """The shapes of the arguments of the first call of `entry_point` in the prompt's assert lines, or None
    when no argument needs one (or there is no such call)."""
    for line in prompt.splitlines():
        if not line.startswith("assert "):
            continue
        try:
            tree = ast.parse(line)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == entry_point:
                shapes = [literal_shape(argument) for argument in node.args]
                return shapes if any(shapes) else None
    return None


async def reference_problem(release_row: dict[str, Any], sandbox: SandboxSlots) -> dict[str, Any]:
    """The row's problem with the inputs its reference answers and their outputs; `dropped` counts the rest."""
    inputs = {group: release_row[f"{group}_input"] for group in GROUPS}
    calls = sum(len(group_inputs) for group_inputs in inputs.values())
    budget = (REFERENCE_CALL_SECONDS + 1) * calls + 5
    shapes = argument_shapes(release_row["prompt"], release_row["entry_point"])
    spec = {
        "time_limit": REFERENCE_CALL_SECONDS,
        "groups": inputs,
        "keep_going": True,
        "argument_shapes": shapes,
    }
    code = release_row["prompt"] + release_row["canonical_solution"]
    reports, _ = await run_harness(code, release_row["entry_point"], spec, sandbox, budget)
    values = {(report["group"], report["index"]): report["value"] for report in reports if "value" in report}
    problem: dict[str, Any] = {
        "task_id": release_row["task_id"],
        "entry_point": release_row["entry_point"],
        # EvalPlus compares floats within 1e-6 when a task's atol is 0.
        "atol": release_row.get("atol") or 1e-6,
        "argument_shapes": shapes,
        "dropped": 0,
    }
    for group in GROUPS:
        kept = [index for index in range(len(inputs[group])) if (group, index) in values]
        problem[f"{group}_input"] = [inputs[group][index] for index in kept]
        problem[f"{group}_expected"] = [values[group, index] for index in kept]
        problem["dropped"] += len(inputs[group]) - len(kept)
    return problem


async def _reference_problems(
    release_rows: list[dict[str, Any]], sandbox: SandboxSlots
) -> list[dict[str, Any]]:
    return await asyncio.gather(*(reference_problem(row, sandbox) for row in release_rows))


def benchmark_rows(release_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Task rows: `question` (the prompt, four spaces as a tab, as NeMo Gym 0.7 writes it), `task_id`,
    `entry_point`, and `verifier_metadata` with the task id and the problem as JSON text."""
    try:
        sandbox = SandboxSlots(REFERENCE_LIMITS, os.cpu_count() or 1)
    except SandboxUnavailableError as error:
        raise ConfigError(f"preparing runs the reference solutions in the sandbox: {error}") from None
    problems = asyncio.run(_reference_problems(release_rows, sandbox))
    rows, dropped_inputs, dropped_tasks = [], 0, []
    for release_row, problem in zip(release_rows, problems, strict=True):
        dropped_inputs += problem.pop("dropped")
        if not problem["base_input"]:
            dropped_tasks.append(problem["task_id"])
            continue
        rows.append(
            {
                "question": release_row["prompt"].replace("    ", "\t"),
                "task_id": problem["task_id"],
                "entry_point": problem["entry_point"],
                "verifier_metadata": {"task_id": problem["task_id"], "problem": json.dumps(problem)},
            }
        )
    if dropped_inputs or dropped_tasks:
        print(
            f"The reference solutions could not answer {dropped_inputs} input(s); dropped them, and "
            f"{len(dropped_tasks)} task(s) left without base inputs: {', '.join(dropped_tasks) or 'none'}"
        )
    return rows
