"""VerifIF's rule-based validators: one small pure function per instruction id.

A validator is `fn(text, **arguments) -> (followed, message)`. Its keyword-only parameters are the row's
arguments, typed: `ARGUMENTS[instruction_id]` is a pydantic model built from the signature, so a row with
a missing, mistyped or unknown argument is refused before anything is checked (the server answers 422
naming it). Text units come from the IFEval port (resources_servers/instruction_following/checks.py):
a word is a run of `\\w` characters, sentences and blank-line paragraphs are split as there.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import string
from collections import Counter
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model

from resources_servers.instruction_following.checks import (
    EDGE_PUNCTUATION,
    WORD,
    blank_line_paragraphs,
    split_sentences,
)

Relation = Literal["at least", "equal to", "less than"]
Count = Annotated[int, Field(ge=0)]
Phrase = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Letter = Annotated[str, StringConstraints(min_length=1, max_length=1)]
Ratio = Annotated[float, Field(ge=0)]
Fractional = Annotated[
    str, StringConstraints(strip_whitespace=True, pattern=r"^(inf|\d+(\.\d+)?(/\d*[1-9]\d*)?)$")
]
"""A ratio bound as a row writes it: "3", "0.5", "1/3" or "inf"."""
Check = tuple[bool, str]
Validator = Callable[..., Check]

RULES: dict[str, Validator] = {}
ARGUMENTS: dict[str, type[BaseModel]] = {}
VOWELS = frozenset("aeiouAEIOU")
PUNCTUATION = frozenset(string.punctuation) | frozenset("“”‘’«»¿¡…—–")


def rule(instruction_id: str) -> Callable[[Validator], Validator]:
    """Register `fn` and the pydantic model of its keyword-only arguments under `instruction_id`."""

    def register(fn: Validator) -> Validator:
        fields: dict[str, Any] = {
            name: (param.annotation, ...)
            for name, param in inspect.signature(fn, eval_str=True).parameters.items()
            if param.kind is inspect.Parameter.KEYWORD_ONLY
        }
        model_name = "Args_" + re.sub(r"\W", "_", instruction_id)
        ARGUMENTS[instruction_id] = create_model(
            model_name, __config__=ConfigDict(extra="forbid", strict=False), **fields
        )
        RULES[instruction_id] = fn
        return fn

    return register


def relate(count: float, relation: Relation, target: float) -> bool:
    if relation == "at least":
        return count >= target
    if relation == "less than":
        return count < target
    return count == target


def counted(what: str, count: float, relation: Relation, target: float) -> Check:
    followed = relate(count, relation, target)
    return followed, f"{count:g} {what} (wanted {relation} {target:g})"


def words(text: str) -> list[str]:
    return WORD.findall(text)


def ratio_bound(raw: str) -> float:
    return float("inf") if raw == "inf" else float(Fraction(raw))


def in_range(what: str, value: float, low: str, high: str) -> Check:
    lo, hi = ratio_bound(low), ratio_bound(high)
    return lo <= value <= hi, f"{what} {value:.3g} (wanted {low}..{high})"


def ok(followed: bool, why_not: str) -> Check:
    return followed, "followed" if followed else why_not


def alternating(word: str) -> bool:
    letters = [ch.isupper() for ch in word if ch.isalpha()]
    return all(a != b for a, b in itertools.pairwise(letters))


def first_letter_capital(token: str) -> bool:
    letters = [ch for ch in token if ch.isalpha()]
    return not letters or (letters[0].isupper() and all(ch.islower() for ch in letters[1:]))


def punctuation_marks(text: str) -> list[str]:
    return [ch for ch in text if ch in PUNCTUATION]


# ---- change_case ------------------------------------------------------------------------------------------


@rule("change_case:all_caps")
def all_caps(text: str) -> Check:
    return ok(text.isupper(), "not all in capitals")


@rule("change_case:lowercase")
def lowercase(text: str) -> Check:
    return ok(text.islower(), "not all in lowercase")


@rule("change_case:alternating")
def alternating_case(text: str) -> Check:
    bad = [w for w in words(text) if w.isalpha() and not alternating(w)]
    return ok(not bad, f"not alternating: {bad[:3]}")


@rule("change_case:first_letter_cap")
def first_letter_cap(text: str) -> Check:
    bad = [token for token in text.split() if not first_letter_capital(token)]
    return ok(not bad, f"not capitalized as a title: {bad[:3]}")


@rule("change_case:capital_word_frequency")
def capital_word_frequency(text: str, *, capital_relation: Relation, capital_frequency: Count) -> Check:
    count = sum(1 for w in words(text) if w.isupper())
    return counted("all-capital words", count, capital_relation, capital_frequency)


@rule("change_case:lowercase_word_frequency")
def lowercase_word_frequency(text: str, *, lowercase_relation: Relation, lowercase_frequency: Count) -> Check:
    count = sum(1 for w in words(text) if w.islower())
    return counted("lowercase words", count, lowercase_relation, lowercase_frequency)


def _target_occurrences(text: str, target: str) -> list[str]:
    return re.findall(rf"(?<!\w){re.escape(target.strip())}(?!\w)", text, re.IGNORECASE)


def _target_check(text: str, target: str, shape: Callable[[str], bool], name: str) -> Check:
    found = _target_occurrences(text, target)
    if not found:
        return False, f"{target!r} does not occur"
    bad = [occurrence for occurrence in found if not shape(occurrence)]
    return ok(not bad, f"{bad[0]!r} is not {name}" if bad else "")


@rule("change_case:all_caps_target")
def all_caps_target(text: str, *, target_string: Phrase) -> Check:
    return _target_check(text, target_string, str.isupper, "in capitals")


@rule("change_case:lowercase_target")
def lowercase_target(text: str, *, target_string: Phrase) -> Check:
    return _target_check(text, target_string, str.islower, "in lowercase")


@rule("change_case:alternating_target")
def alternating_target(text: str, *, target_string: Phrase) -> Check:
    return _target_check(text, target_string, alternating, "in alternating case")


@rule("change_case:first_letter_cap_target")
def first_letter_cap_target(text: str, *, target_string: Phrase) -> Check:
    return _target_check(text, target_string, str.istitle, "capitalized as a title")


@rule("change_case:case_ratio")
def case_ratio(text: str, *, min_fraction: Fractional, max_fraction: Fractional) -> Check:
    """Lowercase letters per uppercase letter."""
    lower = sum(ch.islower() for ch in text)
    upper = sum(ch.isupper() for ch in text)
    if not lower and not upper:
        return False, "no letters"
    return in_range("lower/upper ratio", lower / upper if upper else float("inf"), min_fraction, max_fraction)


@rule("change_case:first_letter_sentence")
def first_letter_sentence(text: str) -> Check:
    heads = [s.lstrip("([{\"'“‘") for s in split_sentences(text)]
    bad = [s for s in heads if s and not s[0].isupper()]
    return ok(not bad, f"sentence starts in lowercase: {bad[0][:40]!r}" if bad else "")


@rule("change_case:last_letter")
def last_letter(text: str, *, case: Literal["uppercase", "lowercase", "digit", "special"]) -> Check:
    tokens = re.sub(r"[.!?]+$", "", text.strip()).split()
    last = tokens[-1].strip("()[]{}\"'") if tokens else ""
    if not last:
        return False, "no last word"
    ch = last[-1]
    shapes = {
        "uppercase": ch.isupper(),
        "lowercase": ch.islower(),
        "digit": ch.isdigit(),
        "special": not ch.isalnum(),
    }
    return ok(shapes[case], f"last character {ch!r} is not {case}")


@rule("change_case:vowel_consonant_balance")
def vowel_consonant_balance(text: str, *, min_fraction: Fractional, max_fraction: Fractional) -> Check:
    letters = [ch for ch in text if ch.isalpha()]
    vowels = sum(ch in VOWELS for ch in letters)
    consonants = len(letters) - vowels
    if not letters:
        return False, "no letters"
    value = vowels / consonants if consonants else float("inf")
    return in_range("vowel/consonant ratio", value, min_fraction, max_fraction)


# ---- detectable_content -----------------------------------------------------------------------------------


@rule("detectable_content:number_placeholders")
def number_placeholders(text: str, *, relation: Relation, num_placeholders: Count) -> Check:
    return counted("[placeholders]", len(re.findall(r"\[[^\[\]\n]+\]", text)), relation, num_placeholders)


@rule("detectable_content:postscript")
def postscript(text: str, *, postscript_marker: Phrase) -> Check:
    """The last non-blank line starts with the marker and says something after it."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return ok(
        last.startswith(postscript_marker) and len(last) > len(postscript_marker), "no closing postscript"
    )


@rule("detectable_content:numeric_inclusion")
def numeric_inclusion(text: str, *, relation: Relation, num_numbers: Count) -> Check:
    return counted("digits", sum(ch.isdigit() for ch in text), relation, num_numbers)


# ---- detectable_format ------------------------------------------------------------------------------------


@rule("detectable_format:json_format")
def json_format(text: str) -> Check:
    """The span from the first `{` to the last `}` parses as JSON (so a fenced block passes)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return False, "no JSON object"
    try:
        json.loads(text[start : end + 1])
    except (ValueError, RecursionError):
        return False, "not valid JSON"
    return True, "followed"


@rule("detectable_format:multiple_sections")
def multiple_sections(
    text: str, *, section_splitter: Phrase, relation: Relation, num_sections: Count
) -> Check:
    """Markdown headings "# <splitter> <number>", any level, case-insensitive."""
    pattern = rf"^[ \t]*#{{1,6}}[ \t]+{re.escape(section_splitter)}[ \t]+\d+\b"
    return counted(
        "sections", len(re.findall(pattern, text, re.MULTILINE | re.IGNORECASE)), relation, num_sections
    )


@rule("detectable_format:numbered_list")
def numbered_list(text: str, *, relation: Relation, num_numbered_items: Count) -> Check:
    count = len(re.findall(r"^[ \t]*\d+[.)][ \t]+\S", text, re.MULTILINE))
    return counted("numbered items", count, relation, num_numbered_items)


@rule("detectable_format:number_bullet_lists")
def number_bullet_lists(text: str, *, relation: Relation, num_bullets: Count) -> Check:
    count = len(re.findall(r"^[ \t]*[*+-][ \t]+\S", text, re.MULTILINE))
    return counted("bullet points", count, relation, num_bullets)


@rule("detectable_format:title")
def title(text: str) -> Check:
    first = text.strip().split("\n", 1)[0].strip()
    return ok(
        len(first) > 4 and first.startswith("<<") and first.endswith(">>"), "first line is no <<title>>"
    )


@rule("detectable_format:number_paragraphs")
def number_paragraphs(text: str, *, relation: Relation, num_paragraphs: Count) -> Check:
    return counted("paragraphs", len(blank_line_paragraphs(text)), relation, num_paragraphs)


@rule("detectable_format:max_paragraph_length")
def max_paragraph_length(text: str, *, max_chars: Count) -> Check:
    for paragraph in blank_line_paragraphs(text):
        body = re.sub(r"^(?:[-*+]\s+|\d+\.\s+|#+\s+)", "", paragraph).strip()
        if len(body) > max_chars:
            return False, f"a paragraph has {len(body)} characters (max {max_chars})"
    return True, "followed"


@rule("detectable_format:sentences_per_paragraph")
def sentences_per_paragraph(text: str, *, relation: Relation, num_sentences: Count) -> Check:
    for number, paragraph in enumerate(blank_line_paragraphs(text), start=1):
        followed, message = counted("sentences", len(split_sentences(paragraph)), relation, num_sentences)
        if not followed:
            return False, f"paragraph {number}: {message}"
    return True, "followed"


@rule("detectable_format:sentence_count")
def sentence_count(text: str, *, relation: Relation, num_sentences: Count) -> Check:
    return counted("sentences", len(split_sentences(text)), relation, num_sentences)


@rule("detectable_format:sentence_endings")
def sentence_endings(text: str, *, min_variants: Count) -> Check:
    kinds = set(punctuation_marks(text))
    return ok(
        len(kinds) >= min_variants, f"{len(kinds)} kinds of punctuation (wanted at least {min_variants})"
    )


@rule("detectable_format:nested_list")
def nested_list(text: str, *, min_depth: Annotated[int, Field(ge=1)], num_subitems: Count) -> Check:
    """Some run of consecutive list items at nesting level `min_depth` (1 = top; +1 per indent step of two or
    more spaces, or a tab) has at least `num_subitems` items."""
    runs: Counter[tuple[int, int]] = Counter()
    indents: list[int] = []
    run_id = 0
    for line in text.splitlines():
        item = re.match(r"^([ \t]*)(?:[*+-]|\d+[.)])[ \t]+\S", line)
        if not item:
            if line.strip():
                indents, run_id = [], run_id + 1
            continue
        width = len(item.group(1).replace("\t", "    "))
        while indents and indents[-1] > width:
            indents.pop()
        if not indents or indents[-1] < width:
            indents.append(width)
        runs[(run_id, len(indents))] += 1
    best = max((n for (_, level), n in runs.items() if level == min_depth), default=0)
    return ok(best >= num_subitems, f"{best} items at level {min_depth} (wanted at least {num_subitems})")


@rule("detectable_format:table")
def table(text: str, *, min_rows: Count, min_cols: Count) -> Check:
    """A markdown table (header, `---` separator, rows); `min_rows` counts the body rows."""
    lines = [line.strip() for line in text.splitlines()]
    best = (0, 0)
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*\|?", lines[i + 1]):
            cols = len([cell for cell in lines[i].strip("|").split("|")])
            rows = 0
            while i + 2 + rows < len(lines) and lines[i + 2 + rows].startswith("|"):
                rows += 1
            if rows >= min_rows and cols >= min_cols:
                return True, f"table of {rows} rows and {cols} columns"
            best = max(best, (rows, cols))
    return False, f"no table of at least {min_rows} rows and {min_cols} columns (largest {best[0]}x{best[1]})"


@rule("detectable_format:heading_depth")
def heading_depth(
    text: str, *, levels: Annotated[list[Annotated[int, Field(ge=1, le=6)]], Field(min_length=1)]
) -> Check:
    present = {len(marks) for marks in re.findall(r"^[ \t]*(#{1,6})[ \t]+\S", text, re.MULTILINE)}
    missing = sorted(set(levels) - present)
    return ok(not missing, f"no heading of level {missing}")


# ---- keywords ---------------------------------------------------------------------------------------------


def occurrences(text: str, phrase: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, re.IGNORECASE))


@rule("keywords:existence")
def existence(text: str, *, keywords: Annotated[list[Phrase], Field(min_length=1)]) -> Check:
    missing = [k for k in keywords if not occurrences(text, k)]
    return ok(not missing, f"missing: {missing}")


@rule("keywords:frequency")
def frequency(text: str, *, keyword: Phrase, relation: Relation, frequency: Count) -> Check:
    return counted(f"times {keyword!r}", occurrences(text, keyword), relation, frequency)


@rule("keywords:forbidden_words")
def forbidden_words(text: str, *, forbidden_words: list[Phrase]) -> Check:
    present = [w for w in forbidden_words if occurrences(text, w)]
    return ok(not present, f"forbidden words used: {present}")


@rule("keywords:letter_frequency")
def letter_frequency(text: str, *, letter: Letter, let_relation: Relation, let_frequency: Count) -> Check:
    return counted(f"letters {letter!r}", text.lower().count(letter.lower()), let_relation, let_frequency)


@rule("keywords:alliteration")
def alliteration(text: str, *, target_letter: Letter, relation: Relation, num_alliteration: Count) -> Check:
    count = sum(1 for w in words(text) if w.lower().startswith(target_letter.lower()))
    return counted(f"words starting with {target_letter!r}", count, relation, num_alliteration)


@rule("keywords:palindrome_word")
def palindrome_word(text: str, *, min_length: Annotated[int, Field(ge=1)]) -> Check:
    found = [w for w in words(text) if len(w) >= min_length and w.lower() == w.lower()[::-1]]
    return ok(bool(found), f"no palindrome of at least {min_length} letters")


@rule("keywords:positioning")
def positioning(text: str, *, keyword: Phrase, position: Count) -> Check:
    """The word at 0-based `position` is the keyword."""
    found = words(text)
    if position >= len(found):
        return False, f"only {len(found)} words"
    return ok(found[position].lower() == keyword.lower(), f"word {position} is {found[position]!r}")


@rule("keywords:vowel_count")
def vowel_count(text: str, *, relation: Relation, num_vowels: Count) -> Check:
    return counted("vowels", sum(ch in VOWELS for ch in text), relation, num_vowels)


@rule("keywords:consonant_count")
def consonant_count(text: str, *, relation: Relation, num_consonants: Count) -> Check:
    count = sum(ch in string.ascii_letters and ch not in VOWELS for ch in text)
    return counted("consonants", count, relation, num_consonants)


# ---- length -----------------------------------------------------------------------------------------------


@rule("length_constraints:number_characters")
def number_characters(text: str, *, relation: Relation, num_chars: Count) -> Check:
    return counted("characters", len(text), relation, num_chars)


@rule("length_constraints:number_words")
def number_words(text: str, *, relation: Relation, num_words: Count) -> Check:
    return counted("words", len(words(text)), relation, num_words)


@rule("length:max_word_count")
def max_word_count(text: str, *, max_words: Count) -> Check:
    count = len(words(text))
    return ok(count <= max_words, f"{count} words (max {max_words})")


@rule("length_constraints:sentence_length")
def sentence_length(text: str, *, max_words: Count) -> Check:
    longest = max((len(words(s)) for s in split_sentences(text)), default=0)
    return ok(longest <= max_words, f"a sentence has {longest} words (max {max_words})")


@rule("length_constraints:word_repetition")
def word_repetition(text: str, *, max_repeats: Count) -> Check:
    counts = Counter(w.lower() for w in words(text))
    worst = counts.most_common(1)
    return ok(not worst or worst[0][1] <= max_repeats, f"{worst[0][0]!r} x{worst[0][1]}" if worst else "")


@rule("length_constraints:unique_words")
def unique_words(text: str, *, relation: Relation, num_unique: Count) -> Check:
    return counted("distinct words", len({w.lower() for w in words(text)}), relation, num_unique)


@rule("length_constraints:word_length")
def word_length(text: str, *, min_length: Count, max_length: Count) -> Check:
    found = words(text)
    if min_length > max_length:
        return False, "min_length is above max_length"
    bad = [w for w in found if not min_length <= len(w) <= max_length]
    return ok(not bad, f"{bad[0]!r} has {len(bad[0])} characters" if bad else "")


@rule("length_constraints:avg_word_length")
def avg_word_length(text: str, *, min_ratio: Ratio, max_ratio: Ratio) -> Check:
    found = words(text)
    mean = sum(map(len, found)) / len(found) if found else 0.0
    return ok(
        min_ratio <= mean <= max_ratio, f"mean word length {mean:.2f} (wanted {min_ratio}..{max_ratio})"
    )


@rule("length_constraints:paragraph_length")
def paragraph_length(text: str, *, relation: Relation, words_per_paragraph: Count) -> Check:
    for number, paragraph in enumerate(blank_line_paragraphs(text), start=1):
        followed, message = counted("words", len(words(paragraph)), relation, words_per_paragraph)
        if not followed:
            return False, f"paragraph {number}: {message}"
    return True, "followed"


# ---- punctuation ------------------------------------------------------------------------------------------


@rule("punctuation:no_comma")
def no_comma(text: str) -> Check:
    return ok("," not in text, "has a comma")


@rule("punctuation:no_period")
def no_period(text: str) -> Check:
    return ok("." not in text, "has a period")


@rule("punctuation:question_exclaim")
def question_exclaim(text: str, *, relation: Relation, num_marks: Count) -> Check:
    return counted("? and ! marks", len(re.findall(r"[?!]", text)), relation, num_marks)


@rule("punctuation:end_rule")
def end_rule(text: str, *, allowed: list[Annotated[str, StringConstraints(min_length=1)]]) -> Check:
    """Only the allowed punctuation marks appear."""
    other = sorted(set(punctuation_marks(text)) - set(allowed))
    return ok(not other, f"punctuation not allowed: {other}")


@rule("punctuation:frequency")
def punctuation_frequency(text: str, *, punctuation: Letter, relation: Relation, frequency: Count) -> Check:
    return counted(f"{punctuation!r} marks", text.count(punctuation), relation, frequency)


@rule("punctuation:balance")
def punctuation_balance(text: str) -> Check:
    """Brackets nest properly and straight double quotes come in pairs."""
    closing = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in text:
        if ch in "([{":
            stack.append(ch)
        elif ch in closing and (not stack or stack.pop() != closing[ch]):
            return False, f"unmatched {ch!r}"
    if stack:
        return False, f"unclosed {stack[-1]!r}"
    return ok(text.count('"') % 2 == 0, "an odd number of double quotes")


@rule("punctuation:variety")
def punctuation_variety(text: str, *, min_types: Count) -> Check:
    kinds = set(punctuation_marks(text))
    return ok(len(kinds) >= min_types, f"{len(kinds)} kinds of punctuation (wanted at least {min_types})")


# ---- startend ---------------------------------------------------------------------------------------------


@rule("startend:start_checker")
def start_checker(text: str, *, start_phrase: Phrase) -> Check:
    head = text.lstrip(EDGE_PUNCTUATION + " \t\n").lower()
    return ok(head.startswith(start_phrase.lower()), "does not start with the phrase")


@rule("startend:end_checker")
def end_checker(text: str, *, end_phrase: Phrase) -> Check:
    """Ends with the phrase (case-insensitive); trailing punctuation the phrase lacks is ignored."""
    tail = text.strip().lower()
    if end_phrase[-1] not in string.punctuation:
        tail = tail.rstrip(string.punctuation + " ")
    return ok(tail.endswith(end_phrase.lower()), f"does not end with {end_phrase!r}")


@rule("startend:wrap_checker")
def wrap_checker(text: str, *, wrap_phrase: Annotated[str, StringConstraints(min_length=1)]) -> Check:
    stripped = text.strip()
    wrapped = (
        len(stripped) >= 2 * len(wrap_phrase)
        and stripped.startswith(wrap_phrase)
        and stripped.endswith(wrap_phrase)
    )
    return ok(wrapped, f"not wrapped in {wrap_phrase!r}")


@rule("startend:quotation")
def quotation(text: str) -> Check:
    stripped = text.strip()
    return ok(
        len(stripped) > 1 and stripped[0] == '"' and stripped[-1] == '"', "not wrapped in double quotes"
    )
