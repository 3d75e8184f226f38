"""Reading the selection out of a proof_genselect answer: `<best_solution>N</best_solution>`.

Plain string scanning (no regex), linear in the length of the text, so it runs inline on the event loop.
Every way of not selecting exactly one valid candidate has a named reason, reported as `parse_error`.
"""

from __future__ import annotations

from dataclasses import dataclass

OPEN_TAG, CLOSE_TAG = "<best_solution>", "</best_solution>"
THINK_END = "</think>"
MAX_INDEX_DIGITS = 9


@dataclass(frozen=True)
class Selection:
    index: int | None
    parse_error: str | None = None


def tag_contents(text: str) -> list[str]:
    """The text inside every closed `<best_solution>...</best_solution>`, in order."""
    contents = []
    start = text.find(OPEN_TAG)
    while start != -1:
        end = text.find(CLOSE_TAG, start + len(OPEN_TAG))
        if end == -1:
            break
        contents.append(text[start + len(OPEN_TAG) : end])
        start = text.find(OPEN_TAG, end + len(CLOSE_TAG))
    return contents


def parse_index(content: str) -> int | None:
    """A plain ASCII decimal number with optional surrounding whitespace ("2", " 2 "); else None."""
    digits = content.strip()
    if not digits or not digits.isascii() or not digits.isdigit():
        return None
    return int(digits) if len(digits) <= MAX_INDEX_DIGITS else 0


def select(text: str, num_candidates: int | None, require_think_end: bool) -> Selection:
    """The candidate the answer selects, read after its last `</think>`.

    Several tags must agree: a hedge between candidates selects nothing. An index outside
    1..num_candidates (when known) selects nothing either.
    """
    if require_think_end and THINK_END not in text:
        return Selection(None, "missing_think_end")
    final = text.rsplit(THINK_END, 1)[-1]
    contents = tag_contents(final)
    if not contents:
        return Selection(None, "missing_best_solution_tag")
    indices = {parse_index(content) for content in contents}
    if None in indices:
        return Selection(None, "invalid_best_solution_value")
    if len(indices) > 1:
        return Selection(None, "conflicting_best_solutions")
    (index,) = indices
    if index < 1 or (num_candidates is not None and index > num_candidates):
        return Selection(None, "best_solution_out_of_range")
    return Selection(index)
