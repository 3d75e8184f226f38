"""Grading of one terminal-agent turn (Terminus harness JSON) against the demonstrated one: it must parse,
fit its harness's schema, agree on whether the task is complete, and type nearly the same keystrokes.

The schemas are checked by hand rather than with a JSON-schema library: they are two flat objects, and a
hand check can say exactly which key is wrong, which is what a person reading a failed rollout needs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import StrEnum
from typing import Any


class FailureCode(StrEnum):
    """NeMo Gym's codes; `none` when the turn passed."""

    NONE = "none"
    JSON_PARSING_FAILED = "json_parsing_failed"
    SCHEMA_CHECK_FAILED = "schema_check_failed"
    TASK_COMPLETE_CHECK_FAILED = "task_complete_check_failed"
    COMMAND_CORRECTNESS_FAILED = "command_correctness_failed"
    UNKNOWN_HARNESS = "unknown_harness"
    JUDGE_EVALUATION_FAILED = "judge_evaluation_failed"
    UNKNOWN_ERROR = "unknown_error"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_string(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


@dataclass(frozen=True)
class Harness:
    """One Terminus output format: the top-level keys (required or not, with their type check), the
    command keys likewise, and the key that says the task is complete."""

    top: dict[str, tuple[bool, Callable[[Any], bool]]]
    command: dict[str, tuple[bool, Callable[[Any], bool]]]
    complete_key: str


HARNESSES: dict[str, Harness] = {
    "terminus_1": Harness(
        top={
            "state_analysis": (True, _is_string),
            "explanation": (True, _is_string),
            "commands": (True, _is_list),
            "is_task_complete": (True, _is_bool),
        },
        command={
            "keystrokes": (True, _is_string),
            "is_blocking": (True, _is_bool),
            "timeout_sec": (True, _is_number),
        },
        complete_key="is_task_complete",
    ),
    "terminus_2": Harness(
        top={
            "analysis": (True, _is_string),
            "plan": (True, _is_string),
            "commands": (True, _is_list),
            "task_complete": (False, _is_bool),
        },
        command={"keystrokes": (True, _is_string), "duration": (False, _is_number)},
        complete_key="task_complete",
    ),
}


def _object_problem(
    value: Any, keys: dict[str, tuple[bool, Callable[[Any], bool]]], where: str
) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is not an object"
    for key, (required, fits) in keys.items():
        if key not in value:
            if required:
                return f"{where} lacks {key!r}"
        elif not fits(value[key]):
            return f"{where}.{key} has the wrong type"
    extra = sorted(set(value) - set(keys))
    return f"{where} has unknown keys {extra}" if extra else None


def schema_problem(turn: dict[str, Any], harness: Harness) -> str | None:
    """Why `turn` does not fit the harness's schema (no extra keys anywhere), or None when it fits."""
    problem = _object_problem(turn, harness.top, "output")
    if problem is None:
        for index, command in enumerate(turn["commands"]):
            if problem := _object_problem(command, harness.command, f"commands[{index}]"):
                break
    return problem


def says_complete(turn: dict[str, Any]) -> bool:
    """Either harness's completion key; a missing key means not complete."""
    return bool(turn.get("task_complete") or turn.get("is_task_complete"))


def keystrokes(turn: dict[str, Any]) -> list[str]:
    commands = turn.get("commands")
    if not isinstance(commands, list):
        return []
    return [str(c["keystrokes"]) for c in commands if isinstance(c, dict) and "keystrokes" in c]


def keystroke_similarity(expected: dict[str, Any], actual: dict[str, Any]) -> float:
    """difflib ratio of the two turns' keystrokes, each joined in order with a space: the order of the
    commands matters, their split into command objects does not. Both typing nothing is a match."""
    wanted, typed = keystrokes(expected), keystrokes(actual)
    if not wanted or not typed:
        return 1.0 if not wanted and not typed else 0.0
    return SequenceMatcher(None, " ".join(wanted), " ".join(typed)).ratio()


def turn_text(text: str) -> str:
    """The model's text after its last `</think>`, stripped: reasoning before the JSON is not the turn."""
    return text.rsplit("</think>", 1)[-1].strip()


@dataclass
class TurnGrade:
    reward: float = 0.0
    failure_reason: FailureCode = FailureCode.NONE
    parsed_output: dict[str, Any] | None = None
    schema_problem: str | None = None
    schema_check_passed: bool = False
    task_complete_check_passed: bool = False
    similarity_score: float = -1.0
    string_similarity_passed: bool = False


def grade_turn(text: str, expected: dict[str, Any], harness_name: str, threshold: float | None) -> TurnGrade:
    """The checks in NeMo Gym's order; the first that fails sets `failure_reason` and the reward stays 0.
    With no threshold (string similarity disabled) the keystrokes are left to the judge:
    `command_correctness_failed` with no similarity computed."""
    harness = HARNESSES[harness_name]
    grade = TurnGrade()
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        grade.failure_reason = FailureCode.JSON_PARSING_FAILED
        return grade
    grade.parsed_output = parsed
    grade.schema_problem = schema_problem(parsed, harness)
    if grade.schema_problem is not None:
        grade.failure_reason = FailureCode.SCHEMA_CHECK_FAILED
        return grade
    grade.schema_check_passed = True
    if says_complete(parsed) != says_complete(expected):
        grade.failure_reason = FailureCode.TASK_COMPLETE_CHECK_FAILED
        return grade
    grade.task_complete_check_passed = True
    if threshold is None:
        grade.failure_reason = FailureCode.COMMAND_CORRECTNESS_FAILED
        return grade
    grade.similarity_score = keystroke_similarity(expected, parsed)
    if grade.similarity_score >= threshold:
        grade.string_similarity_passed, grade.reward = True, 1.0
    else:
        grade.failure_reason = FailureCode.COMMAND_CORRECTNESS_FAILED
    return grade
