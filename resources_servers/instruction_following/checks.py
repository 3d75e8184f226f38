"""Verifiable instructions (IFEval and the extra ids of NeMo Gym's instruction-following data).

Each instruction id maps to a checker `fn(text, **kwargs) -> bool`. Checkers are wrapped in pydantic's
`validate_call`, so kwargs of the wrong name, type or value raise instead of checking something else;
`grade` turns any such error into "not followed" and reports it. Every regex here is linear or close to
it, but all of them scan model text of any length, so the server runs `grade` in the CPU pool.

Text units (documented in the README, they differ from the NLTK/spaCy ones NeMo Gym's library uses):
a word is a run of `\\w` characters; a whitespace token with punctuation trimmed from both ends is what
"the first/last word" means; sentences end at `.`, `!`, `?` or `…` followed by whitespace (not after a
known abbreviation, an initial or a list number) and at blank lines.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable
from typing import Annotated, Any, Literal

from langdetect import DetectorFactory, LangDetectException, detect
from pydantic import Field, StringConstraints, ValidationError, validate_call

DetectorFactory.seed = 0  # langdetect samples at random; a fixed seed makes the verdict reproducible

Relation = Literal["less than", "at least"]
Count = Annotated[int, Field(ge=0)]
Phrase = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Letter = Annotated[str, StringConstraints(min_length=1, max_length=1)]
Checker = Callable[..., bool]
Outcome = tuple[bool, str | None]
"""(followed, why the instruction could not be checked)."""

REGISTRY: dict[str, Checker] = {}


def instruction(instruction_id: str) -> Callable[[Checker], Checker]:
    def register(checker: Checker) -> Checker:
        REGISTRY[instruction_id] = validate_call(checker)
        return checker

    return register


def grade(text: str, instruction_ids: list[str], kwargs: list[dict[str, Any] | None]) -> list[Outcome]:
    """Check each instruction with its kwargs (null kwargs dropped): unknown ids and checkers that raise
    (bad kwargs above all) count as not followed, with the reason."""
    outcomes: list[Outcome] = []
    for instruction_id, entry in zip(instruction_ids, kwargs, strict=True):
        checker = REGISTRY.get(instruction_id)
        if checker is None:
            outcomes.append((False, "unknown instruction id"))
            continue
        arguments = {key: value for key, value in (entry or {}).items() if value is not None}
        try:
            outcomes.append((bool(checker(text, **arguments)), None))
        except Exception as error:  # any failure to check means "not followed"
            outcomes.append((False, _problem(error)))
    return outcomes


def _problem(error: Exception) -> str:
    """One log line: which kwargs were refused and why, or the error a checker raised."""
    if isinstance(error, ValidationError):
        refused = (f"{'.'.join(map(str, detail['loc']))}: {detail['msg']}" for detail in error.errors())
        return "bad kwargs (" + "; ".join(refused) + ")"
    return f"{type(error).__name__}: {error}"


# ---------------------------------------------------------------------------------------------------------
# Text units

WORD = re.compile(r"\w+")
EDGE_PUNCTUATION = string.punctuation + "“”‘’«»„‚‹›¿¡…"
SENTENCE_END = re.compile(r"(?<![.!?…])[.!?…]++[\"'”’)\]]*+(?=\s|$)")
BLANK_LINE = re.compile(r"\n[ \t]*\n")
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e cf al inc ltd corp vol fig approx dept".split()
)
INITIALISM = re.compile(r"[^\W\d_](\.[^\W\d_])*")
LOOK_BACK = 40
"""Characters before a full stop searched for the word it ends; longer tokens are no abbreviation."""


def count_words(text: str) -> int:
    return sum(1 for _ in WORD.finditer(text))


def bare_word(token: str) -> str:
    return token.strip(EDGE_PUNCTUATION).lower()


def leading_word(text: str) -> str:
    tokens = text.split(maxsplit=1)
    return bare_word(tokens[0]) if tokens else ""


def _normalized_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def blank_line_paragraphs(text: str) -> list[str]:
    """Paragraphs separated by blank lines; blank paragraphs are not paragraphs."""
    return [part.strip() for part in BLANK_LINE.split(_normalized_newlines(text)) if part.strip()]


def divider_paragraphs(text: str) -> list[str] | None:
    """Paragraphs separated by the markdown divider `***`, or None when two dividers enclose nothing.

    A blank part before the first or after the last divider is allowed (and is not a paragraph).
    """
    parts = [part.strip() for part in text.split("***")]
    inner_blank = any(not part for part in parts[1:-1])
    return None if inner_blank else [part for part in parts if part]


def split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    for block in BLANK_LINE.split(_normalized_newlines(text)):
        start = 0
        for end in SENTENCE_END.finditer(block):
            if end.group().rstrip("\"'”’)]") == "." and _ends_abbreviation(block, end.start()):
                continue
            sentences.append(block[start : end.end()].strip())
            start = end.end()
        sentences.append(block[start:].strip())
    return [sentence for sentence in sentences if sentence]


def _ends_abbreviation(block: str, dot: int) -> bool:
    """Whether the full stop at `dot` belongs to "Dr.", "e.g.", "J.", "U.S." or a list number "3."."""
    before = block[max(0, dot - LOOK_BACK) : dot]
    if not before or before[-1].isspace():
        return False
    raw_token = before.split()[-1]
    token = raw_token.lstrip("([\"'“‘").lower()
    if token in ABBREVIATIONS or INITIALISM.fullmatch(token):
        return True
    token_start = dot - len(raw_token)
    line_head = block[max(0, token_start - LOOK_BACK) : token_start].rstrip(" \t")
    starts_line = line_head.endswith("\n") or (not line_head and token_start <= LOOK_BACK)
    return token.isdigit() and starts_line


def compare(count: int, relation: Relation, target: int) -> bool:
    return count < target if relation == "less than" else count >= target


def detected_language(text: str) -> str | None:
    """langdetect's ISO 639-1 code (primary subtag only: "zh-cn" is "zh"), None when it finds no feature."""
    try:
        return detect(text).split("-")[0].lower()
    except LangDetectException:
        return None


# ---------------------------------------------------------------------------------------------------------
# keywords


@instruction("keywords:existence")
def keywords_existence(text: str, *, keywords: list[Phrase]) -> bool:
    return all(re.search(re.escape(keyword), text, re.IGNORECASE) for keyword in keywords)


@instruction("keywords:frequency")
def keyword_frequency(text: str, *, keyword: Phrase, frequency: Count, relation: Relation) -> bool:
    return compare(len(re.findall(re.escape(keyword), text, re.IGNORECASE)), relation, frequency)


@instruction("keywords:forbidden_words")
def forbidden_words(text: str, *, forbidden_words: list[Phrase]) -> bool:
    return not any(re.search(rf"\b{re.escape(word)}\b", text, re.IGNORECASE) for word in forbidden_words)


@instruction("keywords:letter_frequency")
def letter_frequency(text: str, *, letter: Letter, let_frequency: Count, let_relation: Relation) -> bool:
    return compare(text.lower().count(letter.lower()), let_relation, let_frequency)


# ---------------------------------------------------------------------------------------------------------
# language and case


@instruction("language:response_language")
def response_language(text: str, *, language: Phrase) -> bool:
    """Text with no detectable language (no letters) passes, as in IFEval."""
    detected = detected_language(text)
    return detected is None or detected == language.split("-")[0].lower()


@instruction("change_case:english_capital")
def english_capital(text: str) -> bool:
    return text.isupper() and detected_language(text) in ("en", None)


@instruction("change_case:english_lowercase")
def english_lowercase(text: str) -> bool:
    return text.islower() and detected_language(text) in ("en", None)


@instruction("change_case:capital_word_frequency")
def capital_word_frequency(text: str, *, capital_frequency: Count, capital_relation: Relation) -> bool:
    capitals = sum(1 for word in WORD.finditer(text) if word.group().isupper())
    return compare(capitals, capital_relation, capital_frequency)


@instruction("count:lowercase_counting")
def lowercase_counting(text: str, *, N: Count) -> bool:
    """At most N words made only of the lowercase letters a-z, in the whole response."""
    return len(re.findall(r"\b[a-z]+\b", text)) <= N


@instruction("letters:letter_counting")
def letter_counting(text: str, *, N: Count, relation: Relation) -> bool:
    return compare(len(re.findall(r"[A-Za-z]", text)), relation, N)


# ---------------------------------------------------------------------------------------------------------
# length


@instruction("length_constraints:number_words")
def number_words(text: str, *, num_words: Count, relation: Relation) -> bool:
    return compare(count_words(text), relation, num_words)


@instruction("length_constraints:number_sentences")
def number_sentences(text: str, *, num_sentences: Count, relation: Relation) -> bool:
    return compare(len(split_sentences(text)), relation, num_sentences)


@instruction("length_constraints:number_paragraphs")
def number_paragraphs(text: str, *, num_paragraphs: Count) -> bool:
    paragraphs = divider_paragraphs(text)
    return paragraphs is not None and len(paragraphs) == num_paragraphs


@instruction("paragraphs:paragraphs")
def two_divided_paragraphs(text: str) -> bool:
    paragraphs = divider_paragraphs(text)
    return paragraphs is not None and len(paragraphs) == 2


@instruction("length_constraints:nth_paragraph_first_word")
def nth_paragraph_first_word(
    text: str, *, num_paragraphs: Count, nth_paragraph: Annotated[int, Field(ge=1)], first_word: Phrase
) -> bool:
    paragraphs = blank_line_paragraphs(text)
    if len(paragraphs) != num_paragraphs or nth_paragraph > len(paragraphs):
        return False
    return leading_word(paragraphs[nth_paragraph - 1]) == bare_word(first_word)


# ---------------------------------------------------------------------------------------------------------
# start, end and words at fixed places


@instruction("first_word:first_word_sent")
def first_word_of_each_sentence(text: str, *, first_word: Phrase) -> bool:
    sentences = split_sentences(text)
    wanted = bare_word(first_word)
    return bool(sentences) and all(leading_word(sentence) == wanted for sentence in sentences)


@instruction("last_word:last_word_answer")
def last_word_answer(text: str, *, last_word: Phrase) -> bool:
    tokens = text.rsplit(maxsplit=1)
    return bool(tokens) and bare_word(tokens[-1]) == bare_word(last_word)


@instruction("startend:end_checker")
def end_checker(text: str, *, end_phrase: Phrase) -> bool:
    return text.strip().lower().endswith(end_phrase.lower())


@instruction("startend:quotation")
def quotation(text: str) -> bool:
    stripped = text.strip()
    return len(stripped) > 1 and stripped[0] == '"' and stripped[-1] == '"'


@instruction("combination:repeat_prompt")
def repeat_prompt(text: str, *, prompt_to_repeat: Phrase) -> bool:
    return text.strip().lower().startswith(prompt_to_repeat.lower())


@instruction("combination:two_responses")
def two_responses(text: str) -> bool:
    """Two different non-empty responses separated by six asterisks."""
    parts = [part.strip() for part in text.split("******")]
    if any(not part for part in parts[1:-1]):
        return False
    responses = [part for part in parts if part]
    return len(responses) == 2 and responses[0] != responses[1]


# ---------------------------------------------------------------------------------------------------------
# content and format


@instruction("detectable_content:number_placeholders")
def number_placeholders(text: str, *, num_placeholders: Count) -> bool:
    return len(re.findall(r"\[[^\[\]\n]*\]", text)) >= num_placeholders


@instruction("detectable_content:postscript")
def postscript(text: str, *, postscript_marker: Phrase) -> bool:
    """The marker anywhere, case-insensitive, a space allowed after each of its dots ("P. S.")."""
    pattern = re.escape(postscript_marker).replace(r"\.", r"\.\s?")
    return re.search(pattern, text, re.IGNORECASE) is not None


@instruction("detectable_format:number_bullet_lists")
def number_bullet_lists(text: str, *, num_bullets: Count) -> bool:
    """Exactly that many markdown bullet lines ("* item" or "- item", nested ones included)."""
    return len(re.findall(r"^[ \t]*[*-][ \t]+\S", text, re.MULTILINE)) == num_bullets


@instruction("detectable_format:constrained_response")
def constrained_response(text: str) -> bool:
    return any(f"My answer is {choice}." in text for choice in ("yes", "no", "maybe"))


@instruction("detectable_format:number_highlighted_sections")
def number_highlighted_sections(text: str, *, num_highlights: Count) -> bool:
    """At least that many non-blank `*highlighted*` or `**bold**` spans, each within one line."""
    double = re.findall(r"\*\*([^\n*]*)\*\*", text)
    single = re.findall(r"(?<!\*)\*([^\n*]*)\*(?!\*)", text)
    return sum(1 for span in double + single if span.strip()) >= num_highlights


@instruction("detectable_format:multiple_sections")
def multiple_sections(text: str, *, section_spliter: Phrase, num_sections: Count) -> bool:
    """At least that many section headers "<spliter> <number>" (e.g. "SECTION 1"), case-sensitive."""
    return len(re.findall(rf"{re.escape(section_spliter)}\s?\d+", text)) >= num_sections


@instruction("detectable_format:json_format")
def json_format(text: str) -> bool:
    """The whole response is JSON, optionally inside one markdown code fence."""
    body = re.sub(r"^```(?:json)?", "", text.strip(), flags=re.IGNORECASE)
    body = body.removesuffix("```").strip()
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


@instruction("detectable_format:title")
def title(text: str) -> bool:
    return any(inner.strip() for inner in re.findall(r"<<([^\n<>]+)>>", text))


@instruction("punctuation:no_comma")
def no_comma(text: str) -> bool:
    return "," not in text
