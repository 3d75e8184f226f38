"""The one formatter of pydantic validation problems."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from nemo_gym.wire.validation_errors import describe_validation_error, first_problem


class Inner(BaseModel):
    count: int


class Outer(BaseModel):
    name: str
    items: list[Inner]


def failed(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(data)
    return caught.value


def test_names_each_location_dotted_with_its_message() -> None:
    error = failed({"name": 3, "items": [{"count": "x"}]})
    assert describe_validation_error(error) == (
        "name: Input should be a valid string; "
        "items.0.count: Input should be a valid integer, unable to parse string as an integer"
    )


def test_counts_what_it_leaves_out_and_names_the_root() -> None:
    error = failed({"name": "a", "items": [{"count": "x"}] * 4})
    assert describe_validation_error(error, limit=2).endswith("; ... and 2 more")
    assert (
        first_problem(failed([1]), root="row")
        == "row: Input should be a valid dictionary or instance of Outer"
    )


def test_relocate_rewrites_locations() -> None:
    error = failed({"name": "a", "items": [{"count": "x"}]})
    assert describe_validation_error(error, relocate=lambda loc: loc[2:]).startswith("count: ")
