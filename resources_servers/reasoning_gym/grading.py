"""Answer extraction and scoring for reasoning_gym, run inside the CPU worker pool.

Scoring is delegated to the `reasoning-gym` library: every task ships its own `score_answer`, so the
server needs no per-task logic. These functions are module-level so the pool's spawned workers can
import them; the library is imported lazily so the server process itself never pays for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

# The first \boxed{...} whose content has no braces of its own: a nested one is ambiguous to cut.
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")

# Tasks whose scorers compare parsed boards with metadata grids as tuples of tuples: JSON turns those into
# lists, and a list never equals a tuple, so a row read back from JSONL would be unwinnable without this.
TUPLE_GRID_FIELDS: dict[str, tuple[str, ...]] = {"arc_agi": ("input", "output"), "rearc": ("input", "output")}


class UnknownTaskError(LookupError):
    """The row names a task the installed reasoning-gym does not register: a data error, not a bad answer."""


@dataclass(frozen=True)
class Grade:
    score: float
    extracted_answer: str | None  # None only when scoring never got that far (deadline)


def extract_answer(text: str) -> str:
    """`<answer>` tags (the library's own parser, last pair wins), else the first flat `\\boxed{}`,
    else the whole text; surrounding whitespace is dropped so it cannot cost partial-credit scorers."""
    from reasoning_gym.utils import extract_answer as tagged_answer

    tagged = tagged_answer(text)
    if tagged is not None:
        return tagged
    boxed = BOXED.search(text)
    if boxed is not None:
        return boxed.group(1).strip()
    return text.strip()


def is_known_task(task_name: str) -> bool:
    from reasoning_gym.factory import DATASETS

    return task_name in DATASETS


@cache
def scorer_for(task_name: str) -> Callable[[str | None, dict[str, Any]], float]:
    """Building a task's scorer can load word lists or puzzle files: keep one per task per worker."""
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(task_name)


def as_tuples(value: Any) -> Any:
    return tuple(as_tuples(item) for item in value) if isinstance(value, (list, tuple)) else value


def restore_entry(task_name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Undo what the JSON round trip did to the entry, where the task's scorer cares (see TUPLE_GRID_FIELDS)."""
    fields = TUPLE_GRID_FIELDS.get(task_name, ())
    metadata = entry.get("metadata") or {}
    if not any(field in metadata for field in fields):
        return entry
    restored = {field: as_tuples(metadata[field]) for field in fields if field in metadata}
    return {**entry, "metadata": {**metadata, **restored}}


def score(task_name: str, answer: str | None, entry: dict[str, Any]) -> float:
    """The task's own score for `answer`; a scorer that raises (or returns NaN) means 0.0: a model's answer
    that crashes a parser is simply not a correct answer."""
    try:
        value = float(scorer_for(task_name)(answer, restore_entry(task_name, entry)))
    except Exception:
        return 0.0
    return 0.0 if value != value else value


def grade(task_name: str, output_text: str, entry: dict[str, Any]) -> Grade:
    """Score `output_text` for the row `entry` (question, answer, metadata) with the task's own scorer.

    Raises UnknownTaskError for an unregistered task.
    """
    if not is_known_task(task_name):
        raise UnknownTaskError(task_name)
    extracted = extract_answer(output_text)
    return Grade(score=score(task_name, extracted, entry), extracted_answer=extracted)
