"""What the IMO ProofBench judge is shown and how its answer is read: the answer the model boxed (its
reasoning removed), and the judge's verdict in one of three forms, the `<points>N out of 7</points>` score
being the one the shipped prompt asks for."""

from __future__ import annotations

import re

from nemo_gym.text.extraction import final_boxed as last_boxed  # noqa: F401  the app and tests read it here

PASS_POINTS = 6  # a proof scored 6 or 7 out of 7 counts as correct
MAX_POINTS = 7

THINK_BLOCK = re.compile(r"<(think|thinking)>.*?</\1>", re.DOTALL)
UNOPENED_CLOSE = re.compile(r"^.*?</(?:think|thinking)>", re.DOTALL)
UNCLOSED_OPEN = re.compile(r"<(?:think|thinking)>", re.DOTALL)

JUDGEMENT = re.compile(r"\*{0,2}judgement\*{0,2}\s*:\s*\*{0,2}\s*(yes|no)", re.IGNORECASE)
BOXED_VERDICT = re.compile(r"\\boxed\s*\{\s*(correct|incorrect)\s*\}", re.IGNORECASE)
POINTS = re.compile(r"<points>\s*(\d+)\s*out\s+of\s+7\s*</points>", re.IGNORECASE)


def without_reasoning(text: str) -> str:
    """`text` without its `<think>`/`<thinking>` blocks. A closing tag without its opening one drops all
    before it; an opening tag never closed (the output was cut off while reasoning) leaves nothing."""
    text = THINK_BLOCK.sub("", text)
    text = UNOPENED_CLOSE.sub("", text)
    if UNCLOSED_OPEN.search(text):
        return ""
    return text.strip()


def read_points(judge_text: str) -> int | None:
    """N of the first `<points>N out of 7</points>` (0 to 7), or None."""
    match = POINTS.search(judge_text)
    if match is None or int(match.group(1)) > MAX_POINTS:
        return None
    return int(match.group(1))


def read_verdict(judge_text: str) -> bool | None:
    """True (correct) or False, from the first form found in this order: `Judgement: Yes/No` (bold allowed),
    `\\boxed{Correct}`/`\\boxed{Incorrect}`, `<points>N out of 7</points>` (correct when N >= 6); None when
    the judge gave none of them."""
    judgement = JUDGEMENT.search(judge_text)
    if judgement is not None:
        return judgement.group(1).lower() == "yes"
    boxed = BOXED_VERDICT.search(judge_text)
    if boxed is not None:
        return boxed.group(1).lower() == "correct"
    points = read_points(judge_text)
    return None if points is None else points >= PASS_POINTS
