"""Reading an NVARC answer: the grid of a transductive answer, the `transform()` program of an inductive
one, and the checks a grid must pass. Every function here is a single pass over the text (a model may
write megabytes, and a backtracking pattern on an unclosed fence or brace would stall the server).

Grids are ARC grids: 1 to 30 rows of 1 to 30 cells, every row as long as the first, colours 0-9.
"""

from __future__ import annotations

import json
import re
from typing import Any

Grid = list[list[int]]

MAX_SIDE = 30
THINK_CLOSE = "</think>"
BOXED = "\\boxed{"
FENCE = "```"
# A written row once brackets and commas are gone: single digits apart, or one run of digits (the prompt's
# own way of writing a row, one character per cell).
SPACED_DIGITS = re.compile(r"[0-9](?:\s+[0-9])*")
DIGIT_RUN = re.compile(r"[0-9]+")
ROW_PUNCTUATION = str.maketrans({"[": " ", "]": " ", ",": " "})
# A JSON grid once whitespace is gone: rows of one-digit integers, nothing deeper.
JSON_GRID = re.compile(r"\[\[[0-9](?:,[0-9])*\](?:,\[[0-9](?:,[0-9])*\])*\]")
WHITESPACE = re.compile(r"\s+")


def strip_thinking(text: str) -> str:
    """What follows the last `</think>`: reasoning that leaked into the answer is not the answer."""
    return text.rpartition(THINK_CLOSE)[2] if THINK_CLOSE in text else text


def is_grid(value: Any) -> bool:
    """Whether `value` is an ARC grid (JSON booleans are not colours)."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SIDE:
        return False
    width = len(value[0]) if isinstance(value[0], list) else 0
    if not 1 <= width <= MAX_SIDE:
        return False
    return all(
        isinstance(row, list)
        and len(row) == width
        and all(type(cell) is int and 0 <= cell <= 9 for cell in row)
        for row in value
    )


def parse_grid(text: str) -> Grid | None:
    """The answer grid of a transductive answer, or None.

    With a `\\boxed{` in the text, the content of the last one (up to its closing brace) must be a whole
    grid. Without one, the answer is the last block of consecutive grid lines in the text."""
    text = strip_thinking(text)
    start = text.rfind(BOXED)
    if start >= 0:
        content_start = start + len(BOXED)
        end = text.find("}", content_start)
        return read_grid(text[content_start : end if end >= 0 else len(text)])
    return _last_grid_block(text)


def read_grid(candidate: str) -> Grid | None:
    """A grid written as JSON (`[[1, 2], [3, 4]]`) or as lines of cells (`1 2` / `12` per row)."""
    if len(candidate) > 8 * MAX_SIDE * MAX_SIDE + 1024:  # far longer than any 30x30 grid, however spaced
        return None
    compact = WHITESPACE.sub("", candidate)
    if compact.startswith("[["):
        grid = json.loads(compact) if JSON_GRID.fullmatch(compact) else None
        return grid if is_grid(grid) else None
    rows = []
    for line in candidate.splitlines():
        if line.strip():
            row = read_row(line)
            if row is None:
                return None
            rows.append(row)
    return rows if is_grid(rows) else None


def read_row(line: str) -> list[int] | None:
    """The cells of one written row, or None if the line is not one."""
    cells = line.translate(ROW_PUNCTUATION).strip()
    if SPACED_DIGITS.fullmatch(cells) or DIGIT_RUN.fullmatch(cells):
        return [int(digit) for digit in cells if not digit.isspace()]
    return None


def _last_grid_block(text: str) -> Grid | None:
    """The last run of consecutive lines that are all rows (any other line ends a run), read as a grid; a
    whole JSON grid on one line counts as a run. Read from the end, so a run stops mattering once it is
    taller than a grid can be."""
    block: list[list[int]] = []
    for line in reversed(text.splitlines()):
        head = line.lstrip()[:1]
        whole = read_grid(line) if head == "[" and line.lstrip().startswith("[[") else None
        if whole is not None:  # a JSON grid written on one line
            return whole if not block else _finished(block)
        row = read_row(line) if (head.isdigit() or head == "[") and len(line) <= 8 * MAX_SIDE else None
        if row is None:
            if block:
                break
            continue
        block.append(row)
        if len(block) > MAX_SIDE:
            return None
    return _finished(block)


def _finished(reversed_block: list[list[int]]) -> Grid | None:
    block = reversed_block[::-1]
    return block if is_grid(block) else None


def extract_code(text: str) -> str | None:
    """The program of an inductive answer: the last fenced block tagged python, else the last fenced block,
    else the whole text when it defines `transform`; None when there is none."""
    text = strip_thinking(text)
    blocks: list[tuple[str, str]] = []
    opening: tuple[int, str] | None = None
    lines = text.split("\n")
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith(FENCE):
            continue
        if opening is None:
            opening = (index, stripped[len(FENCE) :].strip().lower())
        else:
            blocks.append((opening[1], "\n".join(lines[opening[0] + 1 : index])))
            opening = None
    tagged = [code for tag, code in blocks if tag in ("python", "py", "python3")]
    if tagged:
        return tagged[-1]
    if blocks:
        return blocks[-1][1]
    return text if "def transform" in text else None


def read_report(stdout: str) -> dict[str, Any] | None:
    """The runner's report: the last stdout line that is a JSON object with a `status`."""
    for line in reversed(stdout.splitlines()):
        try:
            report = json.loads(line)
        except ValueError:
            continue
        if isinstance(report, dict) and "status" in report:
            return report
    return None
