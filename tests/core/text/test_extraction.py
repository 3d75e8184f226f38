"""nemo_gym.text.extraction: exact results on ordinary text, and linear time on pathological text."""

from __future__ import annotations

import re

import pytest

from nemo_gym.testing import LINEAR_CPU_BUDGET_S, cpu_time_of
from nemo_gym.text.extraction import (
    boxed_spans,
    closed_fenced_blocks,
    content_text,
    final_boxed,
    last_boxed,
    last_match,
    letter_from_patterns,
    one_line,
    option_letter_for_text,
    option_pairs,
    strip_text_wrappers,
    without_reasoning,
)

OPTIONS = (("A", "Paris"), ("B", "Lyon"), ("C", "Nice"))


# --- one_line ----------------------------------------------------------------------------------------


def test_one_line_flattens_every_whitespace_run():
    assert one_line("  a\n\tb \r\n  c  ") == "a b c"
    assert one_line("") == ""


def test_one_line_cuts_at_the_limit_and_marks_the_cut():
    assert one_line("x" * 300) == "x" * 300
    cut = one_line("x" * 301)
    assert len(cut) == 300 and cut.endswith("x…")
    assert one_line("abcdef", 4) == "abc…"
    assert one_line("abcdef", 4, ellipsis="") == "abcd"
    assert one_line("ab  cd", 5) == "ab cd", "the limit applies to the flattened text"


# --- \boxed{} ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no box", None),
        ("\\boxed{A}", "A"),
        ("\\boxed{A} then \\boxed{B}", "B"),
        ("\\boxed {C}", "C"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{7} and an unclosed \\boxed{8", "7"),
        ("\\boxed{\\boxed{B}}", "B"),
        ("\\boxed{x} }}} \\boxed{", "x"),
        ("{ \\boxed{y}", "y"),
        ("\\boxed{}", ""),
    ],
)
def test_last_boxed_reads_the_last_closed_box_brace_balanced(text, expected):
    assert last_boxed(text) == expected


def test_boxed_spans_lists_closed_boxes_in_opening_order():
    text = "\\boxed{a\\boxed{b}} \\boxed{c} \\boxed{d"
    assert [text[start:end] for start, end in boxed_spans(text)] == ["a\\boxed{b}", "b", "c"]
    assert boxed_spans("") == [] and boxed_spans("{}{}") == []


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" * 300_000,
        "{" * 2_000_000 + "\\boxed{A}",
        "\\boxed{A}" + "{" * 2_000_000,
        "\\boxed{" * 100_000 + "}" * 100_000,
        "}" * 2_000_000 + "\\boxed{Z}",
    ],
    ids=["unclosed-boxes", "braces-then-box", "box-then-braces", "deeply-nested-boxes", "stray-closers"],
)
def test_megabytes_of_braces_and_boxes_stay_fast(text):
    result, seconds = cpu_time_of(last_boxed, text)
    assert seconds < LINEAR_CPU_BUDGET_S, seconds
    assert result in (None, "A", "Z", "")


def test_deeply_nested_boxes_are_all_found():
    text = "\\boxed{" * 100_000 + "}" * 100_000
    spans, seconds = cpu_time_of(boxed_spans, text)
    assert seconds < LINEAR_CPU_BUDGET_S and len(spans) == 100_000
    assert last_boxed(text) == ""


# --- ``` blocks --------------------------------------------------------------------------------------


def test_closed_fenced_blocks_need_a_label_line_and_a_closing_fence():
    text = "a ```SQL \nselect 1\n``` b ```\nplain\n``` ```inline``` ```json\nunclosed"
    assert closed_fenced_blocks(text) == [("sql", "select 1\n"), ("", "plain\n")]
    assert closed_fenced_blocks("no fence") == []


def test_closed_fenced_blocks_is_linear_on_many_fences():
    text = "```\n" * 500_000
    blocks, seconds = cpu_time_of(closed_fenced_blocks, text)
    assert seconds < LINEAR_CPU_BUDGET_S and len(blocks) == 250_000


# --- multiple choice ---------------------------------------------------------------------------------


def test_option_pairs_uppercase_the_letters_and_drop_null_options():
    rows = [{"a": "Paris"}, {" B ": "Lyon"}, {"C": None}, {}]
    assert option_pairs(rows) == (("A", "Paris"), ("B", "Lyon"))


def test_option_letter_for_text_ignores_case_spacing_and_a_final_period():
    assert option_letter_for_text("  lyon. ", OPTIONS) == "B"
    assert option_letter_for_text("Marseille", OPTIONS) is None
    assert option_letter_for_text(" . ", OPTIONS) is None


@pytest.mark.parametrize(
    ("text", "patterns", "expected"),
    [
        ("Answer: b ... Answer: c", [r"answer:\s*([a-z])"], "C"),
        ("answer is Lyon", [r"answer is (\w+)"], "B"),
        ("pick Z", [r"pick (\w)"], "Z"),
        ("الإجابة: ب", [r":\s*(\S)"], "B"),
        ("Ｄ", [r"(\S)"], "D"),
        ("Answer: C", ["(unclosed", r"a{99999999999}", r"answer:\s*(\w)"], "C"),
        ("nothing here", [r"answer:\s*(\w)"], None),
        ("answer: Marseille", [r"answer:\s*(\w+)", r"(Nice)?"], None),
    ],
)
def test_letter_from_patterns(text, patterns, expected):
    assert letter_from_patterns(text, patterns, OPTIONS) == expected


def test_content_text_reads_strings_and_text_parts_and_skips_the_rest():
    assert content_text("plain") == "plain"
    parts = [
        {"type": "input_text", "text": "a"},
        {"type": "input_image", "image_url": "data:image/png;base64,AA=="},
        {"type": "output_text", "text": "b"},
        {"type": "input_text", "text": None},
        "not a part",
    ]
    assert content_text(parts) == "ab"
    assert content_text(None) == ""


# --- the last match, reasoning, final box, \\text{} wrappers -----------------------------------------


def test_last_match_is_the_last_of_all_matches():
    answer = re.compile(r"answer: (\w+)", re.IGNORECASE)
    last = last_match(answer, "Answer: A ... on reflection, answer: C")
    assert last is not None and last.group(1) == "C"
    assert last_match(answer, "no marker") is None


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<think>the gold is B</think> B ", "B"),
        ("A <think>a</think>B<think>b</think> C", "A B C"),
        ("B <think>cut off while thinking", "B"),
        ("reasoning with no opening tag</think>C", "C"),
        ("  plain answer\n", "plain answer"),
    ],
)
def test_without_reasoning_keeps_only_what_the_reader_may_see(text, kept):
    assert without_reasoning(text) == kept


@pytest.mark.parametrize(
    ("text", "final", "last"),
    [
        ("\\boxed{a} then \\boxed{b{c}d}", "b{c}d", "b{c}d"),
        ("\\boxed {x}", "x", "x"),
        ("\\boxed{a} then \\boxed{cut off", None, "a"),  # no fallback on an earlier box
        ("\\boxed{a} then \\boxedx{y}", None, "a"),
        ("\\boxed{a} and \\boxed alone", None, "a"),
        ("\\boxed{outer \\boxed{inner}}", "inner", "inner"),
        ("no box", None, None),
    ],
)
def test_final_boxed_reads_only_the_final_box(text, final, last):
    assert final_boxed(text) == final
    assert last_boxed(text) == last


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\\text{B}", "B"),
        ("\\text {Paris} and \\text{Lyon}", "Paris and Lyon"),
        ("\\text{\\text{ nested }}", " nested "),
        ("\\text{a{b}}", "\\text{a{b}}"),  # braces inside are not a plain wrapper
        ("no wrapper", "no wrapper"),
    ],
)
def test_strip_text_wrappers_unwraps_every_level(text, plain):
    assert strip_text_wrappers(text) == plain
