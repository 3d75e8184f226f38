"""The instruction registry in-process: every id follows and fails on a text of its own, plus the text units."""

from typing import Any

import pytest

from resources_servers.instruction_following.checks import (
    REGISTRY,
    blank_line_paragraphs,
    count_words,
    divider_paragraphs,
    grade,
    split_sentences,
)

IFEVAL_IDS = {
    "keywords:existence",
    "keywords:frequency",
    "keywords:forbidden_words",
    "keywords:letter_frequency",
    "language:response_language",
    "length_constraints:number_sentences",
    "length_constraints:number_paragraphs",
    "length_constraints:number_words",
    "length_constraints:nth_paragraph_first_word",
    "detectable_content:number_placeholders",
    "detectable_content:postscript",
    "detectable_format:number_bullet_lists",
    "detectable_format:constrained_response",
    "detectable_format:number_highlighted_sections",
    "detectable_format:multiple_sections",
    "detectable_format:json_format",
    "detectable_format:title",
    "combination:two_responses",
    "combination:repeat_prompt",
    "startend:end_checker",
    "startend:quotation",
    "change_case:capital_word_frequency",
    "change_case:english_capital",
    "change_case:english_lowercase",
    "punctuation:no_comma",
}
DATA_IDS = {
    "count:lowercase_counting",
    "letters:letter_counting",
    "first_word:first_word_sent",
    "paragraphs:paragraphs",
    "last_word:last_word_answer",
}

# (instruction id, kwargs, a text that follows it, a text that does not)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("keywords:existence", {"keywords": ["river", "Stone"]}, "A STONE by the river.", "A stone by the lake."),
    (
        "keywords:frequency",
        {"keyword": "cat", "frequency": 2, "relation": "at least"},
        "Cat, cat.",
        "One cat.",
    ),
    (
        "keywords:frequency",
        {"keyword": "cat", "frequency": 2, "relation": "less than"},
        "One cat.",
        "Cat, cat.",
    ),
    ("keywords:forbidden_words", {"forbidden_words": ["part", "fate"]}, "Set apart.", "Fate took part."),
    (
        "keywords:letter_frequency",
        {"letter": "z", "let_frequency": 3, "let_relation": "less than"},
        "Zebra zone",
        "Zebra zone zoo",
    ),
    (
        "language:response_language",
        {"language": "de"},
        "Das ist ein kurzer deutscher Satz über das Wetter in der Stadt.",
        "This is a short English sentence about the weather in the city.",
    ),
    (
        "length_constraints:number_sentences",
        {"num_sentences": 3, "relation": "at least"},
        "One is here. Two! Three?",
        "Dr. Smith met Mr. Jones, e.g. at 3.5 p.m. on the U.S. coast. They talked.",
    ),
    (
        "length_constraints:number_paragraphs",
        {"num_paragraphs": 2},
        "First.\n***\nSecond.",
        "First.\n***\n***\nSecond.",
    ),
    (
        "length_constraints:number_words",
        {"num_words": 5, "relation": "less than"},
        "one two three-four",
        "one two, three four five",
    ),
    (
        "length_constraints:nth_paragraph_first_word",
        {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "crash"},
        'Intro here.\n\n"Crash," said he.',
        "Intro here.\n\nCrash\u2014then silence.",
    ),
    (
        "detectable_content:number_placeholders",
        {"num_placeholders": 2},
        "To [name] at [address].",
        "To [name].",
    ),
    (
        "detectable_content:postscript",
        {"postscript_marker": "P.S."},
        "Bye.\n\np. s. See you.",
        "Bye. PS see you.",
    ),
    (
        "detectable_format:number_bullet_lists",
        {"num_bullets": 2},
        "* one\n- two\n***",
        "* one\n- two\n  * three",
    ),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", "My answer is probably."),
    (
        "detectable_format:number_highlighted_sections",
        {"num_highlights": 2},
        "*one* and **two**",
        "*one* and ** **",
    ),
    (
        "detectable_format:multiple_sections",
        {"section_spliter": "SECTION", "num_sections": 2},
        "SECTION 1\na\nSECTION 2\nb",
        "SECTION 1\na\nSection 2\nb",
    ),
    ("detectable_format:json_format", {}, '```json\n{"a": [1, 2]}\n```', 'Here it is: {"a": 1}'),
    ("detectable_format:title", {}, "<<Joy of Rain>>\nText", "<< >> text"),
    ("combination:two_responses", {}, "Alpha\n******\nBeta", "Alpha\n******\nAlpha"),
    (
        "combination:repeat_prompt",
        {"prompt_to_repeat": "Write a poem."},
        "write a poem. Roses",
        "Sure! Write a poem.",
    ),
    (
        "startend:end_checker",
        {"end_phrase": "Any other questions?"},
        "Done. Any other questions?  ",
        "Any other questions? Bye.",
    ),
    ("startend:quotation", {}, ' "Quoted text" ', '"Unclosed'),
    (
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "NASA and ESA agree",
        "Nasa and ESA agree",
    ),
    (
        "change_case:english_capital",
        {},
        "THIS ANSWER IS WRITTEN IN CAPITAL LETTERS AND IN THE ENGLISH LANGUAGE.",
        "This answer is written in capital letters only at the start.",
    ),
    (
        "change_case:english_lowercase",
        {},
        "this answer is written in lowercase letters and in the english language.",
        "This answer starts with a capital letter.",
    ),
    ("punctuation:no_comma", {}, "No commas here.", "Yes, one."),
    ("count:lowercase_counting", {"N": 3}, "Only THREE lowercase words here", "a b c d"),
    ("letters:letter_counting", {"N": 5, "relation": "at least"}, "abc DE", "ab 12 c!"),
    ("letters:letter_counting", {"N": 5, "relation": "less than"}, "ab 12 c!", "abc DE"),
    (
        "first_word:first_word_sent",
        {"first_word": "relationship"},
        "Relationship matters. Relationship, again!\n\nRELATIONSHIP first",
        "Relationship matters. Relationship-driven growth follows.",
    ),
    ("paragraphs:paragraphs", {}, "***\nOne.\n***\nTwo.", "One.\n\nTwo."),
    ("last_word:last_word_answer", {"last_word": "contest"}, "a new kind of Contest.", "contest is over"),
]


def verdict(instruction_id: str, kwargs: dict[str, Any] | None, text: str) -> tuple[bool, str | None]:
    return grade(text, [instruction_id], [kwargs])[0]


def test_every_ifeval_id_and_every_id_of_the_shipped_data_is_registered():
    assert IFEVAL_IDS | DATA_IDS <= REGISTRY.keys()
    assert {case[0] for case in CASES} == REGISTRY.keys(), "each registered id has a case below"


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "follows", "breaks"), CASES, ids=[case[0] for case in CASES]
)
def test_each_instruction_follows_one_text_and_not_another(instruction_id, kwargs, follows, breaks):
    assert verdict(instruction_id, kwargs, follows) == (True, None)
    assert verdict(instruction_id, kwargs, breaks) == (False, None)


def test_an_unknown_id_is_not_followed_and_says_why():
    assert verdict("keywords:made_up", {}, "anything") == (False, "unknown instruction id")


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"num_words": 5},
        {"num_words": "five", "relation": "less than"},
        {"num_words": 5, "relation": "at most"},
        {"num_words": -1, "relation": "less than"},
        {"num_words": 5, "relation": "less than", "num_sentences": 2},
        {"text": "x", "num_words": 5, "relation": "less than"},
    ],
)
def test_missing_extra_or_ill_typed_kwargs_are_not_followed_and_say_why(kwargs):
    followed, problem = verdict("length_constraints:number_words", kwargs, "short")
    assert not followed and problem.startswith("bad kwargs (")


def test_null_kwargs_are_dropped_before_checking():
    assert verdict("detectable_format:title", None, "<<T>>") == (True, None)
    padded = {"num_words": 5, "relation": "less than", "first_word": None, "keywords": None}
    assert verdict("length_constraints:number_words", padded, "one two") == (True, None)


def test_a_checker_that_fails_on_odd_text_is_not_followed():
    deep = "[" * 100_000 + "]" * 100_000
    assert verdict("detectable_format:json_format", {}, deep) == (False, None)


def test_text_without_a_detectable_language_follows_the_language_instruction_as_in_ifeval():
    assert verdict("language:response_language", {"language": "fr"}, "12345 !!!") == (True, None)
    assert verdict("language:response_language", {"language": "zh"}, "这是一个关于天气的中文句子。") == (
        True,
        None,
    )


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ('He said "stop." Then left...  Really?!', ['He said "stop."', "Then left...", "Really?!"]),
        ("Dr. Who met J. R. Smith in the U.S. today.", ["Dr. Who met J. R. Smith in the U.S. today."]),
        ("Prices rose 3.5 percent. Etc.", ["Prices rose 3.5 percent.", "Etc."]),
        ("1. First item is here.\n2. Second.", ["1. First item is here.", "2. Second."]),
        ("I have 3. You have 4.", ["I have 3.", "You have 4."]),
        ("# Heading\n\nBody text without end", ["# Heading", "Body text without end"]),
        ("line one\nline two", ["line one\nline two"]),
        ("", []),
        ("  \n\n  ", []),
    ],
)
def test_sentences_end_at_terminal_punctuation_and_blank_lines(text, sentences):
    assert split_sentences(text) == sentences


def test_words_are_runs_of_word_characters():
    assert count_words("Hello, world! It's 2024 — naïve café_au_lait.") == 7
    assert count_words("") == 0


def test_paragraph_separators():
    assert blank_line_paragraphs("a\r\n\r\nb\n \n\n\nc\n") == ["a", "b", "c"]
    assert divider_paragraphs("***a***b***") == ["a", "b"]
    assert divider_paragraphs("a\n***\n\n***\nb") is None
    assert divider_paragraphs("") == []


@pytest.mark.timeout(20)
def test_many_instructions_on_long_text_finish_quickly():
    text = "Relationship matters a lot here. [x] " * 20_000 + "\n\n" + "*a* <<T>> " * 20_000
    ids = [case[0] for case in CASES]
    outcomes = grade(text, ids, [case[1] for case in CASES])
    assert all(problem is None for _, problem in outcomes)
