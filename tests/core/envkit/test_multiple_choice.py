"""nemo_gym.envkit.multiple_choice(_verify): the row every multiple-choice benchmark writes, the template
regexes a row carries, and grading the letter a folder's extractor reads (in the CPU pool, with a deadline)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nemo_gym import benchmarks
from nemo_gym.envkit.multiple_choice import (
    TemplateMetadata,
    choice_reward,
    lettered_options,
    multiple_choice_row,
    option_letter,
    options_listing,
    template_patterns,
)
from nemo_gym.envkit.multiple_choice_verify import (
    MultipleChoiceVerifyRequest,
    MultipleChoiceVerifyResponse,
    grade_choice,
)
from nemo_gym.serving import cpu_pool
from nemo_gym.testing import message_item, response_with


def last_capital_among_options(
    text: str, options: tuple[tuple[str, str], ...], suffix: str = ""
) -> str | None:
    """A stand-in for a folder's extractor (workers import it by name); spins on `spin` to test the deadline."""
    while text == "spin":
        pass
    letters = {letter for letter, _ in options}
    picked = next((char for char in reversed(text) if char in letters), None)
    return f"{picked}{suffix}" if picked else None


@pytest.fixture
def fresh_pool() -> Iterator[None]:
    yield
    cpu_pool.shutdown_pool()


def test_options_are_lettered_in_order() -> None:
    assert [option_letter(index) for index in range(3)] == ["A", "B", "C"]
    assert lettered_options(["x", "y"]) == [{"A": "x"}, {"B": "y"}]
    assert options_listing(["x", "y"]) == "A) x\nB) y"


def test_multiple_choice_rows_letter_the_options_in_order() -> None:
    row = multiple_choice_row("Pick the even one.", ["3", "8", "5"], 1, topic="parity")
    assert row["options"] == [{"A": "3"}, {"B": "8"}, {"C": "5"}]
    assert (row["expected_answer"], row["topic"]) == ("B", "parity")
    assert row["problem"] == "Pick the even one.\n\nA) 3\nB) 8\nC) 5"
    assert row["options_text"] == "A) 3\nB) 8\nC) 5"
    assert row["question"] == "Pick the even one."
    instructed = multiple_choice_row(
        "Pick the even one.", ["3", "8"], 1, instruction="Reply with the letter."
    )
    assert instructed["question"] == "Reply with the letter.\n\nPick the even one.\n\nA) 3\nB) 8"
    assert "instruction" not in instructed
    with pytest.raises(IndexError):
        multiple_choice_row("Pick.", ["3"], 1)


def test_prepare_scripts_keep_their_import_path() -> None:
    assert benchmarks.multiple_choice_row is multiple_choice_row


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (None, ()),
        (TemplateMetadata(), ()),
        (TemplateMetadata(output_regex="Answer: ([A-D])"), ("Answer: ([A-D])",)),
        (TemplateMetadata(output_regex=["a", "b"], name="kept"), ("a", "b")),
    ],
)
def test_template_patterns_in_the_order_to_try_them(template, expected) -> None:
    assert template_patterns(template) == expected


def test_the_reward_is_one_only_for_the_gold_letter() -> None:
    assert choice_reward("B", "B") == 1.0
    assert choice_reward("B", "C") == 0.0
    assert choice_reward("B", None) == 0.0
    assert choice_reward("", "") == 0.0  # an empty gold matches nothing


def _request(text: str, expected_answer: str = " b ") -> MultipleChoiceVerifyRequest:
    return MultipleChoiceVerifyRequest.model_validate(
        {
            "responses_create_params": {"input": "Pick one."},
            "response": response_with(message_item(text)),
            "options": [{"a": "x"}, {"B": "y"}, {"C": None}],
            "expected_answer": expected_answer,
        }
    )


class NamedResponse(MultipleChoiceVerifyResponse):
    pass


async def test_grade_choice_reads_the_letter_in_a_worker_and_grades_it(fresh_pool) -> None:
    graded = await grade_choice(_request("I pick B"), last_capital_among_options, timeout_s=30)
    assert type(graded) is MultipleChoiceVerifyResponse
    assert (graded.reward, graded.expected_answer, graded.extracted_answer) == (1.0, "B", "B")
    # null options are no choice (C is not offered); extra arguments reach the extractor
    wrong = await grade_choice(
        _request("C, no: A"), last_capital_among_options, "", timeout_s=30, response_type=NamedResponse
    )
    assert type(wrong) is NamedResponse
    assert (wrong.reward, wrong.extracted_answer) == (0.0, "A")
    suffixed = await grade_choice(_request("B"), last_capital_among_options, "!", timeout_s=30)
    assert (suffixed.reward, suffixed.extracted_answer) == (0.0, "B!")


async def test_a_runaway_extraction_counts_as_no_answer(fresh_pool) -> None:
    graded = await grade_choice(_request("spin"), last_capital_among_options, timeout_s=0.3)
    assert (graded.reward, graded.extracted_answer) == (0.0, None)
