"""Reading a GenRM verdict: exactly one JSON object with per-rubric and overall scores.

The verdict looks like

    {"rubric_evaluations": [{"rubric_id": 1, "score_1": 4, "score_2": 2, "ranking": 2, ...}, ...],
     "overall": {"score_1": 4, "score_2": 2, "ranking": 2, ...}}

(analysis fields beside the numbers are free text), fenced or bare. `score_1`/`score_2` rate response 1
and 2 from 1 to 5; `ranking` runs from 1 (response 1 much better) to 6 (response 2 much better).

A reply holding more than one JSON object is unreadable on purpose: a policy that repeats its verdict
until the token cap would otherwise keep being rewarded for it. LaTeX-style backslashes that are no JSON
escape (`\\Delta`) are tolerated, as models write them inside analyses.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

SCORE_KEYS = ("score_1", "score_2", "ranking")
_STRAY_BACKSLASH = re.compile(r'\\(?!["\\/bfnrtu])')


@dataclass(frozen=True)
class Scores:
    score_1: float
    score_2: float
    ranking: float


@dataclass(frozen=True)
class Verdict:
    overall: Scores
    rubrics: dict[int, Scores] = field(default_factory=dict)


class Unreadable(ValueError):
    """The reply holds no usable verdict; the message says why."""


def top_level_objects(text: str) -> list[str]:
    """Every outermost `{...}` span, braces inside JSON strings ignored. Quotes only count inside a
    span, so an apostrophe or a lone quote in the prose around the verdict cannot derail the scan."""
    spans, depth, start, in_string, escaped = [], 0, 0, False, False
    for index, char in enumerate(text):
        if depth and in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif depth and char == '"':
            in_string = True
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start : index + 1])
    return spans


def json_object(candidate: str) -> dict[str, Any] | None:
    """The candidate as a JSON object (retried with stray backslashes doubled), or None."""
    for attempt in (candidate, _STRAY_BACKSLASH.sub(r"\\\\", candidate)):
        try:
            parsed = json.loads(attempt)
        except (ValueError, RecursionError):
            continue
        return parsed if isinstance(parsed, dict) else None
    return None


def number(value: Any, where: str) -> float:
    """A finite score: a JSON number or a numeric string (models sometimes quote them), not a boolean."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise Unreadable(f"{where} is not a number: {value!r}")
    try:
        result = float(value)
    except ValueError:
        raise Unreadable(f"{where} is not a number: {value!r}") from None
    if not math.isfinite(result):
        raise Unreadable(f"{where} is not finite: {value!r}")
    return result


def scores_of(block: Any, where: str) -> Scores:
    if not isinstance(block, dict):
        raise Unreadable(f"{where} is not an object")
    missing = [key for key in SCORE_KEYS if key not in block]
    if missing:
        raise Unreadable(f"{where} lacks {', '.join(missing)}")
    return Scores(*(number(block[key], f"{where}.{key}") for key in SCORE_KEYS))


def rubric_id(value: Any) -> int:
    """A rubric id: an integer, or a float or string holding one."""
    if isinstance(value, bool):
        raise Unreadable(f"rubric_id is not an integer: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise Unreadable(f"rubric_id is not an integer: {value!r}")


def read_verdict(text: str) -> Verdict:
    """The one verdict the reply holds; raises Unreadable when there is none, several, or it is incomplete."""
    objects = [parsed for span in top_level_objects(text) if (parsed := json_object(span)) is not None]
    if len(objects) != 1:
        raise Unreadable("no JSON object" if not objects else f"{len(objects)} JSON objects, expected one")
    verdict = objects[0]
    overall = scores_of(verdict.get("overall"), "overall")
    evaluations = verdict.get("rubric_evaluations")
    if not isinstance(evaluations, list) or not evaluations:
        raise Unreadable("rubric_evaluations is missing or empty")
    rubrics: dict[int, Scores] = {}
    for position, evaluation in enumerate(evaluations):
        where = f"rubric_evaluations[{position}]"
        if not isinstance(evaluation, dict) or "rubric_id" not in evaluation:
            raise Unreadable(f"{where} has no rubric_id")
        identifier = rubric_id(evaluation["rubric_id"])
        if identifier in rubrics:
            raise Unreadable(f"rubric_id {identifier} is evaluated twice")
        rubrics[identifier] = scores_of(evaluation, where)
    return Verdict(overall, rubrics)
