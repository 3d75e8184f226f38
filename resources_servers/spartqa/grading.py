"""Reading a SpartQA choose-object answer and resolving it to one of the four candidate labels.

A CO question names two objects of a described scene; the candidates are those two, `both of them` and
`none of them`. The answer is read from the response's `Final answer:` line (or a looser answer marker,
or the first line), then resolved: equal to one label (ignoring case, punctuation and a leading article),
an alias of `both`/`none`, or containing exactly one label. A response naming two labels (echoing
"X or Y") resolves to nothing: crediting it for whichever one is gold would reward the echo.
Every step is linear in the response, so grading runs inline.
"""

from __future__ import annotations

import re
import string

from nemo_gym.text.extraction import last_match

BOTH_LABEL = "both of them"
NONE_LABEL = "none of them"
# Other ways of saying the two scene-independent labels; each names one label only.
BOTH_ALIASES = frozenset({"both", "both of them", "both objects", "both of the objects", "both of these"})
NONE_ALIASES = frozenset(
    {"none", "none of them", "none of the objects", "neither", "neither of them", "neither object"}
    | {"no object", "dk", "do not know", "dont know"}
)

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+")
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_CHANNEL_THOUGHT = re.compile(r"<\|channel>thought", re.IGNORECASE)
_CHANNEL_END = re.compile(r"<channel\|>", re.IGNORECASE)
_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)

# Answer markers, most specific first; the last occurrence of the first marker found counts. The first
# three must start a line (after markdown decoration) and end with `:` or `-`.
_LINE_START = r"^[ \t*_`#>-]*"
_MARK_END = r"(?:\s+is)?[ \t*_`]*[:\-]"
ANSWER_MARKERS = tuple(
    re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    for pattern in (
        _LINE_START + r"final\s+answer" + _MARK_END,
        _LINE_START + r"selected\s+answer" + _MARK_END,
        _LINE_START + r"answer" + _MARK_END,
        r"\b(?:the\s+)?(?:final\s+)?answer\s+(?:is|would\s+be|should\s+be)[ \t]*[:\-]?",
        r"\bselected\s+(?:option|answer)\s+(?:is|would\s+be)[ \t]*[:\-]?",
    )
)
# First lines that announce reasoning rather than an answer; without a marker the last line is read.
REASONING_OPENERS = ("thinking process", "analysis", "the user wants", "we need")
MAX_EXTRACTED_CHARS = 200


def normalize(text: str) -> str:
    """Lowercase, punctuation removed, whitespace runs made one space."""
    return " ".join(text.strip().lower().translate(_PUNCTUATION).split())


def label_key(text: str) -> str:
    """`normalize`, without a leading article: the scene says "the red ball", a candidate "red ball"."""
    return _LEADING_ARTICLE.sub("", normalize(text)).strip()


def _without_spans(text: str, opener: re.Pattern[str], closer: re.Pattern[str]) -> str:
    """Text with every opener..closer span removed; an opener never closed is left as it is."""
    kept: list[str] = []
    position = 0
    while (start := opener.search(text, position)) and (end := closer.search(text, start.end())):
        kept.append(text[position : start.start()])
        position = end.end()
    kept.append(text[position:])
    return "".join(kept)


def strip_reasoning(text: str) -> str:
    """Remove `<think>..</think>` and `<|channel>thought..<channel|>` blocks."""
    text = _without_spans(text, _THINK_OPEN, _THINK_CLOSE)
    return _without_spans(text, _CHANNEL_THOUGHT, _CHANNEL_END).strip()


def clean_line(line: str) -> str:
    """A candidate line without bullets, bold markers, stray think tags or wrapping quotes."""
    line = line.strip().lstrip("-*• \t").rstrip("*").strip()
    line = _THINK_TAG.sub("", line).strip()
    return line.strip("\"'` ")


def extract_answer(text: str) -> str:
    """The answer phrase of a response ("" when there is none), cut to MAX_EXTRACTED_CHARS."""
    text = strip_reasoning(text)
    marked = False
    for marker in ANSWER_MARKERS:
        if last := last_match(marker, text):
            text, marked = text[last.end() :], True
            break
    lines = [line for line in map(clean_line, text.splitlines()) if line]
    lines = [line for line in lines if normalize(line) not in ("final answer", "answer")]
    if not lines:
        return ""
    if not marked and len(lines) > 1 and normalize(lines[0]).startswith(REASONING_OPENERS):
        return lines[-1][:MAX_EXTRACTED_CHARS]
    return lines[0][:MAX_EXTRACTED_CHARS]


def candidate_labels(options: list[str]) -> list[str]:
    """The CO labels: the question's objects, then `both of them` and `none of them`, without repeats."""
    labels: dict[str, str] = {}
    for label in [*options, BOTH_LABEL, NONE_LABEL]:
        if (key := label_key(label)) and key not in labels:
            labels[key] = label.strip()
    return list(labels.values())


def resolve_label(prediction: str, labels: list[str]) -> str | None:
    """The one label the prediction names, or None (nothing, or more than one)."""
    key = label_key(prediction)
    if not key:
        return None
    by_key = {label_key(label): label for label in labels}
    if key in by_key:
        return by_key[key]
    for aliases, label in ((BOTH_ALIASES, BOTH_LABEL), (NONE_ALIASES, NONE_LABEL)):
        if key in aliases and label_key(label) in by_key:
            return by_key[label_key(label)]
    hits = [label for label in by_key if label in key]
    # One object may be written inside the other ("a square" in "a big square"): the longer one counts.
    hits = [hit for hit in hits if not any(other != hit and hit in other for other in hits)]
    return by_key[hits[0]] if len(hits) == 1 else None
