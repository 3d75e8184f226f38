"""Which option letter a GPQA-Diamond answer picks, as plain functions the CPU pool's workers import.

A row's `template_metadata.output_regex` is data, and a pathological pattern must be interruptible off the
server's event loop, so extraction runs in a worker. Without a template (or when it finds nothing) the
GPQA conventions apply: the *last* `\\boxed{...}`, else the *last* `Answer: X` line, because models often
restate options before settling on one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nemo_gym.text.extraction import Options, last_boxed, last_match, letter_from_patterns

_STANDALONE_CAPITAL = re.compile(r"\b([A-Z])\b")
# `Answer: C`, `**Answer:** C`, `__Answer__: c`; the letter must not start a longer word.
_ANSWER_LINE = re.compile(r"[*_]{0,2}answer[*_]{0,2}\s*:[\s*_]{0,2}\s*([a-z])(?![a-z0-9])", re.IGNORECASE)


def from_boxed(text: str) -> str | None:
    """A lone capital in the last box, or else its last standalone capital (`\\boxed{\\text{(C)}}` -> C)."""
    content = last_boxed(text)
    if content is None:
        return None
    content = content.strip()
    if len(content) == 1 and content.isupper():
        return content
    capitals = _STANDALONE_CAPITAL.findall(content)
    return capitals[-1] if capitals else None


def from_answer_line(text: str) -> str | None:
    last = last_match(_ANSWER_LINE, text)
    return last.group(1).upper() if last else None


def extract_letter(text: str, options: Options, template_patterns: Sequence[str]) -> str | None:
    """The chosen letter: template regex, then last box, then last `Answer:`; a letter that is not one of the
    options counts as no answer unless a template pattern produced it."""
    text = text.strip()
    if not text:
        return None
    if template_patterns and (letter := letter_from_patterns(text, template_patterns, options)):
        return letter
    letter = from_boxed(text) or from_answer_line(text)
    allowed = {option_letter for option_letter, _ in options}
    if letter is not None and allowed and letter not in allowed:
        return None
    return letter
