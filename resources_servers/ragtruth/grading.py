"""Reading the hallucination list out of a model's answer, in passes linear in its length.

Thinking models wrap reasoning in `<think>...</think>` (or another tag) and many wrap JSON in a ```
fence, so both are peeled off before the JSON object is parsed.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from nemo_gym.text.extraction import last_match

LIST_KEY = "hallucination list"
FENCE = "```"
_LEADING_SPACE = re.compile(r"\s*")


@lru_cache(maxsize=8)
def _tags(tag: str) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    escaped = re.escape(tag)
    opening = re.compile(rf"<{escaped}>", re.IGNORECASE)
    closing = re.compile(rf"</{escaped}>", re.IGNORECASE)
    opening_and_space = re.compile(rf"<{escaped}>\s*", re.IGNORECASE)
    return opening, closing, opening_and_space


def strip_reasoning(text: str, tag: str = "think") -> str:
    """The text without `<tag>...</tag>` blocks; then everything up to a stray `</tag>` (reasoning whose
    opening tag was never printed) and any stray `<tag>` are dropped too. Tags match in any case."""
    opening, closing, opening_and_space = _tags(tag)
    pieces, position = [], 0
    while (start := opening.search(text, position)) and (end := closing.search(text, start.end())):
        pieces.append(text[position : start.start()])
        position = end.end()
    text = "".join(pieces) + text[position:]
    last_close = last_match(closing, text)
    if last_close:
        text = text[_LEADING_SPACE.match(text, last_close.end()).end() :]
    return opening_and_space.sub("", text).strip()


def _fence_body(inside: str) -> str:
    """A fence's content without its `json` label and surrounding whitespace."""
    if inside[:4].lower() == "json":
        inside = inside[4:]
    return inside.strip()


def strip_json_fence(text: str) -> str:
    """The content of a ``` fence around the whole text, else of the first fenced block when it is not
    empty, else the text as it was (stripped when it holds a fence)."""
    if FENCE not in text:
        return text
    stripped = text.strip()
    if len(stripped) >= 2 * len(FENCE) and stripped.startswith(FENCE) and stripped.endswith(FENCE):
        return _fence_body(stripped[len(FENCE) : -len(FENCE)])
    start = stripped.find(FENCE)
    end = stripped.find(FENCE, start + len(FENCE))
    if end != -1 and (candidate := _fence_body(stripped[start + len(FENCE) : end])):
        return candidate
    return stripped


def parse_answer(text: str, tag: str = "think") -> dict[str, Any] | None:
    """The JSON object the answer holds once reasoning and fences are removed; None if it holds none."""
    cleaned = strip_json_fence(strip_reasoning(text, tag))
    if not cleaned:
        return None
    try:
        parsed = json.loads(cleaned)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def hallucination_list(parsed: dict[str, Any] | None) -> list[Any] | None:
    spans = parsed.get(LIST_KEY) if parsed is not None else None
    return spans if isinstance(spans, list) else None
