"""Pure grading for structured_outputs: find the JSON in an answer, parse it within bounds, validate it.

Everything here runs in a CPU-pool worker: a schema's `pattern` is a Python regex applied to model text,
and parsing or validating a large answer is not free, so none of it may run on a server's event loop.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

from nemo_gym.text.extraction import closed_fenced_blocks, one_line

JSON_FENCE_LABELS = ("", "json")
MAX_SCHEMA_DEPTH = 64
"""JSON nesting of a schema; jsonschema recurses a dozen frames per level when it checks one."""


class SchemaProblem(ValueError):
    """The row's schema is unusable: the row is at fault, not the answer."""


@dataclass(frozen=True)
class Grade:
    parsed_ok: bool
    schema_valid: bool
    validation_error: str | None
    schema_problem: str | None = None


def depth_of(value: Any) -> int:
    """Nesting depth of parsed JSON, computed without recursion (1 for a scalar)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of range for a number")
    return value


# What Python before 3.13 says at the bracket that closes after a trailing comma (3.13 names the comma).
BEFORE_313_AFTER_A_TRAILING_COMMA = {
    "}": ("Expecting property name enclosed in double quotes", "object"),
    "]": ("Expecting value", "array"),
}
JSON_WHITESPACE = " \t\n\r"


def json_error_text(error: json.JSONDecodeError) -> str:
    """The decoder's reason as Python 3.13 words it, on every version, so a verify answer does not depend
    on the server's Python: before 3.13 a trailing comma was a missing name or value at the bracket."""
    expected, container = BEFORE_313_AFTER_A_TRAILING_COMMA.get(
        error.doc[error.pos : error.pos + 1], ("", "")
    )
    comma = len(error.doc[: error.pos].rstrip(JSON_WHITESPACE)) - 1
    if error.msg == expected and comma >= 0 and error.doc[comma] == ",":
        error = json.JSONDecodeError(f"Illegal trailing comma before end of {container}", error.doc, comma)
    return str(error)


def parse_json(text: str, max_depth: int) -> Any:
    """Strict JSON (no NaN or Infinity) nested at most `max_depth` deep; ValueError otherwise."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        raise ValueError(json_error_text(error)) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if depth_of(value) > max_depth:
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def fenced_json_blocks(text: str) -> list[str]:
    """Contents of the closed ``` blocks labelled `json` or unlabelled, in order (a linear scan)."""
    return [body for label, body in closed_fenced_blocks(text) if label in JSON_FENCE_LABELS]


def parse_answer(text: str, use_fences: bool, max_depth: int) -> Any:
    """The whole answer as JSON; failing that, the last ```json block. ValueError names what failed."""
    try:
        return parse_json(text.strip(), max_depth)
    except ValueError as whole_error:
        blocks = fenced_json_blocks(text) if use_fences else []
        if not blocks:
            raise ValueError(f"not JSON: {whole_error}") from None
        try:
            return parse_json(blocks[-1].strip(), max_depth)
        except ValueError as block_error:
            raise ValueError(f"the ```json block is not JSON: {block_error}") from None


def strictified(schema: Any) -> Any:
    """A copy where every object schema with `properties` requires all of them and allows no others."""
    if isinstance(schema, list):
        return [strictified(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: strictified(value) for key, value in schema.items()}
    if isinstance(schema.get("properties"), dict):
        copy["required"] = list(schema["properties"])
        copy["additionalProperties"] = False
    return copy


@lru_cache(maxsize=32)
def compiled_validator(schema_str: str, strictify: bool) -> Validator:
    """The validator of a row's schema (cached: every rollout of a task brings the same schema)."""
    try:
        schema = json.loads(schema_str)
    except json.JSONDecodeError as error:
        raise SchemaProblem(f"not JSON: {json_error_text(error)}") from None
    except (ValueError, RecursionError) as error:
        raise SchemaProblem(f"not JSON: {error}") from None
    if not isinstance(schema, dict | bool):
        raise SchemaProblem("a JSON Schema is an object or a boolean")
    if depth_of(schema) > MAX_SCHEMA_DEPTH:
        raise SchemaProblem(f"nested deeper than {MAX_SCHEMA_DEPTH} levels")
    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        raise SchemaProblem("$schema must be a string")
    validator_class = validator_for(schema, default=Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except SchemaError as error:
        raise SchemaProblem(f"not a valid JSON Schema: {error.message}") from None
    except RecursionError:
        raise SchemaProblem("nested too deeply to check") from None
    return validator_class(strictified(schema) if strictify else schema)


def grade(
    schema_str: str, answer: str, strictify: bool, use_fences: bool, max_chars: int, max_depth: int
) -> Grade:
    """Check the schema first (a bad row fails whatever the answer), then parse and validate the answer."""
    try:
        validator = compiled_validator(schema_str, strictify)
    except SchemaProblem as problem:
        return Grade(False, False, None, schema_problem=one_line(str(problem)))
    if len(answer) > max_chars:
        return Grade(False, False, f"answer has {len(answer)} characters; the limit is {max_chars}")
    try:
        instance = parse_answer(answer, use_fences, max_depth)
    except ValueError as error:
        return Grade(False, False, one_line(str(error)))
    try:
        error = best_match(validator.iter_errors(instance))
    except Unresolvable as unresolvable:
        return Grade(True, False, None, schema_problem=one_line(f"cannot resolve a $ref: {unresolvable}"))
    except RecursionError:
        return Grade(True, False, "nested too deeply to validate")
    except (ArithmeticError, ValueError, TypeError) as error:  # e.g. multipleOf on a huge number
        return Grade(True, False, one_line(f"cannot validate: {type(error).__name__}: {error}"))
    if error is None:
        return Grade(True, True, None)
    return Grade(True, False, one_line(f"{error.json_path}: {error.message}"))
