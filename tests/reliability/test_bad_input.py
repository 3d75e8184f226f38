"""Hand-built malformed requests to every route of every shipped server: none may be answered with a 5xx.

Each route listed in a server's /openapi.json gets the same corpus: broken JSON, no body, the wrong
content type, the wrong top-level type, a lone surrogate, NaN and the infinities, 10,000 levels of
nesting, a 400-digit integer, each required field missing or of the wrong type or holding one of those
values, unknown fields and query strings, and the methods the route does not take. A 4xx must carry one
of the two error formats of Gym servers: FastAPI's `detail` or the `error` envelope (nemo_gym/http/errors.py).
Stateful servers get a seeded session before each route, so tool routes and /verify run on real state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import requests

from tests.helpers import REPO_ROOT
from tests.reliability.deployment import ANSWER_TIMEOUT_S, HEAD, SERVER_NAMES, Route, Server, Tally

DEPTH = 10_000
JSON = "application/json"
RAW_VALUES = {
    "lone_surrogate": b'"\\ud800"',
    "lone_low_surrogate": b'"a\\udc00b"',
    "nan": b"NaN",
    "infinity": b"Infinity",
    "minus_infinity": b"-Infinity",
    "huge_integer": str(10**400).encode(),
    "deep_arrays": b"[" * DEPTH + b"]" * DEPTH,
}
TOP_LEVEL_VALUES = {"list": b"[]", "string": b'"text"', "number": b"1", "null": b"null", "boolean": b"true"}
# Put in place of a nested string or number of a valid body, to reach code past the top-level fields.
NESTED_STRING_VALUES = {"lone_surrogate": RAW_VALUES["lone_surrogate"]}
NESTED_NUMBER_VALUES = {key: RAW_VALUES[key] for key in ("nan", "infinity", "huge_integer")}
LEAF_MARKER = "\x00leaf\x00"
WRONG_VALUES = {
    "int": 12345,
    "str": "text",
    "list": [1, 2],
    "object": {"nested": True},
    "bool": True,
    "null": None,
}
OTHER_METHODS = {"GET": ["POST", "DELETE"], "POST": ["GET", "PUT"]}
MAX_SHOWN_BYTES = 300


@dataclass(frozen=True)
class Probe:
    """One malformed request; `label` names the kind of damage in the statistics and failures."""

    label: str
    method: str
    path: str
    body: bytes | None
    content_type: str | None = JSON


@dataclass(frozen=True)
class Problem:
    probe: Probe
    outcome: str

    def describe(self) -> str:
        body = b"" if self.probe.body is None else self.probe.body[:MAX_SHOWN_BYTES]
        return f"{self.probe.method} {self.probe.path} [{self.probe.label}] body={body!r} -> {self.outcome}"


def with_member(body: Any, raw_key: bytes, raw_value: bytes) -> bytes:
    """`body` (an object) encoded with one more member given as raw JSON text, which may be text no JSON
    encoder writes (NaN, a lone surrogate); a non-object body is replaced by the one-member object."""
    rest = (
        {key: value for key, value in body.items() if orjson.dumps(key) != raw_key}
        if isinstance(body, dict)
        else {}
    )
    head = orjson.dumps(rest)[:-1] + (b"," if rest else b"")
    return head + raw_key + b":" + raw_value + b"}"


def nested_leaves(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """(path, value) of the strings and numbers below the top-level fields of `value`, looking into the
    first item of each list only (the others have the same shape)."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from nested_leaves(child, (*path, key))
    elif isinstance(value, list) and value:
        yield from nested_leaves(value[0], (*path, 0))
    elif isinstance(value, str | int | float) and not isinstance(value, bool) and len(path) > 1:
        yield path, value


def with_leaf(value: Any, path: tuple[str | int, ...], raw: bytes) -> bytes:
    """`value` encoded with the leaf at `path` replaced by raw JSON text."""

    def replaced(node: Any, rest: tuple[str | int, ...]) -> Any:
        if not rest:
            return LEAF_MARKER
        copy = dict(node) if isinstance(node, dict) else list(node)
        copy[rest[0]] = replaced(node[rest[0]], rest[1:])
        return copy

    return orjson.dumps(replaced(value, path)).replace(orjson.dumps(LEAF_MARKER), raw)


def fields_to_damage(server: Server, route: Route) -> tuple[list[str], list[str]]:
    """(required fields, fields to damage): the required ones, or every declared one when none is."""
    if route.body_schema is None:
        return [], []
    schema = server.resolve(route.body_schema)
    schema = server.resolve((schema.get("anyOf") or [schema])[0])
    required = list(schema.get("required", []))
    return required, required or list(schema.get("properties", {}))


def route_probes(server: Server, route: Route) -> list[Probe]:
    """The corpus for one route, built around a body that should pass (see `Server.baseline`)."""
    base = server.baseline(route)
    encoded = orjson.dumps(base)

    def probe(
        label: str, body: bytes | None, content_type: str | None = JSON, path: str = route.path
    ) -> Probe:
        return Probe(label, route.method, path, body, content_type)

    probes = [
        probe("baseline", encoded),
        probe("invalid_json", b'{"input": '),
        probe("invalid_utf8", b'{"input": "\xff\xfe"}'),
        probe("empty_body", b""),
        probe("no_body_no_content_type", None, None),
        probe("text_plain", encoded, "text/plain"),
        probe("form_encoded", b"input=x&model=y", "application/x-www-form-urlencoded"),
        probe("unknown_query", encoded, path=f"{route.path}?unknown=1&%ff=%ed%a0%80&x=%00"),
        probe("extra_unknown_field", with_member(base, b'"unknown_field_x"', b'{"a": [1]}')),
        probe("lone_surrogate_key", with_member(base, b'"\\ud800"', b"1")),
        probe("deep_objects", b'{"a":' * DEPTH + b"1" + b"}" * DEPTH),
        *(probe(f"top_level_{name}", raw) for name, raw in {**TOP_LEVEL_VALUES, **RAW_VALUES}.items()),
        *(Probe("wrong_method", method, route.path, encoded) for method in OTHER_METHODS[route.method]),
    ]
    required, damaged = fields_to_damage(server, route)
    for name in damaged:
        key = orjson.dumps(name)
        if name in required and isinstance(base, dict):
            probes.append(
                probe(f"missing_{name}", orjson.dumps({k: v for k, v in base.items() if k != name}))
            )
        probes += [
            probe(f"{name}_{kind}", with_member(base, key, orjson.dumps(v)))
            for kind, v in WRONG_VALUES.items()
        ]
        probes += [probe(f"{name}_{kind}", with_member(base, key, raw)) for kind, raw in RAW_VALUES.items()]
    for path, leaf in nested_leaves(base):
        values = NESTED_STRING_VALUES if isinstance(leaf, str) else NESTED_NUMBER_VALUES
        label = ".".join(map(str, path))
        probes += [probe(f"{label}_{kind}", with_leaf(base, path, raw)) for kind, raw in values.items()]
    return probes


def server_probes() -> list[Probe]:
    """What every server gets once: paths and methods it does not serve, and paths that are not UTF-8."""
    return [
        Probe("unknown_path", "GET", "/no/such/route", None, None),
        Probe("unknown_path", "POST", "/no/such/route", b"{}"),
        Probe("surrogate_in_path", "GET", "/%ED%A0%80", None, None),
        Probe("invalid_utf8_path", "POST", "/%FF%FE", b"{}"),
        Probe("unknown_method", "PATCH", "/", b"{}"),
        Probe("unknown_method", "OPTIONS", "/", None, None),
    ]


def has_error_format(body: bytes) -> bool:
    """True when a 4xx body is FastAPI's `detail` (a validation list, or an HTTPException's text) or the
    `error` envelope of nemo_gym/http/errors.py."""
    try:
        parsed = json.loads(body)  # not orjson: an echoed 400-digit integer is still JSON
    except ValueError:
        return False
    if not isinstance(parsed, dict):
        return False
    error = parsed.get("error")
    envelope = isinstance(error, dict) and {"type", "status", "message"} <= error.keys()
    return envelope or isinstance(parsed.get("detail"), list | str)


def send(session: requests.Session, server: Server, probe: Probe) -> tuple[int | None, str | None]:
    """(status, what is wrong with the answer, or None)."""
    headers = {"Content-Type": probe.content_type} if probe.content_type else {}
    try:
        answer = session.request(
            probe.method, server.url + probe.path, data=probe.body, headers=headers, timeout=ANSWER_TIMEOUT_S
        )
    except requests.RequestException as error:
        return None, f"no answer: {type(error).__name__}: {error}"
    if answer.status_code >= 500:
        return answer.status_code, f"HTTP {answer.status_code} {answer.content[:MAX_SHOWN_BYTES]!r}"
    if answer.status_code >= 400 and not has_error_format(answer.content):
        return (
            answer.status_code,
            f"HTTP {answer.status_code} without an error format: {answer.content[:200]!r}",
        )
    return answer.status_code, None


def send_all(session: requests.Session, server: Server, probes: list[Probe], tally: Tally) -> list[Problem]:
    problems = []
    for probe in probes:
        status, outcome = send(session, server, probe)
        tally.add(server.name, probe.label, status)
        if outcome is not None:
            problems.append(Problem(probe, outcome))
    return problems


def run_probes(server: Server, tally: Tally) -> list[Problem]:
    """The server-wide probes, then each route's corpus on a freshly seeded session."""
    with requests.Session() as session:
        problems = send_all(session, server, server_probes(), tally)
        for route in server.routes():
            server.seed(session)
            problems += send_all(session, server, route_probes(server, route), tally)
    return problems


def shipped_implementations() -> set[tuple[str, str]]:
    kinds = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")
    return {(kind, app.parent.name) for kind in kinds for app in (REPO_ROOT / kind).glob("*/app.py")}


def test_every_shipped_server_is_in_the_deployment(every_server: dict[str, Server]) -> None:
    instances = requests.get(f"{every_server[HEAD].url}/server_instances", timeout=ANSWER_TIMEOUT_S).json()
    assert {(entry["server_type"], entry["name"]) for entry in instances} == shipped_implementations()
    assert sorted(every_server) == sorted(SERVER_NAMES)


@pytest.mark.parametrize("name", SERVER_NAMES)
def test_no_malformed_request_gets_a_5xx(name: str, every_server: dict[str, Server], tally: Tally) -> None:
    server = every_server[name]
    problems = run_probes(server, tally)
    alive = requests.get(f"{server.url}/", timeout=ANSWER_TIMEOUT_S)
    assert alive.status_code == 200, f"{name} is not alive after the corpus"
    assert not problems, f"{len(problems)} bad answer(s) from {name}:\n" + "\n".join(
        problem.describe() for problem in problems
    )
