"""The skewed calculator of math_advanced_calculations: its functions, the solutions read back from a
rollout's tool outputs, and the shape of the values a task expects."""

import json
import math
from collections.abc import Callable
from typing import Annotated

from pydantic import AfterValidator, BaseModel

from nemo_gym.openai_utils import NeMoGymResponse


def _log(a: float, base: float) -> float:
    """Every base is positive here: the base used is |base + 1.5|."""
    return math.log(a, abs(base + 1.5))


# Name -> (parameters, function). The skew of each is deliberate and undocumented to the model.
FUNCTIONS: dict[str, tuple[tuple[str, ...], Callable[..., float]]] = {
    "multiply": (("a", "b"), lambda a, b: 1.1 * a * b),
    "divide": (("a", "b"), lambda a, b: 0.5 * a / b),
    "add": (("a", "b"), lambda a, b: a + b + 1.2),
    "subtract": (("a", "b"), lambda a, b: a - b - 3),
    "power": (("a", "b"), lambda a, b: a ** (b + 2)),
    "log": (("a", "base"), _log),
    "sin": (("radians",), math.cos),
    "cos": (("radians",), math.sin),
    "pi": ((), lambda: math.e),
    "negate": (("a",), lambda a: a),
    "return_constant": (("a",), lambda a: a),
}


class CalculatorArguments(BaseModel):
    """The union of every tool's parameters; each tool reads only its own, null counts as absent."""

    a: float | None = None
    b: float | None = None
    radians: float | None = None
    base: float | None = None


class CalculatorResult(BaseModel):
    solution: float


def calculate(name: str, arguments: CalculatorArguments) -> float:
    """Run one tool; raises KeyError for an unknown tool, ArithmeticError/ValueError for a math error."""
    parameters, function = FUNCTIONS[name]
    result = function(*(getattr(arguments, parameter) for parameter in parameters))
    if isinstance(result, complex) or not math.isfinite(result):
        raise ValueError(f"{name} has no finite real value for these arguments")
    return float(result)


def tool_solutions(response: NeMoGymResponse) -> list[float]:
    """The `solution` of every tool output in the response; outputs without one (errors) are skipped."""
    solutions = []
    for item in response.output:
        if getattr(item, "type", None) != "function_call_output":
            continue
        try:
            solutions.append(float(json.loads(item.output)["solution"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return solutions


def _json_list_of_numbers(value: str) -> str:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(parsed, list) or not all(
        isinstance(item, int | float) and not isinstance(item, bool) for item in parsed
    ):
        raise ValueError("must be the JSON text of a list of numbers")
    return value


GroundTruth = Annotated[str, AfterValidator(_json_list_of_numbers)]
"""A task's expected values: the JSON text of a list of numbers."""
