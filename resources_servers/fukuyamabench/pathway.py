"""Finding the predicted pathway (a JSON array of steps) in a FukuyamaBench answer, in time linear in the
text: a model may write megabytes, and backtracking patterns or a bracket scan restarted at every `[`
would be quadratic on unclosed fences or deep brackets.

Tried in NeMo Gym's order (itself upstream's): fenced JSON arrays, last first (a model that revises its
answer is read at its conclusion); then bracketed arrays after the last `## Result` header (or anywhere,
without one), first first; then loose step objects.
"""

from __future__ import annotations

import json
import re
from typing import Any

FENCE = "```"
RESULT_HEADER = re.compile(r"##\s*Result\s*\n")
FLAT_OBJECT = re.compile(r"\{[^{}]*\}")
BRACKET = re.compile(r"[\[\]]")
PRODUCT_KEYS = ("product_smiles", "products")
MAX_ARRAY_ATTEMPTS = 64
"""Bracketed arrays parsed at most: enough for any honest answer, and it bounds the work on a text of
thousands of arrays."""


def is_pathway(value: Any) -> bool:
    """A non-empty list with at least one step object that names products."""
    return (
        isinstance(value, list)
        and bool(value)
        and any(isinstance(step, dict) and any(key in step for key in PRODUCT_KEYS) for step in value)
    )


def extract_pathway(text: str) -> list[Any] | None:
    """The predicted steps, or None when the text holds none."""
    for block in reversed(_fenced_blocks(text)):
        parsed = _loads(block)
        if is_pathway(parsed):
            return parsed
    headers = list(RESULT_HEADER.finditer(text))
    after = text[headers[-1].end() :] if headers else text
    for candidate in _bracketed_arrays(after):
        parsed = _loads(candidate)
        if is_pathway(parsed):
            return parsed
    steps = []
    for match in FLAT_OBJECT.finditer(text):
        if '"step_id"' in match.group():
            step = _loads(match.group())
            if isinstance(step, dict) and any(key in step for key in PRODUCT_KEYS):
                steps.append(step)
    return steps or None


def _loads(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except (ValueError, RecursionError):
        return None


def _fenced_blocks(text: str) -> list[str]:
    """The contents of fenced blocks (untagged or tagged json) that hold one array, in order."""
    blocks = []
    parts = text.split(FENCE)
    # parts[1], parts[3], ... lie between an opening and a closing fence.
    for inner in parts[1 : len(parts) - 1 : 2]:
        body = inner[4:] if inner.startswith("json") else inner
        body = body.strip()
        if body.startswith("[") and body.endswith("]"):
            blocks.append(body)
    return blocks


def _bracketed_arrays(text: str) -> list[str]:
    """Balanced `[...]` spans, by opening position, for the openings directly followed (whitespace aside)
    by `{`: a pathway is an array of step objects. One pass with a stack finds every span."""
    spans: list[tuple[int, int]] = []
    openings: list[int] = []
    for bracket in BRACKET.finditer(text):
        if bracket.group() == "[":
            openings.append(bracket.start())
        elif openings:
            start = openings.pop()
            if text[start + 1 : start + 65].lstrip().startswith("{"):
                spans.append((start, bracket.end()))
    spans.sort()
    return [text[start:end] for start, end in spans[:MAX_ARRAY_ATTEMPTS]]
