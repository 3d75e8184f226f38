"""lc_niah grading: the node-list F1 of the final answer and how much the reasoning copies the input.

The answer line is read in one pass over the text. The overlap signals compare the reasoning with the
whole (long) prompt; difflib's matching is quadratic in the worst case, so they are meant to run in a
CPU worker with a deadline.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

MARKER = "Final Answer:"
NGRAM = 16
_WHITESPACE = re.compile(r"\s+")


def parse_node_list(text: str) -> list[str] | None:
    """The nodes of `Final Answer: [a, b, ...]` on the last non-empty line, or None when it has none.

    The list runs from the `[` after the first marker that has one (whitespace between them is allowed)
    to the last `]` of the line; items are split on commas, trimmed, and stripped of quotes, so
    `["a", "b"]` and `[a, b]` read alike. Empty items are dropped; an empty list is a valid answer.
    """
    lines = [line for line in text.strip().split("\n") if line.strip()]
    if not lines:
        return None
    line = lines[-1]
    last_close = line.rfind("]")
    start = line.find(MARKER)
    while start != -1:
        position = start + len(MARKER)
        while position < len(line) and line[position].isspace():
            position += 1
        if position < len(line) and line[position] == "[":
            if last_close <= position:
                return None  # no later marker can have a closing bracket after its opening one either
            items = (item.strip().strip("\"'").strip() for item in line[position + 1 : last_close].split(","))
            return [item for item in items if item]
        start = line.find(MARKER, position)
    return None


def node_f1(predicted: set[str], expected: set[str]) -> float:
    """F1 of two node sets; two empty sets agree (1.0), one empty set against another scores 0.0."""
    if not predicted and not expected:
        return 1.0
    common = len(predicted & expected)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def normalized(text: str) -> str:
    return _WHITESPACE.sub(" ", text.strip().lower())


def overlap_seq_match(reasoning: str, input_text: str) -> float:
    """difflib's similarity ratio of the normalized texts (with its default junk heuristic)."""
    reasoning = normalized(reasoning)
    if not reasoning:
        return 0.0
    return SequenceMatcher(None, reasoning, normalized(input_text)).ratio()


def overlap_ngram(reasoning: str, input_text: str, n: int = NGRAM) -> float:
    """The share of the reasoning's distinct word n-grams that also occur in the input; 0.0 for a
    reasoning shorter than n words."""
    words = normalized(reasoning).split()
    if len(words) < n:
        return 0.0
    reasoning_grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    input_words = normalized(input_text).split()
    input_grams = {tuple(input_words[i : i + n]) for i in range(len(input_words) - n + 1)}
    return len(reasoning_grams & input_grams) / len(reasoning_grams)


def overlap_lcs(reasoning: str, input_text: str) -> float:
    """The longest stretch of characters the normalized reasoning shares with the input, over the
    reasoning's length (no junk heuristic: frequent characters of a long input still count)."""
    reasoning = normalized(reasoning)
    if not reasoning:
        return 0.0
    input_text = normalized(input_text)
    matcher = SequenceMatcher(None, reasoning, input_text, autojunk=False)
    return matcher.find_longest_match(0, len(reasoning), 0, len(input_text)).size / len(reasoning)


OVERLAPS = {"seq_match": overlap_seq_match, "ngram16": overlap_ngram, "lcs": overlap_lcs}


def reasoning_overlap(rule: str, reasoning: str, input_text: str) -> float:
    """The overlap signal `rule` names, in [0, 1]: higher means more of the reasoning is copied input."""
    return OVERLAPS[rule](reasoning, input_text)


def combined_reward(rule: str, answer_score: float, overlap: float) -> float:
    """`base`: the answer score; `multiply`: scaled by 1 − overlap; `minus`: less the overlap (can be < 0)."""
    if rule == "base":
        return answer_score
    if rule == "multiply":
        return answer_score * (1.0 - overlap)
    return answer_score - overlap
