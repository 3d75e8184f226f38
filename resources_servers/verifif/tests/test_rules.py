"""Every rule validator on a text that follows it and one that does not, and the typed arguments."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from resources_servers.verifif.app import aggregate
from resources_servers.verifif.rules import ARGUMENTS, RULES

LIST3 = "1. one\n2. two\n3. three"
TABLE = "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |"
NESTED = "- fruit\n  - apple\n  - pear\n- veg"

# (instruction_id, arguments, a text that follows it, a text that does not)
CASES = [
    ("change_case:all_caps", {}, "HELLO THERE", "Hello there"),
    ("change_case:lowercase", {}, "hello there", "Hello there"),
    ("change_case:alternating", {}, "HeLlO wOrLd", "HeLLo world"),
    ("change_case:first_letter_cap", {}, "Every Word Here", "Every word Here"),
    (
        "change_case:capital_word_frequency",
        {"capital_relation": "at least", "capital_frequency": 2},
        "NASA and ESA",
        "NASA and esa",
    ),
    (
        "change_case:lowercase_word_frequency",
        {"lowercase_relation": "less than", "lowercase_frequency": 2},
        "One Two three",
        "one two three",
    ),
    ("change_case:all_caps_target", {"target_string": "urgent"}, "This is URGENT now", "This is Urgent now"),
    ("change_case:lowercase_target", {"target_string": "Note"}, "a note here", "a Note here"),
    ("change_case:alternating_target", {"target_string": "cool"}, "so CoOl", "so Cool"),
    (
        "change_case:first_letter_cap_target",
        {"target_string": "new york"},
        "in New York today",
        "in new York today",
    ),
    ("change_case:case_ratio", {"min_fraction": "1", "max_fraction": "inf"}, "Hello", "HELLo"),
    ("change_case:first_letter_sentence", {}, "One thing. Two things.", "One thing. two things."),
    ("change_case:last_letter", {"case": "digit"}, "The answer is 42.", "The answer is forty."),
    (
        "change_case:vowel_consonant_balance",
        {"min_fraction": "1/2", "max_fraction": "2"},
        "alone",
        "strengths",
    ),
    (
        "detectable_content:number_placeholders",
        {"relation": "equal to", "num_placeholders": 2},
        "Dear [name] at [address]",
        "Dear [name]",
    ),
    (
        "detectable_content:postscript",
        {"postscript_marker": "P.S."},
        "Hi.\n\nP.S. See you.",
        "P.S. See you.\nBye.",
    ),
    (
        "detectable_content:numeric_inclusion",
        {"relation": "at least", "num_numbers": 3},
        "Call 555 now",
        "Call 55 now",
    ),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', '{"a": 1'),
    (
        "detectable_format:multiple_sections",
        {"section_splitter": "Part", "relation": "equal to", "num_sections": 2},
        "# Part 1\nx\n## Part 2\ny",
        "# Part 1\nx\nPart 2\ny",
    ),
    (
        "detectable_format:numbered_list",
        {"relation": "equal to", "num_numbered_items": 3},
        LIST3,
        LIST3 + "\n4. four",
    ),
    (
        "detectable_format:number_bullet_lists",
        {"relation": "at least", "num_bullets": 2},
        "* a\n- b",
        "* a\nb",
    ),
    ("detectable_format:title", {}, "<<My Poem>>\nRoses", "My Poem\n<<Roses>>"),
    (
        "detectable_format:number_paragraphs",
        {"relation": "equal to", "num_paragraphs": 2},
        "One.\n\nTwo.",
        "One.\nTwo.",
    ),
    (
        "detectable_format:max_paragraph_length",
        {"max_chars": 10},
        "- short\n\nalso short",
        "this paragraph is too long",
    ),
    (
        "detectable_format:sentences_per_paragraph",
        {"relation": "less than", "num_sentences": 3},
        "Go on. Stop.\n\nWait.",
        "Go on. Stop. Wait.\n\nRun.",
    ),
    (
        "detectable_format:sentence_count",
        {"relation": "equal to", "num_sentences": 2},
        "It rains. It pours!",
        "It rains.",
    ),
    ("detectable_format:sentence_endings", {"min_variants": 3}, "Yes! No? Maybe.", "Yes. No. Maybe."),
    (
        "detectable_format:nested_list",
        {"min_depth": 2, "num_subitems": 2},
        NESTED,
        "- fruit\n  - apple\n- veg",
    ),
    ("detectable_format:table", {"min_rows": 2, "min_cols": 2}, TABLE, "| a | b |\n|---|---|\n| 1 | 2 |"),
    ("detectable_format:heading_depth", {"levels": [1, 3]}, "# A\n### B", "# A\n## B"),
    ("keywords:existence", {"keywords": ["cat", "dog"]}, "A cat and a dog.", "A cat and a hotdog."),
    (
        "keywords:frequency",
        {"keyword": "tea", "relation": "equal to", "frequency": 2},
        "Tea, then more tea.",
        "Tea and steam.",
    ),
    ("keywords:forbidden_words", {"forbidden_words": ["very"]}, "It is everything.", "It is Very good."),
    (
        "keywords:letter_frequency",
        {"letter": "z", "let_relation": "at least", "let_frequency": 2},
        "Zoe buzzes",
        "Zoe hums",
    ),
    (
        "keywords:alliteration",
        {"target_letter": "s", "relation": "at least", "num_alliteration": 3},
        "Sally sells shells",
        "Sally sells pearls",
    ),
    ("keywords:palindrome_word", {"min_length": 5}, "A racecar went by", "A car went by"),
    ("keywords:positioning", {"keyword": "hello", "position": 1}, "Oh hello there", "Hello there"),
    ("keywords:vowel_count", {"relation": "less than", "num_vowels": 3}, "rhythm is", "audio"),
    ("keywords:consonant_count", {"relation": "equal to", "num_consonants": 3}, "cat a b", "cat"),
    ("length_constraints:number_characters", {"relation": "less than", "num_chars": 6}, "short", "longer"),
    ("length_constraints:number_words", {"relation": "at least", "num_words": 3}, "one two three", "one two"),
    ("length:max_word_count", {"max_words": 2}, "one two", "one two three"),
    (
        "length_constraints:sentence_length",
        {"max_words": 3},
        "Short one. Also short.",
        "This sentence is too long.",
    ),
    ("length_constraints:word_repetition", {"max_repeats": 2}, "go go stop", "go Go go"),
    ("length_constraints:unique_words", {"relation": "at least", "num_unique": 3}, "a b c a", "a b a b"),
    (
        "length_constraints:word_length",
        {"min_length": 2, "max_length": 5},
        "we are here",
        "we are extraordinary",
    ),
    ("length_constraints:avg_word_length", {"min_ratio": 3, "max_ratio": 4}, "cat dogs", "a an"),
    (
        "length_constraints:paragraph_length",
        {"relation": "less than", "words_per_paragraph": 3},
        "a b\n\nc d",
        "a b\n\nc d e",
    ),
    ("punctuation:no_comma", {}, "no commas here", "one, two"),
    ("punctuation:no_period", {}, "No periods here!", "A period."),
    ("punctuation:question_exclaim", {"relation": "equal to", "num_marks": 2}, "Why? Now!", "Why?"),
    ("punctuation:end_rule", {"allowed": [".", "!"]}, "Hi. Go!", "Hi, go."),
    ("punctuation:frequency", {"punctuation": ";", "relation": "at least", "frequency": 1}, "a; b", "a, b"),
    ("punctuation:balance", {}, 'f(a[1]) said "hi"', "f(a[1)]"),
    ("punctuation:variety", {"min_types": 2}, "a, b.", "a. b."),
    ("startend:start_checker", {"start_phrase": "Dear team"}, '"Dear team, hi', "Hi, dear team"),
    (
        "startend:end_checker",
        {"end_phrase": "Any questions?"},
        "Done. Any questions?",
        "Any questions? Done.",
    ),
    ("startend:wrap_checker", {"wrap_phrase": "~~"}, "~~hidden~~", "~~hidden"),
    ("startend:quotation", {}, '"quoted"', "'quoted'"),
]


def run(instruction_id: str, arguments: dict, text: str) -> tuple[bool, str]:
    parsed = ARGUMENTS[instruction_id].model_validate(arguments)
    return RULES[instruction_id](text, **dict(parsed))


@pytest.mark.parametrize(("instruction_id", "arguments", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_rule_passes_a_following_text_and_fails_one_that_does_not(instruction_id, arguments, good, bad):
    followed, message = run(instruction_id, arguments, good)
    assert followed, message
    followed, message = run(instruction_id, arguments, bad)
    assert not followed and message


def test_the_table_covers_every_rule_validator():
    assert {case[0] for case in CASES} == set(RULES)


@pytest.mark.parametrize(
    ("instruction_id", "arguments", "field"),
    [
        ("length_constraints:number_words", {"relation": "about", "num_words": 3}, "relation"),
        ("length_constraints:number_words", {"relation": "at least"}, "num_words"),
        ("length_constraints:number_words", {"relation": "at least", "num_words": -1}, "num_words"),
        ("keywords:existence", {"keywords": "cat"}, "keywords"),
        (
            "keywords:letter_frequency",
            {"letter": "ab", "let_relation": "at least", "let_frequency": 1},
            "letter",
        ),
        ("change_case:case_ratio", {"min_fraction": "half", "max_fraction": "1"}, "min_fraction"),
        ("punctuation:no_comma", {"comma": True}, "comma"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(instruction_id, arguments, field):
    with pytest.raises(ValidationError) as refused:
        ARGUMENTS[instruction_id].model_validate(arguments)
    assert field in {str(error["loc"][0]) for error in refused.value.errors()}


@pytest.mark.parametrize(
    ("mode", "verdicts", "reward"),
    [
        ("all", [True, False, True, True], 0.0),
        ("all", [True, True], 1.0),
        ("any", [False, True, False], 1.0),
        ("any", [False, False], 0.0),
        ("mean", [True, False, True, True], 0.75),
        ("min", [True, False], 0.0),
        ("max", [False, True], 1.0),
        ("all", [], 1.0),
        ("mean", [], 1.0),
    ],
)
def test_aggregate_by_hand(mode, verdicts, reward):
    assert aggregate(verdicts, mode) == reward
