"""Grading of one SWE-agent step against the demonstrated one, in layers that get dearer as they go:
which tool (by name or by family), what it acts on (file, editor sub-command, shell verb and paths),
how close its arguments are (difflib ratio), and for continuous rewards a small cost for large edits.

Agent frameworks name the same tool differently (`str_replace_editor`, `edit_file`, `apply_patch`,
`execute_bash`, `shell`, ...), so names are mapped to a family and two calls of one family match.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import StrEnum
from typing import Any, Literal

# Families of tool names. Names are compared without case, `_` and `-`, so `StrReplaceEditor`,
# `str_replace_editor` and `str-replace-editor` are one name.
TOOL_FAMILIES: dict[str, tuple[str, ...]] = {
    "edit": (
        "str_replace_editor", "text_editor", "file_editor", "code_editor", "edit_file", "modify_file",
        "update_file", "file_edit", "edit", "modify", "apply_patch", "patch_file", "apply_diff",
        "apply_changes", "write", "write_file", "save_file", "create_file",
    ),
    "bash": (
        "execute_bash", "run_bash", "bash_exec", "shell_run", "shell", "bash", "terminal", "shell_command",
        "shell_cmd", "run_shell_cmd", "exec_command", "exec_cmd",
    ),
    "search": (
        "grep", "search_text", "find_pattern", "text_search", "glob", "find_files", "file_glob",
        "match_files", "grep_files", "search_files", "find_in_files", "code_search", "list_dir", "ls",
        "show_dir", "ls_dir", "list_directory",
    ),
    "read": (
        "read", "read_file", "view_file", "cat_file", "view", "file_view", "inspect", "show_file",
        "read_file_content",
    ),
    "finish": ("finish", "submit"),
    "think": ("think",),
    "planning": (
        "task_tracker", "todo_tracker", "plan_tracker", "todo_read", "todo_write", "update_plan",
        "list_tasks", "update_tasks", "read_todos", "write_todos", "edit_plan", "modify_plan",
    ),
}  # fmt: skip
UNKNOWN_FAMILY = "unknown"


def name_key(name: str) -> str:
    """A tool name without case, underscores or hyphens, so snake and camel spellings meet."""
    return re.sub(r"[_\-]", "", name).lower()


_FAMILY_OF = {name_key(name): family for family, names in TOOL_FAMILIES.items() for name in names}

PATH_KEYS = ("path", "file", "file_path", "filename", "file_name")
COMMAND_KEYS = ("command", "cmd")
# A command farther than this from the gold one is another command even with the same verb (`cd a`
# vs `cd b/c/d`); the full similarity decides the rest.
BASH_TARGET_FLOOR = 0.3
# difflib is quadratic: only this many leading characters of each side are compared.
SIMILARITY_CHARS = 2000
# An edit this long or longer gets the whole diff-size cost.
DIFF_SIZE_FULL = 500
# Paths in a shell command: absolute, ./ or ../ relative, or any word holding a slash.
_COMMAND_PATH = re.compile(
    r"(?:^|(?<=[\s='\"(]))(/[\w.\-]+(?:/[\w.\-]+)*|\.\.?/[\w./\-]+|[\w.\-]+/[\w./\-]+)"
)


class FailureCode(StrEnum):
    """Why a step earned nothing (NeMo Gym's codes; `none` when it passed every enabled layer)."""

    NONE = "none"
    EXPECTED_ACTION_INVALID = "expected_action_invalid"
    MODEL_OUTPUT_INVALID = "model_output_invalid"
    TOOL_NAME_MISMATCH = "tool_name_mismatch"
    TARGET_MISMATCH = "target_mismatch"
    SIMILARITY_BELOW_THRESHOLD = "similarity_below_threshold"
    UNKNOWN_ERROR = "unknown_error"


@dataclass(frozen=True)
class Call:
    """A tool call: its name, family and arguments (an empty dict when they were not a JSON object)."""

    name: str
    arguments: dict[str, Any]

    @property
    def family(self) -> str:
        return _FAMILY_OF.get(name_key(self.name), UNKNOWN_FAMILY)


@dataclass(frozen=True)
class GradingSettings:
    reward_mode: Literal["binary", "continuous"] = "binary"
    enable_target_match: bool = True
    enable_argument_similarity: bool = True
    similarity_threshold: float = 0.4
    similarity_full_credit: float = 0.8
    enable_diff_size_shaping: bool = True
    diff_size_alpha: float = 0.1


@dataclass
class Grade:
    reward: float = 0.0
    tool_name_match: bool = False
    target_match: bool | None = None
    similarity_score: float | None = None
    diff_size_penalty: float | None = None
    failure_reason: FailureCode = FailureCode.NONE


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Arguments as a dict: a dict as is, a JSON-object string decoded, anything else empty."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
        return decoded if isinstance(decoded, dict) else {}
    return {}


def first_of(arguments: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        if key in arguments:
            return str(arguments[key]).strip()
    return ""


def path_tail(path: str, parts: int = 3) -> str:
    """The last `parts` components of a path: repository roots differ between frameworks
    (`/testbed/src/x.py` vs `/workspace/repo/src/x.py`) while the tail names the file."""
    return "/".join(path.strip("/").split("/")[-parts:])


def edit_text(arguments: dict[str, Any]) -> str:
    """What an edit writes: old and new strings, a patch or diff, or a whole file's content."""
    if "new_str" in arguments:
        return f"{arguments.get('old_str', '')}\n{arguments['new_str']}"
    for key in ("patch", "diff"):
        if key in arguments:
            return str(arguments[key])
    if "content" in arguments or "file_text" in arguments:
        return str(arguments.get("content", arguments.get("file_text", "")))
    return ""


def command_verb(command: str) -> str:
    """The program a shell command runs, without its directory (`/usr/bin/python` → `python`)."""
    words = command.split()
    return words[0].rsplit("/", 1)[-1] if words else ""


def command_paths(command: str) -> list[str]:
    return [path for path in _COMMAND_PATH.findall(command) if len(path) > 2 and not path.startswith("--")]


def view_range(raw: Any) -> tuple[int, int] | None:
    """An editor `view_range` as (start, end), from a two-item list or its JSON text; else None."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    if isinstance(raw, list) and len(raw) == 2:
        try:
            return int(raw[0]), int(raw[1])
        except (TypeError, ValueError):
            return None
    return None


def similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a[:SIMILARITY_CHARS], b[:SIMILARITY_CHARS]).ratio()


def names_match(actual: Call, expected: Call) -> bool:
    """Same name (any case), or the same known family; two unknown tools never match by family."""
    if actual.name.lower() == expected.name.lower():
        return True
    return actual.family == expected.family != UNKNOWN_FAMILY


def _edit_target_matches(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    actual_command, expected_command = str(actual.get("command", "")), str(expected.get("command", ""))
    if actual_command and expected_command and actual_command != expected_command:
        return False
    actual_path, expected_path = first_of(actual, PATH_KEYS), first_of(expected, PATH_KEYS)
    if actual_path and expected_path and path_tail(actual_path, 2) != path_tail(expected_path, 2):
        return False
    if actual_command == expected_command == "view":
        # No range on the model's side views the whole file, which covers any gold range.
        seen, wanted = view_range(actual.get("view_range")), view_range(expected.get("view_range"))
        if seen and wanted:
            overlap = max(0, min(seen[1], wanted[1]) - max(seen[0], wanted[0]))
            return overlap / max(1, wanted[1] - wanted[0]) >= 0.8
    return True


def _bash_target_matches(actual: dict[str, Any], expected: dict[str, Any]) -> bool:
    actual_command, expected_command = first_of(actual, COMMAND_KEYS), first_of(expected, COMMAND_KEYS)
    actual_verb, expected_verb = command_verb(actual_command), command_verb(expected_command)
    if actual_verb and expected_verb and actual_verb != expected_verb:
        return False
    actual_tails = {path_tail(p.rstrip("/")) for p in command_paths(actual_command)} - {""}
    expected_tails = {path_tail(p.rstrip("/")) for p in command_paths(expected_command)} - {""}
    if actual_tails and expected_tails and not actual_tails & expected_tails:
        return False
    if actual_command and expected_command:
        return similarity(actual_command, expected_command) >= BASH_TARGET_FLOOR
    return True


def target_matches(actual: Call, expected: Call) -> bool:
    """Does the call act on the gold target? Only checked within the edit, bash and search/read families."""
    if actual.family == expected.family == "edit":
        return _edit_target_matches(actual.arguments, expected.arguments)
    if actual.family == expected.family == "bash":
        return _bash_target_matches(actual.arguments, expected.arguments)
    if {actual.family, expected.family} <= {"search", "read"}:
        actual_path, expected_path = (
            first_of(actual.arguments, PATH_KEYS),
            first_of(expected.arguments, PATH_KEYS),
        )
        return not (actual_path and expected_path) or path_tail(actual_path) == path_tail(expected_path)
    return True


def _pair_similarity(actual: str, expected: str) -> float:
    if actual and expected:
        return similarity(actual, expected)
    return 1.0 if actual == expected else 0.0


def argument_similarity(actual: Call, expected: Call) -> float:
    """How close the arguments are, in [0, 1]. For a string replacement the old and new strings each
    must be close (the lower ratio counts): finding the right spot and writing the right fix."""
    if actual.family == expected.family == "edit":
        mine, gold = actual.arguments, expected.arguments
        mine_old, mine_new = str(mine.get("old_str", "")), str(mine.get("new_str", ""))
        gold_old, gold_new = str(gold.get("old_str", "")), str(gold.get("new_str", ""))
        if (mine_old or mine_new) and (gold_old or gold_new):
            return min(_pair_similarity(mine_old, gold_old), _pair_similarity(mine_new, gold_new))
        mine_text, gold_text = edit_text(mine), edit_text(gold)
        if mine_text and gold_text:
            return similarity(mine_text, gold_text)
        return 0.0 if bool(mine_text) != bool(gold_text) else 1.0
    if actual.family == expected.family == "bash":
        mine_command = first_of(actual.arguments, COMMAND_KEYS)
        gold_command = first_of(expected.arguments, COMMAND_KEYS)
        return similarity(mine_command, gold_command) if mine_command and gold_command else 1.0
    return 1.0


def diff_size_penalty(actual: Call, alpha: float) -> float:
    """In [0, alpha]: grows with the edit's length up to DIFF_SIZE_FULL characters (rewards small fixes)."""
    if actual.family != "edit":
        return 0.0
    return alpha * min(len(edit_text(actual.arguments)) / DIFF_SIZE_FULL, 1.0)


def grade_step(actual: Call | None, expected: Call, settings: GradingSettings) -> Grade:
    """The layered grade of the model's call (None: it made no call) against the gold one."""
    if actual is None:
        return Grade(failure_reason=FailureCode.MODEL_OUTPUT_INVALID)
    grade = Grade(tool_name_match=names_match(actual, expected))
    if not grade.tool_name_match:
        grade.failure_reason = FailureCode.TOOL_NAME_MISMATCH
        return grade
    grade.reward = 1.0
    if settings.enable_target_match:
        grade.target_match = target_matches(actual, expected)
        if not grade.target_match:
            grade.reward, grade.failure_reason = 0.0, FailureCode.TARGET_MISMATCH
            return grade
    if settings.enable_argument_similarity:
        score = grade.similarity_score = argument_similarity(actual, expected)
        full, floor = settings.similarity_full_credit, settings.similarity_threshold
        if score >= full:
            grade.reward = 1.0
        elif settings.reward_mode == "continuous" and score >= floor:
            grade.reward = 0.5 + 0.5 * (score - floor) / (full - floor)
        else:
            grade.reward, grade.failure_reason = 0.0, FailureCode.SIMILARITY_BELOW_THRESHOLD
            return grade
    if settings.enable_diff_size_shaping and settings.reward_mode == "continuous":
        grade.diff_size_penalty = diff_size_penalty(actual, settings.diff_size_alpha)
        grade.reward *= 1.0 - grade.diff_size_penalty
    return grade
