"""The verify side of a multiple-choice row: its request and response, and grading the letter read.

How the letter is read stays each folder's rule; `grade_choice` runs it in the CPU pool because template
regexes come from data and may backtrack badly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import Field

from nemo_gym.envkit.multiple_choice import TemplateMetadata, choice_reward
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.text.extraction import option_pairs
from nemo_gym.wire.rows import BaseVerifyRequest, BaseVerifyResponse


class MultipleChoiceVerifyRequest(BaseVerifyRequest):
    """An mcqa-style row; a folder adds its own `grading_mode` (whose values and default differ)."""

    options: list[dict[str, str | None]] = Field(default_factory=list)
    expected_answer: str
    uuid: str | None = None
    metadata: Any = None
    template_metadata: TemplateMetadata | None = None


class MultipleChoiceVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None


Response = TypeVar("Response", bound=MultipleChoiceVerifyResponse)


async def grade_choice(
    body: MultipleChoiceVerifyRequest,
    extract: Callable[..., str | None],
    *extract_args: Any,
    timeout_s: float,
    response_type: type[Response] = MultipleChoiceVerifyResponse,  # type: ignore[assignment]
) -> Response:
    """`extract(answer text, (letter, text) options, *extract_args)` in the CPU pool, graded against the
    row's gold letter. `extract` must be importable by a worker (a module-level function); past
    `timeout_s` the answer counts as none, so a pathological template regex scores 0.0."""
    gold = body.expected_answer.strip().upper()
    extracted = await run_cpu_bound(
        extract,
        body.response.output_text,
        option_pairs(body.options),
        *extract_args,
        timeout_s=timeout_s,
        on_timeout=None,
    )
    return response_type(
        responses_create_params=body.responses_create_params,
        response=body.response,
        reward=choice_reward(gold, extracted),
        expected_answer=gold,
        extracted_answer=extracted,
    )
