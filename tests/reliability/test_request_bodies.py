"""Bodies that JSON allows but no handler can use get a 422 that names the reason, and a 422 is always
valid, short JSON, whatever it had to echo."""

from __future__ import annotations

import math
from collections.abc import Iterator

import orjson
import pytest
import requests

from nemo_gym.http.request_bodies import MAX_ECHOED_CHARS, displayable
from nemo_gym.testing import StartedServer, response_with, run_resources_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        "example_single_tool_call", tmp_path_factory.mktemp("bodies"), domain="agent"
    ) as started:
        yield started


def post_raw(server: StartedServer, body: bytes) -> requests.Response:
    return requests.post(
        server.url + "/verify", data=body, headers={"Content-Type": "application/json"}, timeout=30
    )


def decode_problem(answer: requests.Response) -> str:
    """The reason of a 422 for JSON that could not be used; the answer itself must be strict JSON."""
    assert answer.status_code == 422, answer.text
    (problem,) = orjson.loads(answer.content)["detail"]
    return problem["ctx"]["error"]


def test_a_lone_surrogate_is_refused_naming_the_field(server: StartedServer) -> None:
    body = b'{"responses_create_params": {"input": "\\ud800"}, "response": {}}'
    reason = decode_problem(post_raw(server, body))
    assert "['responses_create_params']['input']" in reason and "surrogate" in reason


def test_a_lone_surrogate_in_a_key_is_refused_too(server: StartedServer) -> None:
    reason = decode_problem(post_raw(server, b'{"responses_create_params": {"\\udc00x": 1}}'))
    assert "surrogate" in reason


def test_a_surrogate_pair_is_ordinary_text(server: StartedServer) -> None:
    body = b'{"responses_create_params": {"input": "\\ud83d\\ude00"}, "response": %s}' % orjson.dumps(
        response_with()
    )
    assert post_raw(server, body).status_code == 200


def test_bytes_that_are_not_utf8_are_refused(server: StartedServer) -> None:
    assert "UTF-8" in decode_problem(post_raw(server, b'{"responses_create_params": "\xff\xfe\xfd"}'))


def test_nan_and_infinity_in_an_invalid_body_are_echoed_as_strict_json(server: StartedServer) -> None:
    answer = post_raw(server, b'{"responses_create_params": {"input": [NaN, -Infinity]}, "response": 1}')
    assert answer.status_code == 422
    echoed = [problem.get("input") for problem in orjson.loads(answer.content)["detail"]]
    assert "NaN" in echoed and "-Infinity" in echoed


def test_an_integer_beyond_64_bits_is_refused_naming_the_field(server: StartedServer) -> None:
    reason = decode_problem(
        post_raw(server, b'{"responses_create_params": {"input": [1, 1%s]}}' % (b"0" * 400))
    )
    assert reason == "['responses_create_params']['input'][1] holds an integer beyond 64 bits"


@pytest.mark.parametrize("depth", [600, 10_000])
def test_deep_nesting_is_a_4xx(server: StartedServer, depth: int) -> None:
    nested = b"[" * depth + b"]" * depth
    for body in (nested, b'{"responses_create_params": {"input": "x", "metadata": %s}}' % nested):
        answer = post_raw(server, body)
        assert 400 <= answer.status_code < 500, answer.text[:300]
        assert len(answer.content) < 5_000


def test_a_large_invalid_body_gets_a_short_answer(server: StartedServer) -> None:
    body = orjson.dumps({"responses_create_params": {"input": ["x" * 1000] * 20_000}, "response": 3})
    answer = post_raw(server, body)
    assert answer.status_code == 422
    assert len(answer.content) < 50_000, f"{len(body)} bytes sent, {len(answer.content)} echoed"


def test_displayable_spends_its_budget_once_over_the_whole_value() -> None:
    shown = displayable({"a": ["y" * 10_000] * 1_000, "b": [[[[[]]]]]})
    assert len(orjson.dumps(shown)) < 4 * MAX_ECHOED_CHARS
    assert shown["a"][0].endswith("more characters)") and shown["a"][-1] == "... (999 more items)"
    assert displayable([math.nan, math.inf, -math.inf, "\ud800"]) == [
        "NaN",
        "Infinity",
        "-Infinity",
        "\\ud800",
    ]
