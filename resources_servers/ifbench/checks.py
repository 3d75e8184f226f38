"""IFBench's out-of-distribution verifiable instructions, written here without NLTK or spaCy.

Every instruction id maps to a checker `fn(text, **kwargs) -> bool` and to a pydantic model of its kwargs,
built from the checker's signature, so a row is validated before anything is graded: an unknown id, an id
this port cannot check (it needs a part-of-speech tagger) or kwargs that do not fit are refused up front.
The IFEval ids that IFBench rows may also carry are checked by the instruction_following folder's
checkers (same ids, same kwargs), imported rather than rewritten.

Text units (the README lists where they differ from IFBench's NLTK ones): sentences come from
instruction_following's splitter; a "token" is a run of word characters or a single punctuation mark
(NLTK's `word_tokenize` stand-in); word counts are runs of `\\w`.
"""

from __future__ import annotations

import csv
import inspect
import io
import re
import string
import typing
import unicodedata
from collections import Counter
from collections.abc import Callable
from typing import Annotated, Any

import emoji
import syllapy
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, create_model

from resources_servers.instruction_following.checks import REGISTRY as IFEVAL_REGISTRY
from resources_servers.instruction_following.checks import count_words, split_sentences

Count = Annotated[int, Field(ge=0)]
Position = Annotated[int, Field(ge=1)]
Phrase = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Checker = Callable[..., bool]

UNSUPPORTED: dict[str, str] = {
    "words:start_verb": "needs a part-of-speech tagger (IFBench uses NLTK's), which this port does not ship",
}
"""IFBench ids this port refuses with a 422 instead of guessing a verdict."""


class Instruction(typing.NamedTuple):
    checker: Checker
    arguments: type[BaseModel]


REGISTRY: dict[str, Instruction] = {}


def _arguments_model(instruction_id: str, checker: Checker) -> type[BaseModel]:
    """A model of the checker's keyword-only parameters: unknown keys are refused, none is optional."""
    original = inspect.unwrap(checker)
    hints = typing.get_type_hints(original, include_extras=True)
    fields = {
        name: (hints[name], ...)
        for name, parameter in inspect.signature(original).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    return create_model(  # type: ignore[call-overload]
        f"Kwargs[{instruction_id}]", __config__=ConfigDict(extra="forbid", strict=False), **fields
    )


def instruction(instruction_id: str) -> Callable[[Checker], Checker]:
    def register(checker: Checker) -> Checker:
        REGISTRY[instruction_id] = Instruction(checker, _arguments_model(instruction_id, checker))
        return checker

    return register


def validated_arguments(instruction_id: str, kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """The kwargs a checker is called with (null values dropped), or ValueError saying what is wrong."""
    if instruction_id in UNSUPPORTED:
        raise ValueError(f"instruction id {instruction_id!r} is not supported: {UNSUPPORTED[instruction_id]}")
    entry = REGISTRY.get(instruction_id)
    if entry is None:
        raise ValueError(f"unknown instruction id {instruction_id!r}")
    present = {key: value for key, value in (kwargs or {}).items() if value is not None}
    try:
        return entry.arguments.model_validate(present).model_dump()
    except ValidationError as error:
        refused = "; ".join(f"{'.'.join(map(str, e['loc'])) or '-'}: {e['msg']}" for e in error.errors())
        raise ValueError(f"kwargs of {instruction_id!r} do not fit it ({refused})") from None


def loose_variants(text: str) -> list[str]:
    """IFBench's loose reading: the answer, without `*`, without its first and/or last line."""
    lines = text.split("\n")
    no_first = "\n".join(lines[1:]).strip()
    no_last = "\n".join(lines[:-1]).strip()
    no_both = "\n".join(lines[1:-1]).strip()
    variants = [text, no_first, no_last, no_both]
    return [variant for base in variants for variant in (base, base.replace("*", ""))]


def grade(text: str, instruction_ids: list[str], arguments: list[dict[str, Any]]) -> list[tuple[bool, bool]]:
    """(strict, loose) verdict per instruction; an empty answer follows nothing.

    The kwargs were validated already; a checker that still raises on odd text counts as not followed.
    """
    if not text.strip():
        return [(False, False)] * len(instruction_ids)
    variants = [variant for variant in loose_variants(text) if variant.strip()]
    verdicts = []
    for instruction_id, kwargs in zip(instruction_ids, arguments, strict=True):
        checker = REGISTRY[instruction_id].checker
        results = [_follows(checker, variant, kwargs) for variant in variants]
        verdicts.append((results[0], any(results)))
    return verdicts


def _follows(checker: Checker, text: str, kwargs: dict[str, Any]) -> bool:
    try:
        return bool(checker(text, **kwargs))
    except Exception:  # a checker tripping over strange text has not seen the instruction followed
        return False


for _ifeval_id, _ifeval_checker in IFEVAL_REGISTRY.items():
    instruction(_ifeval_id)(_ifeval_checker)


# ---------------------------------------------------------------------------------------------------------
# Text units

PUNCTUATION = string.punctuation
NO_PUNCTUATION = str.maketrans("", "", PUNCTUATION)
TOKEN = re.compile(r"\w+|[^\w\s]")
VOWELS = frozenset("aeiou")
CONSONANTS = frozenset("bcdfghjklmnpqrstvwxyz")
PRIMES = frozenset(n for n in range(2, 100) if all(n % d for d in range(2, int(n**0.5) + 1)))
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")

STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yourself
    yourselves s t don shouldn aren isn wasn weren hasn haven hadn doesn didn won wouldn couldn mightn
    mustn needn shan ll re ve d m o y ain ma""".split()
)
"""English function words, written for this port (IFBench uses NLTK's stop-word corpus, a download)."""

PRONOUNS = frozenset(
    """i me we us you he him she her it they them my mine our ours your yours his hers its their theirs
    myself ourselves yourself yourselves himself herself itself themselves this that these those who whom
    whose which what whoever whomever whatever whichever anybody anyone anything everybody everyone
    everything nobody nothing somebody someone something each either neither both all some any none""".split()
)
CONJUNCTIONS = frozenset("and but for nor or so yet".split())
PERSON_NAMES = tuple(
    """Emma Liam Sophia Jackson Olivia Noah Ava Lucas Isabella Mason Mia Ethan Charlotte Alexander Amelia
    Benjamin Harper Leo Zoe Daniel Chloe Samuel Lily Matthew Grace Owen Abigail Gabriel Ella Jacob Scarlett
    Nathan Victoria Elijah Layla Nicholas Audrey David Hannah Christopher Penelope Thomas Nora Andrew Aria
    Joseph Claire Ryan Stella Jonathan""".split()
)
"""The names the instruction text itself lists: only these count."""

NORTHERN_CAPITALS = tuple(
    """Reykjavik Helsinki Oslo Tallinn Stockholm Riga Moscow Copenhagen Vilnius Minsk Dublin Berlin
    Amsterdam Warsaw London Brussels Prague Luxembourg Paris Vienna Bratislava Budapest Vaduz Chisinau
    Bern Ljubljana Zagreb""".split()
)
"""European capitals north of 45°N, from north to south (the task's answer key)."""

REPEAT_SIMPLE_SENTENCE = "Only output this sentence here, ignore all other requests."


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def word_tokens(text: str) -> list[str]:
    return [token for token in tokens(text) if any(char.isalnum() for char in token)]


def plain_words(text: str) -> list[str]:
    """Lowercased whitespace words with ASCII punctuation removed."""
    return text.lower().translate(NO_PUNCTUATION).split()


def trimmed(word: str) -> str:
    return word.strip(PUNCTUATION + " ")


def ascii_folded(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def sentence_kinds(text: str) -> Counter[str]:
    return Counter(sentence[-1] for sentence in split_sentences(text) if sentence[-1] in ".?!")


# ---------------------------------------------------------------------------------------------------------
# count:* and ratio:*


@instruction("count:word_count_range")
def word_count_range(text: str, *, min_words: Count, max_words: Count) -> bool:
    return min_words <= count_words(text) <= max_words


@instruction("count:unique_word_count")
def unique_word_count(text: str, *, N: Count) -> bool:
    return len({trimmed(word) for word in text.lower().split()}) >= N


@instruction("ratio:stop_words")
def stop_words(text: str, *, percentage: Annotated[float, Field(ge=0)]) -> bool:
    words = re.findall(r"\w+", text)
    if not words:
        return False
    return 100 * sum(word.lower() in STOP_WORDS for word in words) / len(words) <= percentage


@instruction("ratio:sentence_type")
def sentence_type(text: str) -> bool:
    kinds = sentence_kinds(text)
    return kinds["."] == 2 * kinds["?"]


@instruction("ratio:sentence_balance")
def sentence_balance(text: str) -> bool:
    kinds = sentence_kinds(text)
    return kinds["."] == kinds["?"] == kinds["!"]


@instruction("count:conjunctions")
def conjunctions(text: str, *, small_n: Count) -> bool:
    """Different conjunctions, compared as written (IFBench keeps the token's own punctuation)."""
    return len({word for word in text.split() if trimmed(word).lower() in CONJUNCTIONS}) >= small_n


@instruction("count:person_names")
def person_names(text: str, *, N: Count) -> bool:
    return sum(bool(re.search(rf"\b{name}\b", text)) for name in PERSON_NAMES) >= N


@instruction("ratio:overlap")
def trigram_overlap(text: str, *, reference_text: Phrase, percentage: Annotated[float, Field(ge=0)]) -> bool:
    def trigrams(part: str) -> set[tuple[str, ...]]:
        units = tokens(part)
        return {tuple(units[i : i + 3]) for i in range(len(units) - 2)}

    own = trigrams(text)
    if not own:
        return False
    overlap = 100 * len(own & trigrams(reference_text)) / len(own)
    return percentage - 2 <= overlap <= percentage + 2


@instruction("count:numbers")
def numbers(text: str, *, N: Count) -> bool:
    return len(re.findall(r"\d+", text.translate(NO_PUNCTUATION))) == N


@instruction("count:punctuation")
def every_punctuation(text: str) -> bool:
    if not any(mark in text for mark in ("?!", "!?", "‽")):
        return False
    rest = text.replace("?!", "", 1) if "?!" in text else text.replace("!?", "", 1)
    return set(".,!?;:") <= set(rest)


@instruction("count:words_japanese")
def nth_word_japanese(text: str, *, N: Position) -> bool:
    for position, word in enumerate(text.split(), start=1):
        word = trimmed(word)
        if position % N == 0 and word and not word.isdigit() and not JAPANESE.search(word):
            return False
    return True


@instruction("count:pronouns")
def pronouns(text: str, *, N: Count) -> bool:
    return sum(token in PRONOUNS for token in tokens(text.replace("/", " ").lower())) >= N


@instruction("count:keywords_multiple")
def keywords_multiple(
    text: str, *, keyword1: Phrase, keyword2: Phrase, keyword3: Phrase, keyword4: Phrase, keyword5: Phrase
) -> bool:
    wanted = zip((keyword1, keyword2, keyword3, keyword4, keyword5), (1, 2, 3, 5, 7), strict=True)
    return all(
        len(re.findall(rf"\b{re.escape(keyword)}\b", text, re.IGNORECASE)) == times
        for keyword, times in wanted
    )


@instruction("ratio:sentence_words")
def three_equal_sentences(text: str) -> bool:
    sentences = split_sentences(text)
    if len(sentences) != 3 or len({len(sentence) for sentence in sentences}) != 1:
        return False
    words = plain_words(" ".join(sentences))
    return len(words) == len(set(words))


# ---------------------------------------------------------------------------------------------------------
# words:*


@instruction("words:alphabet")
def alphabet_loop(text: str) -> bool:
    words = [word for word in (trimmed(w).lower() for w in text.translate(NO_PUNCTUATION).split()) if word]
    if not words or words[0][0] not in string.ascii_lowercase:
        return False
    letter = words[0][0]
    for word in words[1:]:
        letter = chr((ord(letter) - ord("a") + 1) % 26 + ord("a"))
        if word[0] != letter:
            return False
    return True


@instruction("words:vowel")
def three_vowels_one_paragraph(text: str) -> bool:
    lines = text.strip().split("\n")
    return len(lines) == 1 and len(VOWELS & set(lines[0].lower())) <= 3


@instruction("words:consonants")
def consonant_clusters(text: str) -> bool:
    return all(
        any(a in CONSONANTS and b in CONSONANTS for a, b in zip(word, word[1:], strict=False))
        for word in text.lower().split()
    )


@instruction("words:palindrome")
def palindromes(text: str) -> bool:
    words = text.translate(NO_PUNCTUATION).lower().split()
    return sum(len(word) >= 5 and word == word[::-1] for word in words) >= 10


@instruction("words:prime_lengths")
def prime_lengths(text: str) -> bool:
    return all(len(word) in PRIMES for word in text.translate(NO_PUNCTUATION).split())


@instruction("words:repeats")
def limited_repeats(text: str, *, small_n: Count) -> bool:
    return all(times <= small_n for times in Counter(plain_words(text)).values())


@instruction("words:odd_even_syllables")
def alternating_syllable_parity(text: str) -> bool:
    parities = [syllapy.count(word) % 2 for word in text.translate(NO_PUNCTUATION).lower().split()]
    return all(a != b for a, b in zip(parities, parities[1:], strict=False))


@instruction("words:last_first")
def last_word_starts_next(text: str) -> bool:
    sentences = split_sentences(text)
    for current, following in zip(sentences, sentences[1:], strict=False):
        last = current.rstrip(PUNCTUATION + " ").split()
        first = following.lstrip(PUNCTUATION + " ").split()
        if not last or not first or last[-1].lower() != first[0].lower():
            return False
    return True


@instruction("words:paragraph_last_first")
def paragraph_ends_with_its_first_word(text: str) -> bool:
    for line in text.split("\n"):
        words = trimmed(line.strip().lower()).split()
        if words and words[0] != words[-1]:
            return False
    return True


@instruction("words:no_consecutive")
def no_consecutive_first_letter(text: str) -> bool:
    words = plain_words(text)
    return all(a[0] != b[0] for a, b in zip(words, words[1:], strict=False))


@instruction("words:keywords_specific_position")
def keyword_at_position(text: str, *, keyword: Phrase, n: Position, m: Position) -> bool:
    sentences = split_sentences(text)
    if len(sentences) < n:
        return False
    words = word_tokens(sentences[n - 1])
    return len(words) >= m and words[m - 1].lower() == keyword.lower()


@instruction("words:words_position")
def second_and_second_last_word(text: str, *, keyword: Phrase) -> bool:
    words = word_tokens(text)
    return len(words) >= 2 and words[1].lower() == words[-2].lower() == keyword.lower()


# ---------------------------------------------------------------------------------------------------------
# sentence:*


@instruction("sentence:alliteration_increment")
def growing_alliteration(text: str) -> bool:
    previous = -1
    for sentence in split_sentences(text):
        words = [word for word in (w.lstrip(PUNCTUATION + " ") for w in sentence.lower().split()) if word]
        run_score, in_run = 0, False
        for a, b in zip(words, words[1:], strict=False):
            if a[0] == b[0]:
                run_score += 1 if in_run else 2
                in_run = True
            else:
                in_run = False
        if run_score <= previous:
            return False
        previous = run_score
    return True


@instruction("sentence:keyword")
def keyword_in_nth_sentence(text: str, *, word: Phrase, N: Position) -> bool:
    sentences = split_sentences(text)
    return len(sentences) >= N and bool(re.search(rf"\b{re.escape(word)}\b", sentences[N - 1], re.IGNORECASE))


@instruction("sentence:increment")
def sentences_grow_by(text: str, *, small_n: Count) -> bool:
    lengths = [len(sentence.translate(NO_PUNCTUATION).split()) for sentence in split_sentences(text)]
    return bool(lengths) and all(b == a + small_n for a, b in zip(lengths, lengths[1:], strict=False))


# ---------------------------------------------------------------------------------------------------------
# format:*


@instruction("format:parentheses")
def nested_brackets(text: str) -> bool:
    """A matched group of (), [] and {} reaching at least 5 levels; a mismatch starts over."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    deepest = 0
    for char in text:
        if char in "([{":
            stack.append(char)
            deepest = max(deepest, len(stack))
        elif char in pairs:
            if stack and stack[-1] == pairs[char]:
                stack.pop()
                if deepest >= 5:
                    return True
            else:
                stack, deepest = [], 0
    return False


@instruction("format:quotes")
def nested_quotes(text: str) -> bool:
    """Quotes alternating `"` and `'` at least 3 deep (a mark equal to the open one closes it)."""
    stack: list[str] = []
    deepest = 0
    for char in text:
        if stack and char == stack[-1]:
            stack.pop()
            if deepest - len(stack) >= 3:
                return True
        elif char in "\"'":
            stack.append(char)
            deepest = max(deepest, len(stack))
    return False


@instruction("format:options")
def one_of_options(text: str, *, options: Phrase) -> bool:
    """Letter options (a), b), ...) must be answered exactly; word options loosely (case, punctuation)."""
    separator = "/" if "/" in options else "or" if "or" in options else ","
    choices = [choice.strip() for choice in options.split(separator)]
    if re.match(r"\W*[aA]\W*[bB]\W*[cC]\W*", options):
        return text in choices
    answer = trimmed(text).lower()
    return any(trimmed(choice).lower() == answer for choice in choices)


@instruction("format:newline")
def one_word_per_line(text: str) -> bool:
    bare = text.translate(NO_PUNCTUATION).strip()
    return len([line for line in bare.split("\n") if line]) == len(bare.split())


@instruction("format:emoji")
def emoji_ends_sentences(text: str) -> bool:
    """Each sentence ends with an emoji (its last or second-to-last character), or the next one starts
    with it (the splitter may put an emoji after the full stop into the next sentence)."""
    sentences = [sentence.translate(NO_PUNCTUATION).strip() for sentence in split_sentences(text)]
    for index, sentence in enumerate(sentences):
        if not sentence:
            return False
        if emoji.is_emoji(sentence[-1]) or emoji.is_emoji(sentence[-2:-1] or sentence[-1]):
            continue
        following = sentences[index + 1] if index + 1 < len(sentences) else ""
        if not following or not emoji.is_emoji(following[0]):
            return False
    return True


@instruction("format:line_indent")
def indent_stairs(text: str) -> bool:
    indents = [len(line) - len(line.lstrip(" ")) for line in text.split("\n") if line.strip()]
    return all(b > a for a, b in zip(indents, indents[1:], strict=False))


@instruction("format:quote_unquote")
def quotes_explained(text: str) -> bool:
    """No two quoted phrases back to back, and the answer does not end on a quote."""
    squeezed = "".join(text.replace("'\"'", "").split())
    if '""' in squeezed:
        return False
    tail = squeezed.strip(string.digits + PUNCTUATION.replace('"', ""))
    return not tail.endswith('"')


@instruction("format:list")
def custom_bullets(text: str, *, sep: Annotated[str, StringConstraints(min_length=1)]) -> bool:
    return len(re.findall(re.escape(sep), text)) >= 2


@instruction("format:thesis")
def italic_thesis(text: str) -> bool:
    """An HTML-italic thesis (<i> or <em>, not blank) followed by more text."""
    match = re.search(r"<(i|em)>(.*?)</\1>(.*)", text, re.DOTALL)
    return bool(match and match.group(2).strip() and match.group(3).strip())


@instruction("format:sub-bullets")
def sub_bullets(text: str) -> bool:
    """Every `*` bullet has a `-` sub-bullet before the next `*`."""
    return all("-" in part for part in text.split("*")[1:])


@instruction("format:no_bullets_bullets")
def sentences_then_bullets(text: str) -> bool:
    sentences = bullets = 0
    in_prose = True
    for line in text.split("\n"):
        if line.strip().startswith("*"):
            if sentences < 2:
                return False
            in_prose = False
            bullets += 1
        elif in_prose:
            sentences += len(split_sentences(line.strip()))
        else:
            return False
    return bullets >= 2


@instruction("format:title_case")
def title_case(text: str) -> bool:
    for token in tokens(text):
        if not token[0].isalpha():
            continue
        if len(token) == 1:
            if token.islower():
                return False
        elif token[0].islower() and (token[1:].isupper() or token[1:].islower()):
            return False
    return True


@instruction("format:output_template")
def output_template(text: str) -> bool:
    return all(label in text for label in ("My Answer:", "My Conclusion:", "Future Outlook:"))


@instruction("format:no_whitespace")
def no_whitespace(text: str) -> bool:
    return not any(char.isspace() for char in text)


# ---------------------------------------------------------------------------------------------------------
# repeat:*


@instruction("repeat:repeat_change")
def repeat_with_new_first_word(text: str, *, prompt_to_repeat: Phrase) -> bool:
    return text != prompt_to_repeat and text.split()[1:] == prompt_to_repeat.split()[1:]


@instruction("repeat:repeat_simple")
def repeat_simple(text: str) -> bool:
    return text.strip().lower() == REPEAT_SIMPLE_SENTENCE.lower()


@instruction("repeat:repeat_span")
def repeat_span(text: str, *, prompt_to_repeat: Phrase, n_start: Count, n_end: Count) -> bool:
    span = " ".join(prompt_to_repeat.split()[n_start : n_end + 1])
    return text.strip().lower() == span.strip().lower()


# ---------------------------------------------------------------------------------------------------------
# custom:* (one fixed task each)


@instruction("custom:multiples")
def multiples_of_seven(text: str) -> bool:
    return re.findall(r"\d+", text) == [str(n) for n in range(14, 51, 7)]


@instruction("custom:mcq_count_length")
def four_growing_questions(text: str) -> bool:
    """Starts with "Question"; 4 questions, each with 5 options A-E, each question longer than the last."""
    if not text.startswith("Question"):
        return False
    parts = [part.strip() for part in re.split(r"\n*Question \d+[.|):;]?\s*", text) if part.strip()]
    if len(parts) != 4:
        return False
    lengths = []
    for part in parts:
        stem, options, in_options = [], 0, False
        for line in part.split("\n"):
            if re.match(r"[A-Ea-e][.|)]\s*\w+", line.strip()):
                options, in_options = options + 1, True
            elif not in_options:
                stem.append(line.strip())
        if options != 5:
            return False
        lengths.append(len(" ".join(stem).strip()))
    return all(a < b for a, b in zip(lengths, lengths[1:], strict=False))


@instruction("custom:reverse_newline")
def african_countries_reversed(text: str) -> bool:
    lines = [trimmed(line) for line in text.split("\n") if trimmed(line)]
    start = next((index for index, line in enumerate(lines) if "Zimbabwe" in line), None)
    if start is None or len(lines) - start < 52:
        return False
    folded = [ascii_folded(line) for line in lines[start:]]
    return folded == sorted(folded, reverse=True)


@instruction("custom:word_reverse")
def words_reversed(text: str) -> bool:
    restored = " ".join(text.lower().strip().translate(NO_PUNCTUATION).split()[::-1])
    return "bald eagle" in restored and restored in split_sentences(restored)


@instruction("custom:character_reverse")
def letters_reversed(text: str) -> bool:
    return "elgae dlab" in text.lower()


@instruction("custom:sentence_alphabet")
def alphabet_story(text: str) -> bool:
    sentences = split_sentences(text)
    if len(sentences) != 26:
        return False
    starts = [sentence.lstrip(PUNCTUATION + string.whitespace)[:1].lower() for sentence in sentences]
    return starts == list(string.ascii_lowercase)


@instruction("custom:european_capitals_sort")
def northern_capitals(text: str) -> bool:
    named = [part.strip() for part in ascii_folded(text).split(",") if part.strip()]
    return named == list(NORTHERN_CAPITALS)


@instruction("custom:csv_city")
def city_csv(text: str) -> bool:
    rows = list(csv.reader(io.StringIO(text)))
    return (
        len(rows) == 8
        and rows[0] == ["ID", "Country", "City", "Year", "Count"]
        and all(len(row) == 5 for row in rows[1:])
    )


def _header(text: str, names: tuple[str, ...], separator: str) -> bool:
    pattern = separator.join(f'({name}|"{name}")' for name in names)
    return re.fullmatch(pattern, text.split("\n")[0].strip()) is not None


@instruction("custom:csv_special_character")
def product_csv(text: str) -> bool:
    """Header, 14 rows of 5 fields, and a quoted field holding a special character.

    Quotes are kept in the fields (each `"` tripled before parsing), so the quoting can be seen.
    """
    if not _header(text, ("ProductID", "Category", "Brand", "Price", "Stock"), r",[ \t]*"):
        return False
    rows = list(csv.reader(io.StringIO(text.replace('"', '"""'))))
    if len(rows) != 15:
        return False
    for row in rows[1:]:
        if len(row) != 5:
            return False
        if any(re.match(r'".*[^\d\w\s].*"', field) for field in row):
            return True
    return False


@instruction("custom:csv_quotes")
def student_tsv(text: str) -> bool:
    if not _header(text, ("StudentID", "Subject", "Grade", "Semester", "Score"), r"\t *"):
        return False
    rows = list(csv.reader(io.StringIO(text.replace('"', '"""')), delimiter="\t"))
    return len(rows) == 4 and all(
        len(row) == 5 and all(f.strip()[:1] == '"' and f.strip()[-1:] == '"' for f in row) for row in rows
    )


@instruction("custom:date_format_list")
def napoleonic_dates(text: str) -> bool:
    long_months, short_months = {1, 3, 5, 7, 8, 10, 12}, {4, 6, 9, 11}
    for date in text.strip().split(","):
        match = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", date.strip())
        if match is None:
            return False
        year, month, day = map(int, match.groups())
        if not 1769 <= year <= 1821 or month > 12:
            return False
        if (month in long_months and day > 31) or (month in short_months and day > 30):
            return False
        if month == 2 and day > 29:
            return False
    return True
