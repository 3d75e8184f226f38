"""Reading request bodies, and answering the ones that do not validate, without ever failing with a 500.

Bodies are parsed by orjson, several times faster than the standard library on a trajectory-sized body.
What orjson refuses falls back to Python's `json`, which also reads NaN and ±Infinity (a -inf log-prob
is real data) but lets through strings that are not valid Unicode (a lone surrogate such as `"\\ud800"`):
those are refused here, naming the field, since no later step could encode them again.

A 422 keeps FastAPI's `{"detail": [...]}` shape, but what it echoes of the input is made JSON-safe (no
NaN, no surrogates) and cut short: a 50 MB body must not come back as a 50 MB error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter
from starlette.responses import Response

MAX_ECHOED_CHARS = 200
"""The longest text of the input an error entry shows; longer strings and containers are shortened."""
MAX_ERRORS_SHOWN = 50


class OrjsonBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = orjson.loads(body)
            except orjson.JSONDecodeError:
                self._json = _parse_with_stdlib(body)
        return self._json


def _parse_with_stdlib(body: bytes) -> Any:
    """What orjson refused: NaN and ±Infinity are accepted; invalid UTF-8, lone surrogates and integers
    beyond 64 bits (which orjson could not write back) are refused as JSON errors, which FastAPI answers
    with a 422 naming the reason."""
    try:
        parsed = json.loads(body)
    except UnicodeDecodeError as error:
        raise json.JSONDecodeError("the body is not valid UTF-8", "", error.start) from None
    except RecursionError:
        raise json.JSONDecodeError("the body nests arrays or objects too deeply", "", 0) from None
    found = _first_unwritable(parsed)
    if found is not None:
        steps_backwards, problem = found
        where = "".join(f"[{step!r}]" for step in reversed(steps_backwards)) or "the body"
        raise json.JSONDecodeError(f"{where} holds {problem}", "", 0)
    return parsed


def _first_unwritable(value: Any) -> tuple[list[str | int], str] | None:
    """The first value no JSON writer can write back, and what it is: the keys leading to it, innermost
    first (added on the way back up, so the walk itself allocates nothing); None if there is none."""
    if isinstance(value, str):
        return None if _encodable(value) else ([], _SURROGATE_PROBLEM)
    if isinstance(value, int) and not isinstance(value, bool):
        return None if -(2**63) <= value < 2**64 else ([], "an integer beyond 64 bits")
    if isinstance(value, dict):
        for key, child in value.items():
            found = ([], _SURROGATE_PROBLEM) if not _encodable(key) else _first_unwritable(child)
            if found is not None:
                found[0].append(key)
                return found
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found = _first_unwritable(child)
            if found is not None:
                found[0].append(index)
                return found
    return None


_SURROGATE_PROBLEM = "a lone surrogate (\\uD800-\\uDFFF), which is not valid Unicode"


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class OrjsonBodyRoute(APIRoute):
    """The route class of every Gym app: handlers see bodies parsed by `OrjsonBodyRequest`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            return await handler(OrjsonBodyRequest(request.scope, request.receive))

        return handle


async def validation_error_response(request: Request, error: Exception) -> Response:
    """FastAPI's 422 body, with every echoed input made JSON-safe and shortened."""
    assert isinstance(error, RequestValidationError)
    problems = error.errors()
    detail = [_displayable_problem(problem) for problem in problems[:MAX_ERRORS_SHOWN]]
    if len(problems) > MAX_ERRORS_SHOWN:
        detail.append({"msg": f"... and {len(problems) - MAX_ERRORS_SHOWN} more errors"})
    return Response(orjson.dumps({"detail": detail}), status_code=422, media_type="application/json")


def _displayable_problem(problem: dict[str, Any]) -> dict[str, Any]:
    return {
        key: displayable(value, MAX_ECHOED_CHARS * (1 if key == "input" else 5))
        for key, value in problem.items()
    }


def displayable(value: Any, budget: int = MAX_ECHOED_CHARS) -> Any:
    """`value` as orjson can always write it, in about `budget` characters: non-finite floats become
    "NaN"/"Infinity", text that is not valid Unicode is escaped, and long strings and containers are cut
    short with a note of what was left out."""
    return _Shortener(budget).shorten(value)


class _Shortener:
    """Walks a value once, spending a character budget; the walk never looks past what it will show."""

    def __init__(self, budget: int) -> None:
        self.left = budget

    def shorten(self, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):  # bodies hold none beyond 64 bits: `_parse_with_stdlib` refuses them
            return value
        if isinstance(value, float):
            if math.isnan(value):
                return "NaN"
            return value if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self.items(value.items(), len(value), keyed=True)
        if isinstance(value, list | tuple):
            return self.items(enumerate(value), len(value), keyed=False)
        return self.text(str(value)[: self.left + 1])

    def text(self, value: str) -> str:
        shown = value[: max(self.left, 0)]
        self.left -= len(shown) + 2
        if not _encodable(shown):
            shown = shown.encode("utf-8", "backslashreplace").decode()
        if len(shown) < len(value):
            return f"{shown}... ({len(value) - len(shown)} more characters)"
        return shown

    def items(self, pairs: Any, count: int, keyed: bool) -> Any:
        self.left -= 2  # the brackets: a deeply nested empty list must use the budget up too
        shown: dict[str, Any] | list[Any] = {} if keyed else []
        for index, (key, child) in enumerate(pairs):
            if self.left <= 0:
                note = f"... ({count - index} more {'keys' if keyed else 'items'})"
                if keyed:
                    shown["..."] = note
                else:
                    shown.append(note)
                break
            if keyed:
                shown_key = self.text(str(key))
                shown[shown_key] = self.shorten(child)
            else:
                shown.append(self.shorten(child))
        return shown


def document_json_bodies(app: FastAPI, bodies: dict[str, type[BaseModel] | None]) -> None:
    """Show, in the app's OpenAPI document, the body model each POST route (path -> model) validates
    itself: a route taking its body as a plain object, to choose how to read it (a streaming dialect,
    another API's error format), still documents the body it expects, and fuzzers aim at it."""
    build_document = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = build_document()
        components = document.setdefault("components", {}).setdefault("schemas", {})
        for path, model in bodies.items():
            if model is None or path not in document.get("paths", {}):
                continue
            schema = TypeAdapter(model).json_schema(ref_template="#/components/schemas/{model}")
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
            content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}
            document["paths"][path]["post"]["requestBody"] = {"required": True, "content": content}
        return document

    app.openapi = openapi  # type: ignore[method-assign]
