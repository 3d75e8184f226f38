"""The typed format checks a format_verification row lists, and how each one judges a response's text.

Each check is a pydantic model tagged by `type`, so a row with an unknown type, a misspelt key or an
invalid regular expression is refused (422) before any grading. `run(text)` answers (passed, details);
the server calls it in a CPU-pool worker, because row regexes may backtrack catastrophically.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_LISTED = 50
"""Longest list a check's details carry (found headers, spurious markers): details stay readable."""
MAX_SHOWN_CHARS = 200
MAX_PATTERNS = 100
_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}
_CITATION = re.compile(r"\[\s*(\d{1,9}(?:\s*,\s*\d{1,9})*)\s*\]")
_WORD = re.compile(r"\w+(?:(?:['’-]|(?<=\d)[.,](?=\d))\w+)*")
_SENTENCE_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)")
_HAS_WORD = re.compile(r"\w")
_LEADING_NUMBER = re.compile(r"^\d+[.)]\s+")

Outcome = tuple[bool, dict[str, Any]]


def compile_regex(pattern: str, flags: str = "") -> re.Pattern[str]:
    """The compiled pattern; a ValueError (a 422 at validation) names what is wrong with it."""
    try:
        return re.compile(pattern, sum(_REGEX_FLAGS[flag] for flag in set(flags)))
    except (re.error, OverflowError, RecursionError) as error:
        raise ValueError(f"invalid regular expression {pattern[:MAX_SHOWN_CHARS]!r}: {error}") from None


def _valid_patterns(patterns: list[str]) -> list[str]:
    for pattern in patterns:
        compile_regex(pattern)
    return patterns


def _shown(text: str) -> str:
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "…"


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegexCheck(_Check):
    """The pattern must be found somewhere in the text (`must_match: false`: must not be found)."""

    type: Literal["regex"]
    pattern: str
    must_match: bool = True
    flags: str = Field(default="", pattern=r"^[imsx]*$", description="i, m, s, x: re flags")

    @model_validator(mode="after")
    def _compiles(self) -> RegexCheck:
        compile_regex(self.pattern, self.flags)
        return self

    def run(self, text: str) -> Outcome:
        found = compile_regex(self.pattern, self.flags).search(text)
        shown = None if found is None else _shown(found.group(0))
        return (found is not None) == self.must_match, {"matched": found is not None, "match": shown}


class LineRegexCheck(_Check):
    """Between min_matches and max_matches lines must match at least one of the patterns."""

    type: Literal["line_regex"]
    patterns: list[str] = Field(min_length=1, max_length=MAX_PATTERNS)
    min_matches: int = Field(default=1, ge=0)
    max_matches: int | None = Field(default=None, ge=0)

    _patterns_compile = field_validator("patterns")(_valid_patterns)

    def run(self, text: str) -> Outcome:
        compiled = [compile_regex(pattern) for pattern in self.patterns]
        lines = sum(1 for line in text.split("\n") if any(regex.search(line) for regex in compiled))
        passed = lines >= self.min_matches and (self.max_matches is None or lines <= self.max_matches)
        return passed, {
            "matching_lines": lines,
            "min_matches": self.min_matches,
            "max_matches": self.max_matches,
        }


class CitationsCheck(_Check):
    """Numbered citations `[n]` or `[n, m]`: how many distinct sources, and none beyond `num_sources`."""

    type: Literal["citations"]
    min_distinct: int = Field(default=1, ge=0)
    max_distinct: int | None = Field(default=None, ge=0)
    num_sources: int | None = Field(default=None, ge=1)

    def run(self, text: str) -> Outcome:
        cited = sorted(
            {int(number) for found in _CITATION.finditer(text) for number in found.group(1).split(",")}
        )
        out_of_range = [n for n in cited if n < 1 or (self.num_sources is not None and n > self.num_sources)]
        in_bounds = len(cited) >= self.min_distinct and (
            self.max_distinct is None or len(cited) <= self.max_distinct
        )
        details = {"cited": cited[:MAX_LISTED], "out_of_range": out_of_range[:MAX_LISTED]}
        return in_bounds and not out_of_range, details


class MarkersCheck(_Check):
    """Every expected marker appears verbatim; no match of a spurious pattern other than an expected one."""

    type: Literal["markers"]
    expected: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)
    spurious_patterns: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)

    _patterns_compile = field_validator("spurious_patterns")(_valid_patterns)

    def run(self, text: str) -> Outcome:
        missing = [marker for marker in self.expected if marker not in text]
        allowed = set(self.expected)
        matches = (
            found.group(0)
            for pattern in self.spurious_patterns
            for found in compile_regex(pattern).finditer(text)
        )
        spurious = list(itertools.islice((match for match in matches if match not in allowed), MAX_LISTED))
        details = {"expected": self.expected, "missing": missing, "spurious": spurious}
        return not missing and not spurious, details


class _CountBounds(_Check):
    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> _CountBounds:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    def _judge(self, count: int) -> Outcome:
        low_ok = self.min is None or count >= self.min
        return low_ok and (self.max is None or count <= self.max), {"count": count}


class WordCountCheck(_CountBounds):
    """Words are runs of letters/digits, joined by an apostrophe or hyphen ("don't", "well-known"), or by a
    point or comma between digits ("3.14", "1,000")."""

    type: Literal["word_count"]

    def run(self, text: str) -> Outcome:
        return self._judge(sum(1 for _ in _WORD.finditer(text)))


class SentenceCountCheck(_CountBounds):
    """Sentences end with . ! or ? before a space or the end (an approximation: "e.g. x" splits)."""

    type: Literal["sentence_count"]

    def run(self, text: str) -> Outcome:
        return self._judge(sum(1 for piece in _SENTENCE_END.split(text) if _HAS_WORD.search(piece)))


def header_key(title: str) -> str:
    """Header text as compared: leading "1." numbering, case, spacing and a trailing colon ignored."""
    title = _LEADING_NUMBER.sub("", " ".join(title.split()))
    return title.rstrip(":").strip().lower()


def heading_titles(text: str) -> list[str]:
    """Markdown headings (`## Title`) and lines that are wholly bold (`**Title**`), in order."""
    titles = []
    for line in text.split("\n"):
        line = line.strip()
        hashes = len(line) - len(line.lstrip("#"))
        rest = line[hashes:]
        if 1 <= hashes <= 6 and (not rest or rest[0].isspace()):
            titles.append(rest.strip().rstrip("#").strip())
        elif len(line) > 4 and line[:2] in ("**", "__"):
            marker, inner = line[:2], line.rstrip(":")[2:-2]
            if line.rstrip(":").endswith(marker) and marker not in inner:
                titles.append(inner.strip())
    return [title for title in titles if title]


class SectionsCheck(_Check):
    """Each header must be a heading of the text, in the listed order unless `in_order` is false."""

    type: Literal["sections"]
    headers: list[str] = Field(min_length=1, max_length=MAX_PATTERNS)
    in_order: bool = True

    def run(self, text: str) -> Outcome:
        found = heading_titles(text)
        found_keys = [header_key(title) for title in found]
        missing = [header for header in self.headers if header_key(header) not in found_keys]
        ordered = _is_subsequence([header_key(header) for header in self.headers], found_keys)
        details = {"found": found[:MAX_LISTED], "missing": missing, "in_order": ordered}
        return not missing and (ordered or not self.in_order), details


def _is_subsequence(wanted: Sequence[str], found: Sequence[str]) -> bool:
    remaining = iter(found)
    return all(any(key == candidate for candidate in remaining) for key in wanted)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class JsonOnlyCheck(_Check):
    """The whole text (trimmed; optionally one ``` fence around it) is one JSON value, with required keys."""

    type: Literal["json_only"]
    allow_code_fence: bool = False
    required_keys: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)

    def run(self, text: str) -> Outcome:
        body = text.strip()
        if self.allow_code_fence and body.startswith("```") and body.endswith("```") and "\n" in body:
            body = body[body.index("\n") + 1 : -3].strip()
        try:
            value = json.loads(body, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as error:
            return False, {
                "valid_json": False,
                "missing_keys": self.required_keys,
                "error": _shown(str(error)),
            }
        keys = value if isinstance(value, dict) else {}
        missing = [key for key in self.required_keys if key not in keys]
        return not missing, {"valid_json": True, "missing_keys": missing, "error": None}


Check = Annotated[
    RegexCheck
    | LineRegexCheck
    | CitationsCheck
    | MarkersCheck
    | WordCountCheck
    | SentenceCountCheck
    | SectionsCheck
    | JsonOnlyCheck,
    Field(discriminator="type"),
]


def run_checks(text: str, checks: Sequence[Check]) -> list[dict[str, Any]]:
    """Every check's verdict on `text`, in row order (runs in a CPU-pool worker)."""
    results = []
    for check in checks:
        passed, details = check.run(text)
        results.append({"type": check.type, "passed": passed, "details": details})
    return results


# NeMo Gym's rows carry one `verifier` object instead of a list of checks; each kind maps onto a check.


class RegexVerifier(BaseModel):
    """NeMo Gym's freeform-formatting verifier: at least `verify_min_matches` lines match a pattern."""

    model_config = ConfigDict(extra="allow")

    type: Literal["regex", "inline_prose"]
    verify_regex: list[str] = Field(min_length=1, max_length=MAX_PATTERNS)
    verify_min_matches: int = Field(default=1, ge=0)

    _patterns_compile = field_validator("verify_regex")(_valid_patterns)

    def to_check(self) -> LineRegexCheck:
        return LineRegexCheck(
            type="line_regex", patterns=self.verify_regex, min_matches=self.verify_min_matches
        )


class StringMatchVerifier(BaseModel):
    """NeMo Gym's citation verifier: expected markers present, no other match of the detection patterns."""

    model_config = ConfigDict(extra="allow")

    type: Literal["string_match"]
    expected_markers: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)
    patterns: list[str] = Field(default_factory=list, max_length=MAX_PATTERNS)

    _patterns_compile = field_validator("patterns")(_valid_patterns)

    def to_check(self) -> MarkersCheck:
        return MarkersCheck(type="markers", expected=self.expected_markers, spurious_patterns=self.patterns)


Verifier = Annotated[RegexVerifier | StringMatchVerifier, Field(discriminator="type")]
