"""Every IFBench instruction in-process: a text that follows it and one that does not."""

import string

import pytest

from resources_servers.ifbench.checks import (
    IFEVAL_REGISTRY,
    NORTHERN_CAPITALS,
    REGISTRY,
    REPEAT_SIMPLE_SENTENCE,
    UNSUPPORTED,
    grade,
    loose_variants,
    validated_arguments,
)


def questions(order: list[int]) -> str:
    """Four multiple-choice questions with five options each; `order` sets each stem's length."""
    blocks = []
    for number, length in enumerate(order, start=1):
        options = "\n".join(f"{letter}. choice{letter}" for letter in "ABCDE")
        blocks.append(f"Question {number}: Who painted {'x' * length}?\n{options}")
    return "\n".join(blocks)


COUNTRIES = ["Zimbabwe", *sorted((f"Land {index:02d}" for index in range(51)), reverse=True)]
PRODUCT_ROWS = [f"{index},Tools,Acme,9,{index}" for index in range(13)]

CASES = [
    ("count:word_count_range", {"min_words": 3, "max_words": 5}, "one two three four", "one two"),
    ("count:unique_word_count", {"N": 3}, "Red, blue and", "red red RED"),
    ("ratio:stop_words", {"percentage": 50}, "Cats chase mice", "the cat is on the mat"),
    ("ratio:sentence_type", {}, "I run. You walk. Who won?", "I run. Who won?"),
    ("ratio:sentence_balance", {}, "I run. Who won? Wow!", "I run. I walk. Wow!"),
    ("count:conjunctions", {"small_n": 2}, "I ran and jumped but fell.", "I ran and jumped and fell."),
    ("count:person_names", {"N": 2}, "Emma met Liam.", "Emma met Bob."),
    (
        "ratio:overlap",
        {"reference_text": "the quick brown fox jumps", "percentage": 100},
        "the quick brown fox",
        "a slow red dog runs",
    ),
    ("count:numbers", {"N": 2}, "I have 3 cats and 4 dogs.", "I have 3.5 cats."),
    ("words:alphabet", {}, "Ants bite cats daily.", "Ants bite dogs."),
    ("words:vowel", {}, "cats can jab", "a quick quiet ode"),
    ("words:consonants", {}, "strong blocks", "strong idea"),
    ("sentence:alliteration_increment", {}, "Big cat. Silly snakes slide.", "Silly snakes slide. Big cat."),
    ("words:palindrome", {}, "level radar civic kayak rotor refer madam stats tenet racecar", "level radar"),
    ("count:punctuation", {}, "Hi, there; note: done. Really?! Yes! Why?", "Hi, there. Really?!"),
    ("format:parentheses", {}, "((([[{x}]])))", "(a [b] c)"),
    ("format:quotes", {}, '"He said \'she said "hi" ok\' ok"', "\"He said 'hi'\""),
    ("words:prime_lengths", {}, "it was red", "this was red"),
    ("format:options", {"options": "yes/no/maybe"}, "Maybe.", "Maybe, because it depends."),
    ("format:options", {"options": "a), b), c), d)"}, "b)", "B"),
    ("format:newline", {}, "one\ntwo\nthree", "one two\nthree"),
    ("format:emoji", {}, "I love tea 😀. It is warm 🔥.", "I love tea. It is warm 🔥."),
    ("ratio:sentence_words", {}, "Cats run. Dogs sit. Owls fly.", "Cats run. Dogs sit. Owls soar."),
    ("count:words_japanese", {"N": 2}, "I 猫 like 犬", "I cat like 犬"),
    ("words:repeats", {"small_n": 2}, "go go stop", "Go go, go!"),
    ("sentence:keyword", {"word": "mist", "N": 2}, "Dawn came. Mist rose.", "Mist rose. Dawn came."),
    ("count:pronouns", {"N": 3}, "I told you about it.", "I told Bob."),
    ("words:odd_even_syllables", {}, "cat water dog", "cat dog"),
    ("words:last_first", {}, "I like cats. Cats like fish.", "I like cats. Dogs like fish."),
    ("words:paragraph_last_first", {}, "home is where I go home\nlove conquers love.", "home is here"),
    ("sentence:increment", {"small_n": 1}, "I run. I run fast. I run very fast.", "I run. I run."),
    ("words:no_consecutive", {}, "the cat ran", "the tall cat"),
    ("format:line_indent", {}, "a\n b\n  c", "a\n b\n c"),
    ("format:quote_unquote", {}, 'He said "hi" to me.', 'He said "hi"'),
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR a\nSEPARATOR b", "SEPARATOR a\n- b"),
    ("format:thesis", {}, "<i>Tea is good.</i> Here is why.", "<i>Tea is good.</i>"),
    ("format:sub-bullets", {}, "* fruit\n- apple\n* veg\n- kale", "* fruit\n- apple\n* veg"),
    (
        "format:no_bullets_bullets",
        {},
        "Tea is good. Coffee too.\n* green\n* black",
        "Tea is good.\n* green\n* black",
    ),
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", "7, 14, 21, 28, 35, 42, 49"),
    ("custom:mcq_count_length", {}, questions([5, 10, 15, 20]), questions([5, 10, 20, 15])),
    ("custom:reverse_newline", {}, "\n".join(COUNTRIES), "\n".join(reversed(COUNTRIES))),
    ("custom:word_reverse", {}, "Eagle bald the is it.", "It is the bald eagle."),
    ("custom:character_reverse", {}, ".elgae dlab ehT", "The bald eagle."),
    (
        "custom:sentence_alphabet",
        {},
        " ".join(f"{letter.upper()}x went home." for letter in string.ascii_lowercase),
        " ".join(f"{letter.upper()}x went home." for letter in string.ascii_lowercase[:25]),
    ),
    ("custom:european_capitals_sort", {}, ", ".join(NORTHERN_CAPITALS), ", ".join(NORTHERN_CAPITALS[::-1])),
    (
        "custom:csv_city",
        {},
        "ID,Country,City,Year,Count\n" + "\n".join(f"{i},France,Paris,2020,{i}" for i in range(7)),
        "ID,Country,City,Year,Count\n" + "\n".join(f"{i},France,Paris,2020,{i}" for i in range(6)),
    ),
    (
        "custom:csv_special_character",
        {},
        "ProductID,Category,Brand,Price,Stock\n" + "\n".join([*PRODUCT_ROWS, '13,Tools,"A&B",9,1']),
        "ProductID,Category,Brand,Price,Stock\n" + "\n".join([*PRODUCT_ROWS, "13,Tools,AB,9,1"]),
    ),
    (
        "custom:csv_quotes",
        {},
        "\n".join(
            "\t".join(f'"{field}"' for field in row)
            for row in (
                ["StudentID", "Subject", "Grade", "Semester", "Score"],
                *[["1", "Math", "A", "F", "90"]] * 3,
            )
        ),
        '"StudentID"\t"Subject"\t"Grade"\t"Semester"\t"Score"\n' + '"1"\tMath\t"A"\t"F"\t"90"\n' * 3,
    ),
    ("custom:date_format_list", {}, "1796-04-12, 1805-12-02", "1805-12-02, 1900-01-01"),
    (
        "count:keywords_multiple",
        {"keyword1": "apple", "keyword2": "pear", "keyword3": "fig", "keyword4": "kiwi", "keyword5": "lime"},
        "apple " + "pear " * 2 + "fig " * 3 + "kiwi " * 5 + "lime " * 7,
        "apple " + "pear " * 2 + "fig " * 3 + "kiwi " * 5 + "lime " * 6,
    ),
    (
        "words:keywords_specific_position",
        {"keyword": "mist", "n": 2, "m": 2},
        "Dawn came. Soft mist rose.",
        "Dawn came. Mist rose.",
    ),
    ("words:words_position", {"keyword": "tea"}, "I tea love tea now.", "I love tea."),
    (
        "repeat:repeat_change",
        {"prompt_to_repeat": "Write a poem about cats"},
        "Compose a poem about cats",
        "Write a poem about cats",
    ),
    ("repeat:repeat_simple", {}, REPEAT_SIMPLE_SENTENCE.upper(), "Sure."),
    (
        "repeat:repeat_span",
        {"prompt_to_repeat": "one two three four", "n_start": 1, "n_end": 2},
        "Two three",
        "two three four",
    ),
    ("format:title_case", {}, "The Big Red Dog", "The big red dog"),
    ("format:output_template", {}, "My Answer: x My Conclusion: y Future Outlook: z", "My Answer: x"),
    ("format:no_whitespace", {}, "no-space-at-all", "no space"),
]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "follows", "breaks"),
    CASES,
    ids=[f"{case[0]}-{i}" for i, case in enumerate(CASES)],
)
def test_an_instruction_is_followed_by_one_text_and_not_by_another(instruction_id, kwargs, follows, breaks):
    arguments = validated_arguments(instruction_id, kwargs)
    checker = REGISTRY[instruction_id].checker
    assert checker(follows, **arguments) is True
    assert checker(breaks, **arguments) is False


def test_every_ifbench_instruction_has_a_case_and_the_pos_tagger_one_is_refused():
    ifbench_ids = set(REGISTRY) - set(IFEVAL_REGISTRY)
    assert ifbench_ids == {case[0] for case in CASES}
    assert len(ifbench_ids) + len(UNSUPPORTED) == 58
    with pytest.raises(ValueError, match="part-of-speech"):
        validated_arguments("words:start_verb", None)


def test_ifeval_ids_are_the_instruction_following_checkers():
    assert REGISTRY["punctuation:no_comma"].checker is IFEVAL_REGISTRY["punctuation:no_comma"]
    assert grade("a, b", ["punctuation:no_comma"], [{}]) == [(False, False)]


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "problem"),
    [
        ("count:nonsense", {}, "unknown instruction id"),
        ("count:numbers", {}, "N: Field required"),
        ("count:numbers", {"N": "many"}, "N: Input should be a valid integer"),
        ("count:numbers", {"N": -1}, "greater than or equal to 0"),
        ("count:numbers", {"N": 2, "small_n": 3}, "small_n: Extra inputs are not permitted"),
        ("sentence:keyword", {"word": " ", "N": 1}, "word"),
    ],
)
def test_kwargs_that_do_not_fit_are_refused_with_the_reason(instruction_id, kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        validated_arguments(instruction_id, kwargs)


def test_null_kwargs_are_dropped_as_in_the_data():
    assert validated_arguments("count:numbers", {"N": 2, "small_n": None, "keyword": None}) == {"N": 2}
    assert validated_arguments("format:no_whitespace", None) == {}


def test_loose_reading_drops_first_and_last_lines_and_asterisks():
    variants = loose_variants("Sure:\n**Maybe**\nHope it helps")
    assert variants[0] == "Sure:\n**Maybe**\nHope it helps"
    assert "Maybe" in variants
    options = {"options": "yes/no/maybe"}
    assert grade("Sure:\n*Maybe*\nHope it helps", ["format:options"], [options]) == [(False, True)]
    assert grade("   ", ["format:options"], [options]) == [(False, False)], "an empty answer follows nothing"
