"""A GSM8K-style calculator environment written on Aviary's `Environment`, fed from local rows.

Aviary's own GSM8K package loads its problems from the Hugging Face hub (and pulls `datasets`/`pyarrow`);
this one takes the problem and its answer from the task row, so the folder runs offline. Its reward is
the environment's own: `submit_answer` pays `correct_reward` when the submitted number equals the answer
(within `tolerance`), ends the episode either way, and the calculator pays nothing.
"""

import ast
import math
import operator
from typing import Any

from aviary.core import Environment, Message, Messages, Tool, ToolRequestMessage
from pydantic import BaseModel

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPRESSION_CHARS = 500
MAX_EXPONENT = 100


def evaluate_arithmetic(expression: str) -> float:
    """Arithmetic only (numbers, + - * / // % **, parentheses): never `eval`, and exponents are capped so
    a model cannot make the server compute a number with millions of digits."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    tree = ast.parse(expression.replace("^", "**"), mode="eval")

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
                raise ValueError(f"exponent above {MAX_EXPONENT}")
            return _BINARY[type(node.op)](left, right)
        raise ValueError(f"unsupported syntax: {ast.dump(node)[:60]}")

    return walk(tree)


def parse_number(text: str) -> float | None:
    """A submitted answer as a number: thousands separators, a leading `$` and a trailing `%` are ignored."""
    cleaned = text.strip().replace(",", "").lstrip("$").rstrip("%").strip()
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class CalculatorEnvState(BaseModel):
    messages: list[Message]
    reward: float = 0.0
    done: bool = False


class CalculatorEnv(Environment[CalculatorEnvState]):
    """One word problem; tools `calculator` and `submit_answer`."""

    def __init__(
        self,
        problem_id: str,
        problem: str,
        answer: float,
        correct_reward: float = 1.0,
        incorrect_reward: float = 0.0,
        tolerance: float = 1e-6,
    ) -> None:
        self.problem_id = problem_id
        self.problem = problem
        self.answer = float(answer)
        self.correct_reward = correct_reward
        self.incorrect_reward = incorrect_reward
        self.tolerance = tolerance

    async def get_id(self) -> str:
        return self.problem_id

    async def reset(self) -> tuple[Messages, list[Tool]]:
        def calculator(expr: str) -> str:
            """Evaluate an arithmetic expression and return its value.

            Args:
                expr: An arithmetic expression, e.g. '(3 + 4) * 12 / 5'.
            """
            try:
                value = evaluate_arithmetic(expr)
            except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as error:
                return f"Error evaluating {expr!r}: {error}"
            return str(int(value)) if float(value).is_integer() else f"{value:.10g}"

        def submit_answer(answer: str, state: CalculatorEnvState) -> str:
            """Submit the final numeric answer to the problem; this ends the episode.

            Args:
                answer: The final answer, a number.
                state: Environment state (filled in by the environment).
            """
            value = parse_number(answer)
            correct = value is not None and abs(value - self.answer) <= self.tolerance
            state.reward = self.correct_reward if correct else self.incorrect_reward
            state.done = True
            return "Correct." if correct else "Incorrect."

        self.tools = [Tool.from_function(calculator), Tool.from_function(submit_answer)]
        self.state = CalculatorEnvState(messages=[Message(content=self.problem)])
        return self.state.messages, self.tools

    async def step(self, action: Message) -> tuple[Messages, float, bool, bool]:
        """The reward returned is this step's own (what `submit_answer` paid in it), so summing steps is right."""
        if not isinstance(action, ToolRequestMessage):
            return self.default_no_tool_calls_response
        before = self.state.reward
        responses = await self.exec_tool_calls(action, state=self.state, concurrency=False)
        self.state.messages.extend(responses)
        return list(responses), self.state.reward - before, self.state.done, False

    def task_summary(self) -> dict[str, Any]:
        return {"problem_id": self.problem_id, "answer": self.answer}
