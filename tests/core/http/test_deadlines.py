"""A call's remaining deadline travels down: collector or trainer -> agent -> model server -> upstream.

Real processes: the session-counter environment, openai_model in front of the scripted upstream, and
simple_agent with a generous rollout deadline of its own. The `X-Gym-Deadline-S` header goes only to Gym's
own servers: the tests check the upstream never receives it, and time what a caller with less time left
gets back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.http.deadlines import DEADLINE_HEADER, announced, budget, parse_header, remaining_s
from tests.helpers import counter_agent_stack
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

AGENT_DEADLINE_S = 60.0
CALLER_BUDGET_S = 3.0


@dataclass
class Stack:
    agent_url: str
    model: str
    upstream: ScriptedUpstream

    def deadline_headers_seen(self) -> list[str | None]:
        return [announced_to(entry) for entry in self.upstream.requests(self.model)]


def announced_to(entry: dict) -> str | None:
    """The deadline header a request the upstream recorded carried (header names in any case)."""
    return next(
        (value for name, value in entry["headers"].items() if name.lower() == DEADLINE_HEADER.lower()), None
    )


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    model = fresh_model("deadlines")
    workdir = tmp_path_factory.mktemp("deadlines")
    with counter_agent_stack(
        scripted_upstream.base_url, model, workdir, rollout_deadline_s=AGENT_DEADLINE_S
    ) as stack:
        yield Stack(stack.agent_url, model, scripted_upstream)


def row() -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "count"}]},
        "initial_count": 0,
        "expected_count": 0,
    }


async def run(stack: Stack, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    answer = await request("POST", stack.agent_url + "/run", json=row(), headers=headers or {})
    return answer.status, await get_response_json(answer)


async def test_the_upstream_never_receives_the_deadline_header(stack):
    """A third-party upstream (OpenAI, vLLM) is not a Gym server: the model server does not tell it."""
    stack.upstream.clear(stack.model)
    stack.upstream.script(stack.model, [{"output": [assistant_message("done")]}])
    status, body = await run(stack)
    assert status == 200, body
    assert stack.deadline_headers_seen() == [None]


async def test_only_a_call_to_a_gym_server_announces_its_deadline(scripted_upstream: ScriptedUpstream):
    """`_internal` (set where the URL came from a server instance name) is what makes a call announce."""
    model = fresh_model("announce")
    scripted_upstream.script(
        model, [{"output": [assistant_message("a")]}, {"output": [assistant_message("b")]}]
    )
    body = {"model": model, "input": "hi"}
    with budget(CALLER_BUDGET_S):
        for internal in (True, False):
            answer = await request(
                "POST", scripted_upstream.base_url + "/responses", json=body, _internal=internal
            )
            assert answer.status == 200, await answer.read()
    to_gym_server, to_upstream = [announced_to(entry) for entry in scripted_upstream.requests(model)]
    assert to_gym_server is not None and 0 < float(to_gym_server) <= CALLER_BUDGET_S
    assert to_upstream is None


async def test_a_caller_with_less_time_left_cuts_the_whole_rollout_short(stack):
    stack.upstream.clear(stack.model)
    stack.upstream.script(stack.model, [{"hang": True}])
    seen_before = len(stack.deadline_headers_seen())
    started = time.monotonic()
    status, body = await run(stack, {DEADLINE_HEADER: str(CALLER_BUDGET_S)})
    waited = time.monotonic() - started
    # The rollout's timer or the hung model call (whichever the event loop serves first) ends it.
    assert status == 504, body
    assert "deadline" in body["error"]["message"], body
    # Without the caller's budget the agent would have waited its own 60 s for the hanging upstream.
    assert waited < AGENT_DEADLINE_S / 4
    assert stack.deadline_headers_seen()[seen_before:] == [None]


async def test_a_meaningless_deadline_header_is_ignored(stack):
    stack.upstream.clear(stack.model)
    stack.upstream.script(stack.model, [{"output": [assistant_message("done")]}])
    status, body = await run(stack, {DEADLINE_HEADER: "soon"})
    assert status == 200, body


async def test_a_budget_never_extends_an_outer_one():
    assert remaining_s() is None
    with budget(5.0):
        with budget(50.0) as granted:
            assert granted <= 5.0
            assert remaining_s() <= 5.0
        await asyncio.sleep(0)
    assert remaining_s() is None


def test_the_announced_budget_is_rounded_up():
    assert announced(1.0001) == "1.001"
    assert announced(2.0) == "2.000"


@pytest.mark.parametrize(
    ("text", "seconds"), [("2.5", 2.5), ("0", 0.0), ("-1", None), ("nan", None), ("x", None)]
)
def test_parse_header(text, seconds):
    assert parse_header(text) == seconds
