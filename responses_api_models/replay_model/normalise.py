"""Recorded and requested Responses items in a normalised form that ignores what tools, agents and JSON
serialisers may change (ids, statuses, spacing, string vs list content), and short descriptions of them
for error messages."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

MAX_SHOWN_CHARS = 160
CONTEXT_BEFORE_DIFFERENCE = 40

# A normalised item: a tuple of strings (and tuples of strings), hashable so it can key the index.
Norm = tuple[Any, ...]


def canonical_text(value: Any) -> str:
    """JSON text in one spelling (sorted keys, no spaces), or stripped text when it is not JSON.

    Tool outputs and call arguments are JSON written by different serialisers; `{"a": 1}` from one tool
    build and `{"a":1}` from another are the same observation.
    """
    if not isinstance(value, str):
        return _canonical_json(value)
    try:
        parsed = json.loads(value)
    except ValueError:
        return value.strip()
    return _canonical_json(parsed)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _part_texts(parts: Any) -> tuple[str, tuple[str, ...]]:
    """The text of content parts joined, plus the non-text parts (images, files) in canonical JSON without
    their null keys (a result row spells `"file_id": null` where the request left the key out)."""
    if parts is None:
        return "", ()
    if isinstance(parts, str):
        return parts, ()
    texts: list[str] = []
    others: list[str] = []
    for part in parts:
        if isinstance(part, Mapping) and isinstance(part.get("text", part.get("refusal")), str):
            texts.append(part.get("text", part.get("refusal")))
        elif isinstance(part, Mapping):
            others.append(_canonical_json({key: value for key, value in part.items() if value is not None}))
        else:
            others.append(_canonical_json(part))
    return "".join(texts), tuple(others)


def normalise_item(item: Mapping[str, Any]) -> Norm:
    """The parts of an item that carry meaning; ids, statuses, call ids and annotations are ignored.

    A message is its role and text (a string content equals text parts with the same text, and `type`
    may be absent); a function call is its name and arguments parsed as JSON; a tool output is its output
    parsed as JSON when it is JSON, else its stripped text; reasoning is its summary and content texts.
    """
    kind = item.get("type") or "message"
    if kind == "message":
        text, others = _part_texts(item.get("content"))
        return ("message", item.get("role"), text, others)
    if kind == "function_call":
        return ("function_call", item.get("name"), canonical_text(item.get("arguments")))
    if kind == "function_call_output":
        output = item.get("output")
        return (
            "function_call_output",
            canonical_text(output if isinstance(output, str) else _part_texts(output)[0]),
        )
    if kind == "reasoning":
        summary = tuple(_part_texts([part])[0] for part in item.get("summary") or ())
        content = tuple(_part_texts([part])[0] for part in item.get("content") or ())
        return ("reasoning", summary, content)
    rest = {key: value for key, value in item.items() if key not in ("id", "status")}
    return (str(kind), _canonical_json(rest))


def normalise_input(value: str | list[Mapping[str, Any]], instructions: str | None = None) -> list[Norm]:
    """A request's `input` as normalised items; `instructions` count as a leading item of the task."""
    items = [{"role": "user", "content": value}] if isinstance(value, str) else value
    leading: list[Norm] = [("instructions", instructions)] if instructions else []
    return leading + [normalise_item(item) for item in items]


def is_model_item(norm: Norm) -> bool:
    """Items a model produces; every other item (tool output, user turn) comes from the environment."""
    return norm[0] in ("function_call", "reasoning") or (norm[0] == "message" and norm[1] == "assistant")


def describe(norm: Norm | None) -> tuple[str, str]:
    """A short label and a body for error messages, e.g. ("function_call get_weather", '{"city":"SF"}')."""
    if norm is None:
        return "end of input", ""
    kind = norm[0]
    if kind == "message":
        extra = f" +{len(norm[3])} non-text part(s)" if norm[3] else ""
        return f"message[{norm[1]}]{extra}", json.dumps(norm[2], ensure_ascii=False)
    if kind == "function_call":
        return f"function_call {norm[1]}", norm[2]
    if kind == "reasoning":
        return "reasoning", json.dumps(" ".join(norm[1] + norm[2]), ensure_ascii=False)
    if kind == "instructions":
        return "instructions", json.dumps(norm[1], ensure_ascii=False)
    return str(kind), str(norm[1])


def contrast(expected: Norm | None, got: Norm | None) -> tuple[str, str]:
    """Both items described and cut to a window starting just before their first difference."""
    (expected_label, expected_body), (got_label, got_body) = describe(expected), describe(got)
    cut = 0
    if expected_label == got_label:
        common = len(os.path.commonprefix([expected_body, got_body]))
        cut = max(0, common - CONTEXT_BEFORE_DIFFERENCE)
    return (
        f"{expected_label} {_clip(expected_body, cut)}".strip(),
        f"{got_label} {_clip(got_body, cut)}".strip(),
    )


def _clip(text: str, start: int) -> str:
    shown = ("…" + text[start:]) if start else text
    return shown if len(shown) <= MAX_SHOWN_CHARS else shown[: MAX_SHOWN_CHARS - 1] + "…"
