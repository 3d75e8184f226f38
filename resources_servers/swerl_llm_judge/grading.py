"""Reading the judge's choice out of `<solution>...</solution>`.

Two modes, as NeMo Gym's swerl_llm_judge has them:

- lenient: the **last** solution block; its first standalone letter (one not touching another letter,
  so `[B]` or `B.` but not the `T` of `The`) is the choice, provided it is an option letter;
- strict: the **first** block holding nothing but one letter, optionally in square brackets
  (`<solution>[C]</solution>`); tags are case-sensitive here, as in NeMo Gym.

The lenient blocks are found with one left-to-right pass over the tag positions, so a reply full of
unclosed `<solution>` tags costs linear time, not the quadratic time of a lazy-match search.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

OPEN_TAG = re.compile(r"<solution>", re.IGNORECASE)
CLOSE_TAG = re.compile(r"</solution>", re.IGNORECASE)
STRICT_BLOCK = re.compile(r"<solution>\s*\[?([A-Za-z])\]?\s*</solution>")


def option_letters(options: Sequence[Mapping[str, str]] | None) -> frozenset[str]:
    """The upper-case letters that name the options (each option is a one-key dict `{"A": "patch"}`)."""
    return frozenset(key.upper() for option in options or () for key in option)


def last_solution_block(text: str) -> str | None:
    """The stripped content of the last `<solution>...</solution>` block (blocks taken left to right, each
    closed by the first closing tag after its opening one), or None when there is none."""
    opens = [(match.start(), match.end()) for match in OPEN_TAG.finditer(text)]
    closes = [(match.start(), match.end()) for match in CLOSE_TAG.finditer(text)]
    found, position, close_index = None, 0, 0
    for open_start, open_end in opens:
        if open_start < position:
            continue
        while close_index < len(closes) and closes[close_index][0] < open_end:
            close_index += 1
        if close_index == len(closes):
            break
        close_start, position = closes[close_index]
        found = text[open_end:close_start].strip()
    return found


def first_standalone_letter(content: str) -> str | None:
    """The first letter whose neighbours are not letters, upper-cased."""
    for index, char in enumerate(content):
        if not char.isalpha():
            continue
        before = content[index - 1] if index > 0 else ""
        after = content[index + 1] if index + 1 < len(content) else ""
        if not before.isalpha() and not after.isalpha():
            return char.upper()
    return None


def lenient_choice(text: str, allowed: Collection[str]) -> str | None:
    """The choice in the last solution block; None when it names no option (`allowed` empty: any letter)."""
    block = last_solution_block(text)
    letter = first_standalone_letter(block) if block else None
    return letter if letter is not None and (not allowed or letter in allowed) else None


def strict_choice(text: str, allowed: Collection[str]) -> str | None:
    """The letter of the first block that holds only a letter; None when it names no option."""
    match = STRICT_BLOCK.search(text)
    letter = match.group(1).upper() if match else None
    return letter if letter is not None and (not allowed or letter in allowed) else None
