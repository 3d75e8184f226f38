"""Multiple choice, written once: the row (options lettered A, B, ...), the template that says where the
answer is, and the reward for the letter a model picked.

mcqa, gpqa_diamond and bunsenbench_chemistry_mcq share the row shape (options as `{letter: text}` maps,
the gold letter, sometimes a template whose `output_regex` says where the answer is) and the reward (1.0
when the letter read from the answer is the gold one); the benchmarks' prepare scripts write such rows.
This module loads no server code, so prepare scripts and `gym list benchmarks` stay quick to import;
the verify request, response and grading are in `multiple_choice_verify`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

# ---------------------------------------------------------------------------------------------------------
# The row


def option_letter(index: int) -> str:
    """The letter of the option at `index`: A, B, C, ..."""
    return chr(ord("A") + index)


def lettered_options(choices: Sequence[str]) -> list[dict[str, str]]:
    """`[{"A": first}, {"B": second}, ...]`: the `options` of a row, lettered in the given order."""
    return [{option_letter(index): text} for index, text in enumerate(choices)]


def options_listing(choices: Sequence[str]) -> str:
    """One `X) text` line per option, as the mcq prompt configs show them."""
    return "\n".join(f"{option_letter(index)}) {text}" for index, text in enumerate(choices))


def multiple_choice_row(
    question: str, choices: Sequence[str], correct_index: int, instruction: str = "", **extra: Any
) -> dict[str, Any]:
    """An mcqa task: options lettered A, B, ... in the given order, the right letter as `expected_answer`,
    and `problem` (question, then one `X) text` line per option) for the mcq prompt configs to show. With an
    `instruction` (how to answer, for a benchmark whose prompt config passes `question` through), `question`
    is that instruction, then `problem`."""
    options = lettered_options(choices)
    options_text = options_listing(choices)
    problem = f"{question.strip()}\n\n{options_text}"
    return {
        "question": f"{instruction}\n\n{problem}" if instruction else question,
        "options_text": options_text,
        "problem": problem,
        "options": options,
        "expected_answer": next(iter(options[correct_index])),
        **extra,
    }


# ---------------------------------------------------------------------------------------------------------
# Grading


class TemplateMetadata(BaseModel):
    """Prompt-template details some rows carry; only `output_regex` matters for grading."""

    model_config = ConfigDict(extra="allow")

    output_regex: str | list[str] | None = None


def template_patterns(template: TemplateMetadata | None) -> tuple[str, ...]:
    """The template's answer regexes in the order to try them; none without a template or a regex."""
    if template is None or template.output_regex is None:
        return ()
    regex = template.output_regex
    return (regex,) if isinstance(regex, str) else tuple(regex)


def choice_reward(gold: str, extracted: str | None) -> float:
    """1.0 when the letter read is the gold one; an empty gold matches nothing."""
    return 1.0 if gold and extracted == gold else 0.0
