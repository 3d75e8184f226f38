"""The rubric as the judge reads it, the judge prompt file, and reading the judge's scores.

The judge answers with a JSON object: one 0/1 score per rubric criterion (`criteria_scores`) and an
`overall_score` in [0, 1], NeMo Gym's "binary" rubric mode. An answer without such an object, or with an
overall score outside [0, 1], is not a grade.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from nemo_gym.config_types import ConfigError

PLACEHOLDERS = {"task_prompt": "", "rubric": "", "deliverable": ""}
FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def load_prompt(folder: Path, path: str) -> str:
    """The prompt file's text, checked to fill with exactly {task_prompt}, {rubric} and {deliverable}."""
    full_path = Path(path) if Path(path).is_absolute() else folder / path
    try:
        prompt = full_path.read_text(encoding="utf-8")
        prompt.format(**PLACEHOLDERS)
    except OSError as error:
        raise ConfigError(
            f"judge_prompt_template_fpath: cannot read {full_path} ({error.strerror})"
        ) from None
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"judge_prompt_template_fpath: {full_path} may use only the placeholders {{task_prompt}}, "
            f"{{rubric}} and {{deliverable}} (literal braces doubled): {error!r}"
        ) from None
    return prompt


def rubric_items(rubric_json: Any) -> list[dict[str, Any]] | None:
    """The criteria of `rubric_json` (a list, or that list JSON-encoded); None when it holds none."""
    if isinstance(rubric_json, str):
        try:
            rubric_json = json.loads(rubric_json)
        except ValueError:
            return None
    if not isinstance(rubric_json, list):
        return None
    items = [item for item in rubric_json if isinstance(item, dict) and item.get("criterion")]
    return items or None


def rubric_text(rubric_json: Any, rubric_pretty: str | None) -> str | None:
    """Numbered criteria from `rubric_json`, else `rubric_pretty`; None when the row has no rubric."""
    items = rubric_items(rubric_json)
    if items:
        return "\n".join(f"{number}. {item['criterion']}" for number, item in enumerate(items, start=1))
    return rubric_pretty.strip() if rubric_pretty and rubric_pretty.strip() else None


def json_object(text: str) -> dict[str, Any] | None:
    """The JSON object of the judge's answer: a fenced block, else the span from the first '{' to the last
    '}'; None when neither parses to an object."""
    candidates = [block for block in FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def read_scores(judge_text: str) -> tuple[float, list[float]] | str:
    """(overall score, per-criterion scores) of a judge answer, or what is wrong with it."""
    verdict = json_object(judge_text)
    if verdict is None:
        return f"the judge's answer has no JSON object: {judge_text[:100]!r}"
    criteria = verdict.get("criteria_scores")
    scores: list[float] = []
    if isinstance(criteria, list):
        for entry in criteria:
            value = entry.get("score") if isinstance(entry, dict) else entry
            if isinstance(value, bool) or not isinstance(value, int | float) or value not in (0, 1):
                return f"a criterion score is not 0 or 1: {entry!r}"[:200]
            scores.append(float(value))
    overall = verdict.get("overall_score")
    if overall is None and scores:
        overall = sum(scores) / len(scores)
    if isinstance(overall, bool) or not isinstance(overall, int | float) or not 0.0 <= overall <= 1.0:
        return f"overall_score must be a number in [0, 1], got {overall!r}"[:200]
    return float(overall), scores
