"""One way to say what a pydantic `ValidationError` found, for error messages and HTTP error bodies.

Every place that turns a failed validation into a message (a config key, a task row, an upstream's answer)
words its problems the same way: `dotted.location: message`, joined with "; ", at most a few of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

MAX_REPORTED_PROBLEMS = 5

Location = tuple[Any, ...]


def dotted_location(location: Sequence[Any]) -> str:
    return ".".join(map(str, location))


def describe_problem(
    problem: Any, root: str = "<root>", relocate: Callable[[Location], Location] | None = None
) -> str:
    """`location: message` for one entry of `ValidationError.errors()`; `root` names an empty location."""
    location = tuple(problem["loc"])
    if relocate is not None:
        location = relocate(location)
    message = str(problem["msg"]).removeprefix("Value error, ")
    return f"{dotted_location(location) or root}: {message}"


def describe_validation_error(
    error: ValidationError,
    limit: int = MAX_REPORTED_PROBLEMS,
    root: str = "<root>",
    relocate: Callable[[Location], Location] | None = None,
) -> str:
    """The first `limit` problems, with a count of the rest, so one message stays readable however bad the
    input was."""
    problems = error.errors()
    described = [describe_problem(problem, root, relocate) for problem in problems[:limit]]
    if len(problems) > limit:
        described.append(f"... and {len(problems) - limit} more")
    return "; ".join(described)


def first_problem(error: ValidationError, root: str = "<root>") -> str:
    return describe_problem(error.errors()[0], root)
