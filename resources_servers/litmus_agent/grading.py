"""Locating a typed answer in a response and scoring it against the expected value.

Three separate choices, each from the row: where the answer is (a row regex `output_regex`, else one of
the named wrapper formats `fmt_00`..`fmt_30`), how the captured text is read (`float`, `bool`, `string`),
and how the read value is compared (a reward rule, by default the type's own). Row regexes come from
data and may backtrack badly, so `extract_value` is meant to run in the CPU pool with a deadline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Literal

from nemo_gym.text.extraction import last_match

AnswerType = Literal["float", "bool", "string"]
RuleName = Literal["exact", "isclose", "abs_window", "rel_window", "bool_eq", "string_eq"]
Value = float | str

# The wrapper a prompt asked the answer to be written in, by its dataset name. The last match counts.
ANSWER_FORMATS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.DOTALL)
    for name, pattern in {
        "fmt_00": r"\(\((.*?)\)\)",  # ((answer))
        "fmt_01": r"\(Answer:\s*(.+?)\)",
        "fmt_02": r"Final answer:\s*\((.+?)\)",
        "fmt_03": r"Answer is\s*\[(.+?)\]",
        "fmt_04": r"\[Answer:\s*(.+?)\]",
        "fmt_05": r"\[\[(.+?)\]\]",
        "fmt_06": r"Correct Answer:\s*\[(.+?)\]",
        "fmt_07": r"\\boxed\{(.+?)\}",
        "fmt_08": r"\\boxed\{(.+?)\}",
        "fmt_09": r"\{\{(.+?)\}\}",
        "fmt_10": r"Answer Value:\s*\{(.+?)\}",
        "fmt_11": r"<<(.+?)>>",
        "fmt_12": r"<<(.+?)>>",
        "fmt_13": r"<(.+?)>",
        "fmt_14": r"<Answer:\s*(.+?)>",
        "fmt_15": r"<final_answer>\s*(.+?)\s*</final_answer>",
        "fmt_16": r"Final Answer:\s*\|\|(.+?)\|\|",
        "fmt_17": r"The answer is:\s*\|(.+?)\|",
        "fmt_18": r"\*\*Answer:\s*(.+?)\*\*",
        "fmt_19": r"\*\*Final answer is:\s*(.+?)\*\*",
        "fmt_20": r"Answer:\s*\*(.+?)\*",
        "fmt_21": r"## Answer:\s*(.+?)\s*##",
    }.items()
} | {
    # One-line formats: the answer runs to the end of its line.
    name: re.compile(pattern)
    for name, pattern in {
        "fmt_22": r"ANSWER IS\s*(.+)",
        "fmt_23": r"Response:\s*(.+)",
        "fmt_24": r"Final Answer\s*->\s*(.+)",
        "fmt_25": r"Final value is:\s*(.+)",
        "fmt_26": r"Correct Answer >>\s*(.+)",
        "fmt_27": r"Answer Value:\s*(.+)",
        "fmt_28": r"Final Answer\s*=\s*(.+)",
        "fmt_29": r"Correct answer is\s*(.+)",
        "fmt_30": r"Final Answer:\s*(.+)",
    }.items()
}
BOXED_FORMAT, DOUBLE_PARENTHESES_FORMAT = "fmt_07", "fmt_00"

# Rows written before `answer_type` existed name a chemistry property kind instead.
LEGACY_PROPERTY_TYPES: dict[str, AnswerType] = {
    "float": "float",
    "count": "float",
    "fragment": "float",
    "bool": "bool",
    "presence": "bool",
}
# Those legacy kinds were counts or flags: read as numbers and, unless the row says otherwise, rounded.
LEGACY_DISCRETE_PROPERTY_TYPES = frozenset({"count", "fragment", "bool", "presence"})

_TRUE = frozenset({"1", "1.0", "true", "yes", "present", "t", "y"})
_FALSE = frozenset({"0", "0.0", "false", "no", "absent", "f", "n"})
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def compile_output_regex(output_regex: str) -> re.Pattern[str]:
    """A row's answer regex; ValueError unless it compiles with exactly one capture group."""
    try:
        pattern = re.compile(output_regex, re.DOTALL)
    except (re.error, OverflowError, RecursionError) as error:
        raise ValueError(f"output_regex does not compile: {error}") from None
    if pattern.groups != 1:
        raise ValueError(f"output_regex must have exactly one capture group, it has {pattern.groups}")
    return pattern


def last_capture(text: str, pattern: re.Pattern[str]) -> str | None:
    """The stripped group of the last match (a model that corrects itself is scored on its last word)."""
    last = last_match(pattern, text)
    if last is None:
        return None
    groups = last.groups()
    return next((group for group in groups if group), "").strip() if groups else last.group(0).strip()


def parse_number(text: str) -> float | None:
    """The text as a float, else its last number-like token; None when there is none."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    numbers = _NUMBER.findall(text)
    return float(numbers[-1]) if numbers else None


def parse_bool(text: str) -> float | None:
    """1.0 or 0.0 for a yes/no-like token or a number (non-zero is true); None otherwise."""
    token = text.strip().lower()
    if token in _TRUE:
        return 1.0
    if token in _FALSE:
        return 0.0
    number = parse_number(token)
    return None if number is None else float(number != 0.0)


def extract_value(
    text: str, parse_as: AnswerType, output_regex: str | None, answer_format: str
) -> Value | None:
    """The answer the row's regex (else its named format) captures, read as `parse_as`; None when the
    pattern finds nothing or the capture cannot be read."""
    pattern = (
        compile_output_regex(output_regex) if output_regex is not None else ANSWER_FORMATS[answer_format]
    )
    captured = last_capture(text.strip(), pattern)
    if captured is None:
        return None
    if parse_as == "string":
        return captured
    return parse_bool(captured) if parse_as == "bool" else parse_number(captured)


# ---------------------------------------------------------------------------------------------------------
# Reward rules: (predicted, expected, **params) -> reward in [0, 1]


def _exact(predicted: Value, expected: Any, **_: Any) -> float:
    return float(round(float(predicted)) == round(float(expected)))


def _isclose(predicted: Value, expected: Any, *, rel_tol: float, abs_tol: float, **_: Any) -> float:
    return float(math.isclose(float(predicted), float(expected), rel_tol=rel_tol, abs_tol=abs_tol))


def _abs_window(predicted: Value, expected: Any, *, abs_tol: float = 0.0, **_: Any) -> float:
    return float(abs(float(predicted) - float(expected)) <= abs_tol)


def _rel_window(predicted: Value, expected: Any, *, rel_tol: float = 0.0, **_: Any) -> float:
    return float(abs(float(predicted) - float(expected)) <= abs(rel_tol * float(expected)))


def _bool_eq(predicted: Value, expected: Any, **_: Any) -> float:
    gold = parse_bool(str(expected))
    return float(gold is not None and float(predicted) == gold)


def normalized_string(value: object) -> str:
    return " ".join(str(value).lower().split())


def _string_eq(predicted: Value, expected: Any, **_: Any) -> float:
    return float(normalized_string(predicted) == normalized_string(expected))


REWARD_RULES: dict[str, Callable[..., float]] = {
    "exact": _exact,
    "isclose": _isclose,
    "abs_window": _abs_window,
    "rel_window": _rel_window,
    "bool_eq": _bool_eq,
    "string_eq": _string_eq,
}
DEFAULT_RULES: dict[str, RuleName] = {"float": "isclose", "bool": "bool_eq", "string": "string_eq"}
NUMERIC_RULES = frozenset({"exact", "isclose", "abs_window", "rel_window"})


def score(
    predicted: Value | None, expected: Any, rule: str, params: dict[str, Any], rel_tol: float, abs_tol: float
) -> float:
    """The rule's reward; 0.0 for no prediction, a NaN or infinite one, or a text one under a numeric
    rule (a `string` row scored with `exact` whose answer is not a number)."""
    if predicted is None or (isinstance(predicted, float) and not math.isfinite(predicted)):
        return 0.0
    if rule in NUMERIC_RULES | {"bool_eq"} and isinstance(predicted, str):
        number = parse_number(predicted)
        if number is None or not math.isfinite(number):
            return 0.0
        predicted = number
    return REWARD_RULES[rule](predicted, expected, **{"rel_tol": rel_tol, "abs_tol": abs_tol, **params})
