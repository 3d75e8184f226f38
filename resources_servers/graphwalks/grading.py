"""Read a GraphWalks answer and score it against the expected node set.

The answer is the last non-empty line of the text, which must contain `Final Answer: [...]`; the nodes
are the comma-separated names between the first `[` after the marker and the last `]` of the line. Only
string operations and one search for a fixed marker: linear in the text, whatever the model wrote.
"""

from __future__ import annotations

import re

FINAL_ANSWER = re.compile(r"Final Answer:\s*\[")


def parse_final_answer(text: str) -> list[str] | None:
    """The listed nodes in order (blank items dropped), or None when the last line carries no answer."""
    last_line = text.strip().rsplit("\n", 1)[-1]
    marker = FINAL_ANSWER.search(last_line)
    if marker is None:
        return None
    closing = last_line.rfind("]", marker.end())
    if closing < 0:
        return None
    listed = last_line[marker.end() : closing].split(",")
    return [node for item in listed if (node := item.strip())]


def f1_score(predicted: set[str], expected: set[str]) -> float:
    """F1 of two node sets; two empty sets agree perfectly, one empty set scores 0."""
    if not predicted and not expected:
        return 1.0
    overlap = len(predicted & expected)
    if overlap == 0:
        return 0.0
    return 2 * overlap / (len(predicted) + len(expected))
