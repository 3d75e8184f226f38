"""Find the answer grid in an ARC-AGI response, in time linear in the length of the text.

The candidates are the stretches of text that look like a written grid, `[[...]]`: the ones right inside
`\\boxed{...}` if the text has any, else the bare ones anywhere. The first candidate that reads as a
non-empty matrix of integers is the answer.

A candidate is made only of digits, whitespace, commas and brackets, so it lies inside one maximal run
of those characters, and a run holds at most one: from its first `[[` (spaces allowed between the
brackets) to its last `]]`. Finding both ends with one forward and one backward search keeps the work
linear, where a backtracking pattern over the run would be quadratic in nested or unclosed brackets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

Grid = list[list[int]]

BOXED = re.compile(r"\\boxed\{")
GRID_CHARACTERS = re.compile(r"[\d\s,\[\]]+")
OPENING = re.compile(r"\[\s*\[")
CLOSING = re.compile(r"\]\s*\]")  # reads the same reversed, so it also finds the last `]]` of a reversed run
WHITESPACE = re.compile(r"\s+")
# After whitespace is removed: rows of JSON integers, the first row non-empty. Two levels of brackets at
# most, so json.loads below never recurses deeper than that.
JSON_INTEGER = r"(?:0|[1-9][0-9]*)"
ROW = rf"{JSON_INTEGER}(?:,{JSON_INTEGER})*"
GRID_SHAPE = re.compile(rf"\[\[{ROW}\](?:,\[(?:{ROW})?\])*\]")


def extract_grid(text: str) -> Grid | None:
    """The first candidate grid of `text` that parses, or None."""
    return next((grid for candidate in candidates(text) if (grid := parse_grid(candidate)) is not None), None)


def candidates(text: str) -> Iterator[str]:
    """The boxed candidates in order; only when there is none, the bare ones."""
    boxed_any = False
    for boxed in BOXED.finditer(text):
        candidate = _boxed_candidate(text, boxed.end())
        if candidate is not None:
            boxed_any = True
            yield candidate
    if boxed_any:
        return
    for run in GRID_CHARACTERS.finditer(text):
        span = _grid_span(run.group())
        if span is not None:
            yield run.group()[span[0] : span[1]]


def _boxed_candidate(text: str, start: int) -> str | None:
    """The run right after `\\boxed{`, if it is a whole candidate and the brace closes right after it."""
    run = GRID_CHARACTERS.match(text, start)
    if run is None or not text.startswith("}", run.end()):
        return None
    return run.group() if _grid_span(run.group()) == (0, len(run.group())) else None


def _grid_span(run: str) -> tuple[int, int] | None:
    """(start, end) of the candidate in a run: its first `[[` to its last `]]`, with something between."""
    opening = OPENING.search(run)
    if opening is None:
        return None
    closing = CLOSING.search(run[::-1])
    if closing is None:
        return None
    closing_start = len(run) - closing.end()
    if closing_start <= opening.end():
        return None
    return opening.start(), len(run) - closing.start()


def parse_grid(candidate: str) -> Grid | None:
    """The matrix a candidate writes (whitespace anywhere ignored), or None if it is not one."""
    cleaned = WHITESPACE.sub("", candidate)
    if GRID_SHAPE.fullmatch(cleaned) is None:
        return None
    try:
        return json.loads(cleaned)
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        return None
