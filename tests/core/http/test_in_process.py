"""Calls to a co-hosted server's app without a socket answer as the same call over HTTP would."""

import asyncio

import pytest
from fastapi import FastAPI, Request, Response

from nemo_gym.http.client import DeadlineExceededError, RetryPolicy, response_cookies
from nemo_gym.http.deadlines import budget, remaining_s
from nemo_gym.http.in_process import call_in_process, host_in_process
from nemo_gym.server_utils import finalize_app, new_app


class OutsideTheEnvelope:
    """A middleware outside the error envelope that fails: what a broken session layer would do."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] == "/broken_outside":
            raise RuntimeError("the session layer broke")
        await self.app(scope, receive, send)


def hosted_app() -> FastAPI:
    app = new_app()

    @app.post("/echo")
    async def echo(request: Request) -> Response:
        body = await request.json()
        answer = Response(
            content=f'{{"got": {body["n"]}, "query": "{request.url.query}", '
            f'"cookie": "{request.cookies.get("c", "")}"}}',
            media_type="application/json",
        )
        answer.set_cookie("quoted", '{"k": 1, "v": 2}')
        return answer

    @app.post("/slow")
    async def slow() -> dict:
        await asyncio.sleep(5)
        return {}

    @app.get("/budget_left")
    async def budget_left() -> dict:
        return {"left_s": remaining_s()}

    @app.post("/own_timeout")
    async def own_timeout() -> dict:
        raise TimeoutError("the handler's own timeout")

    @app.post("/broken_outside")
    async def never_reached() -> dict:
        return {}

    finalize_app(app, "Hosted___test")
    app.add_middleware(OutsideTheEnvelope)
    return app


@pytest.fixture(scope="module", autouse=True)
def hosted() -> None:
    host_in_process("hosted_test", hosted_app(), "127.0.0.1", 1)


async def test_body_query_and_cookies_reach_the_app_and_set_cookies_come_back():
    answer = await call_in_process(
        "hosted_test", "POST", "/echo?a=1", json={"n": 7}, params={"b": "2"}, cookies={"c": "x y"}
    )
    assert answer.status == 200 and answer.ok
    assert await answer.json() == {"got": 7, "query": "a=1&b=2", "cookie": "x y"}
    assert response_cookies(answer)["quoted"] == '{"k": 1, "v": 2}'


async def test_an_error_escaping_the_app_is_its_500_not_an_exception_in_the_caller():
    """Starlette answers 500 before re-raising; over HTTP that answer is all the caller sees, so here too."""
    answer = await call_in_process("hosted_test", "POST", "/broken_outside", json={})
    assert answer.status == 500 and not answer.ok
    assert await answer.read() == b"Internal Server Error"


async def test_the_handlers_own_timeout_is_its_error_not_the_calls_deadline():
    answer = await call_in_process("hosted_test", "POST", "/own_timeout", json={})
    assert answer.status == 500 and "own timeout" in (await answer.json())["error"]["message"]


async def test_the_call_has_its_deadline():
    with pytest.raises(DeadlineExceededError):
        await call_in_process(
            "hosted_test", "POST", "/slow", json={}, retry_policy=RetryPolicy(deadline_s=0.2)
        )


async def test_the_callee_works_within_the_calls_deadline_as_over_http():
    """Over HTTP the callee learns the call's deadline from the header; in-process it gets the same budget."""
    answer = await call_in_process(
        "hosted_test", "GET", "/budget_left", retry_policy=RetryPolicy(deadline_s=30)
    )
    left_s = (await answer.json())["left_s"]
    assert left_s is not None and 0 < left_s <= 30


async def test_the_call_ends_at_the_callers_deadline_not_its_own():
    with budget(0.2), pytest.raises(DeadlineExceededError):
        await call_in_process(
            "hosted_test", "POST", "/slow", json={}, retry_policy=RetryPolicy(deadline_s=60)
        )
    assert remaining_s() is None
