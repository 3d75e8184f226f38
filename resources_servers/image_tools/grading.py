"""Scoring one image-tool call against the demonstrated one, in three levels, cheapest first:

  0. the tool: the same name (zoom and crop count as one decision: crop is zoom without magnification);
  1. the target: the same image(s) (`img_idx`, `img_idx_a`/`img_idx_b`, `img_indices`);
  2. the arguments of the tool's family, as a score in [0, 1]:
       bbox   image_zoom_in_tool, image_crop_tool        IoU of `bbox_2d`
       point  color_at_tool                              1 - distance of `point_2d` / 1000
       color  find_color_tool, count_objects_tool        1 - mean channel difference of `color` / 255
       pair   image_diff_tool, image_overlay_tool        `alpha` within tolerance (else 1)
       multi  image_side_by_side_tool                    1 (decided by level 1)
       scalar image_rotate_tool, image_flip_tool         `degrees` modulo 360 / `axis` equal

Free-text arguments (`label`, `labels`) never count: they explain an action, they are not one. A missing or
unreadable value on the demonstrated side cannot be held against the model, so that check passes.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

from nemo_gym.text.extraction import last_boxed

BBOX_TOOLS = frozenset({"image_zoom_in_tool", "image_crop_tool"})
FAMILIES = {
    **dict.fromkeys(BBOX_TOOLS, "bbox"),
    "color_at_tool": "point",
    "find_color_tool": "color",
    "count_objects_tool": "color",
    "image_diff_tool": "pair",
    "image_overlay_tool": "pair",
    "image_side_by_side_tool": "multi",
    "image_rotate_tool": "scalar",
    "image_flip_tool": "scalar",
}
IGNORED_ARGUMENTS = frozenset({"label", "labels"})
ANSWER_ACTION = "__answer__"  # an expected action that is the final answer rather than a tool call
ANSWER_LINE = re.compile(r"(?i)(?:final\s+answer|answer)\s*[:\uff1a]\s*(.+)")


def family_of(name: str) -> str:
    return FAMILIES.get(name, "unknown")


def same_tool(got: str, expected: str, unify_region_inspect: bool) -> bool:
    got, expected = got.strip(), expected.strip()
    return got == expected or (unify_region_inspect and {got, expected} <= BBOX_TOOLS)


def without_ignored(arguments: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in arguments.items() if key not in IGNORED_ARGUMENTS}


# --- reading argument values ------------------------------------------------------------------------------


def _parsed(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        value = _parsed(value)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _index(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number == int(number) else None


def _numbers(value: Any, length: int) -> list[float] | None:
    value = _parsed(value)
    if not isinstance(value, list | tuple) or len(value) != length:
        return None
    numbers = [_number(item) for item in value]
    return None if None in numbers else numbers  # type: ignore[return-value]


def _indices(value: Any) -> list[int] | None:
    value = _parsed(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if not isinstance(value, list | tuple):
        return None
    indices = [_index(item) for item in value]
    return None if None in indices else sorted(indices)  # type: ignore[arg-type]


def bbox(value: Any) -> tuple[float, float, float, float] | None:
    """[x1, y1, x2, y2] with the corners put in order."""
    box = _numbers(value, 4)
    if box is None:
        return None
    x1, y1, x2, y2 = box
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    overlap = max(0.0, width) * max(0.0, height)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - overlap
    return overlap / union if union > 0 else 0.0


# --- level 1 ----------------------------------------------------------------------------------------------


def same_target(family: str, got: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Whether the call works on the demonstrated image(s); an index absent on either side passes."""
    if family == "pair":
        keys = ("img_idx_a", "img_idx_b")
    elif family == "multi":
        mine, theirs = _indices(got.get("img_indices")), _indices(expected.get("img_indices"))
        return mine is None or theirs is None or mine == theirs
    elif family == "unknown":
        return True
    else:
        keys = ("img_idx",)
    for key in keys:
        mine, theirs = _index(got.get(key)), _index(expected.get(key))
        if mine is not None and theirs is not None and mine != theirs:
            return False
    return True


# --- level 2 ----------------------------------------------------------------------------------------------


def argument_score(
    family: str, got: dict[str, Any], expected: dict[str, Any], tolerance: float
) -> tuple[float, str]:
    """(score in [0, 1], how it was decided)."""
    if family == "bbox":
        theirs, mine = bbox(expected.get("bbox_2d")), bbox(got.get("bbox_2d"))
        if theirs is None:
            return 1.0, "expected_bbox_unparseable"
        if mine is None:
            return 0.0, "rollout_bbox_unparseable"
        # The demonstrated box reproduced exactly always counts, even a zero-area one (IoU 0/0).
        return (1.0, "exact_bbox") if mine == theirs else (iou(mine, theirs), "iou")
    if family == "point":
        theirs, mine = _numbers(expected.get("point_2d"), 2), _numbers(got.get("point_2d"), 2)
        if theirs is None:
            return 1.0, "expected_point_unparseable"
        if mine is None:
            return 0.0, "rollout_point_unparseable"
        return max(0.0, 1.0 - math.dist(mine, theirs) / 1000.0), "point_distance"
    if family == "color":
        theirs, mine = _numbers(expected.get("color"), 3), _numbers(got.get("color"), 3)
        if theirs is None or mine is None:
            same = got.get("color") == expected.get("color")
            return (1.0, "color_absent") if same else (0.0, "color_mismatch")
        difference = sum(abs(a - b) for a, b in zip(mine, theirs, strict=True)) / (3 * 255.0)
        return max(0.0, 1.0 - difference), "color_distance"
    if family == "scalar":
        return _scalar_score(got, expected, tolerance)
    if family in ("pair", "multi"):
        theirs, mine = _number(expected.get("alpha")), _number(got.get("alpha"))
        if theirs is not None and mine is not None:
            return (1.0 if abs(mine - theirs) <= tolerance else 0.0), "alpha"
        return 1.0, "index_only"
    return 1.0, "unknown_family"


def _scalar_score(got: dict[str, Any], expected: dict[str, Any], tolerance: float) -> tuple[float, str]:
    for key in ("degrees", "axis"):
        if key not in expected:
            continue
        theirs, mine = _number(expected[key]), _number(got.get(key))
        if theirs is not None and mine is not None:
            if key == "degrees":  # rotations wrap: -90 and 270 are the same turn
                delta = abs(mine - theirs) % 360.0
                return (1.0 if min(delta, 360.0 - delta) <= tolerance else 0.0), "degrees"
            return (1.0 if abs(mine - theirs) <= tolerance else 0.0), key
        same = str(got.get(key)).strip().lower() == str(expected[key]).strip().lower()
        return (1.0 if same else 0.0), key
    return 1.0, "scalar_no_key"


# --- terminal (answer) expectations -----------------------------------------------------------------------


def final_answer(text: str) -> str | None:
    """The answer after the reasoning: the last `\\boxed{}`, else an `Answer: ...` line."""
    tail = text.rsplit("</think>", 1)[-1]
    boxed = last_boxed(tail)
    if boxed is not None:
        return boxed.strip()
    line = ANSWER_LINE.search(tail)
    return line.group(1).strip().rstrip(".") if line else None


def _normalised(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).strip().lower().strip("\"'` ")
    return re.sub(r"\s+", " ", text).rstrip(".")


def answers_match(expected: str, got: str | None) -> bool:
    return got is not None and _normalised(expected) == _normalised(got)
