"""math_advanced_calculations: calculator tools from an "alternate universe" where arithmetic is skewed.

Every tool looks familiar (add, sin, pi, ...) but computes something else (add adds an extra 1.2, sin is
the cosine, pi is e, ...), and the tool descriptions do not say so. A model can only get the values the
task asks for by actually calling the tools and chaining their outputs, never by doing the math itself,
which is what this environment trains. The reward checks that every asked-for value appeared among the
tool outputs of the rollout.
"""

import json
import math
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, field_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.reward_profile import compute_pass_majority_metrics, default_key_metrics, highest_k_metrics


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


class MathAdvancedCalculationsConfig(BaseResourcesServerConfig):
    pass


class CalculatorArguments(BaseModel):
    """The union of every tool's parameters; each tool reads only its own, null counts as absent."""

    a: float | None = None
    b: float | None = None
    radians: float | None = None
    base: float | None = None


class CalculatorResult(BaseModel):
    solution: float


class MathVerifyRequest(BaseVerifyRequest):
    ground_truth: str
    id: int | None = None
    depth: int | None = None
    breadth: int | None = None

    @field_validator("ground_truth")
    @classmethod
    def _is_a_json_list_of_numbers(cls, value: str) -> str:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON: {error}") from None
        if not isinstance(parsed, list) or not all(
            isinstance(item, int | float) and not isinstance(item, bool) for item in parsed
        ):
            raise ValueError("must be the JSON text of a list of numbers")
        return value


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


class MathAdvancedCalculationsResourcesServer(SimpleResourcesServer):
    config: MathAdvancedCalculationsConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Registered last, so the base routes (/verify, /seed_session, ...) take precedence.
        app.post("/{path}")(self.call_tool)
        return app

    async def call_tool(self, path: str, body: CalculatorArguments | None = None) -> CalculatorResult:
        """One route for all tools: the path names the function."""
        if path not in FUNCTIONS:
            raise HTTPException(status_code=404, detail="Function not found")
        arguments = body or CalculatorArguments()
        missing = [name for name in FUNCTIONS[path][0] if getattr(arguments, name) is None]
        if missing:
            return JSONResponse(
                status_code=422,
                content={
                    "detail": [
                        {"type": "missing", "loc": ["body", name], "msg": f"Field required by {path}"}
                        for name in missing
                    ]
                },
            )
        try:
            return CalculatorResult(solution=calculate(path, arguments))
        except (ArithmeticError, ValueError) as error:
            raise HTTPException(status_code=500, detail=f"{type(error).__name__}: {error}") from error

    async def verify(self, request: Request, body: MathVerifyRequest) -> BaseVerifyResponse:
        """1.0 iff every ground-truth value appears, exactly, among the rollout's tool outputs."""
        seen = set(tool_solutions(body.response))
        reward = 1.0 if all(float(value) in seen for value in json.loads(body.ground_truth)) else 0.0
        return BaseVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}), reward=reward
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the all-values-found reward."""
        return compute_pass_majority_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return {
            **default_key_metrics(agent_metrics),
            **highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", "pass@{k}"),
        }


if __name__ == "__main__":
    MathAdvancedCalculationsResourcesServer.run_webserver()
