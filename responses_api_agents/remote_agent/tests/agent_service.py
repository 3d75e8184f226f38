"""A user's agent service, as remote_agent's tests need one: a small real HTTP server on 127.0.0.1.

`POST /v1/responses` speaks the remote_agent contract the way a user's service would: it checks its API key,
asks its model (a Gym model server at MODEL_SERVER_URL) for the next step with the conversation it was sent,
runs its own tool `service_clock` itself (the call and its output go back as a pair) and returns the model's
Response, which may leave tool calls for Gym to run. It keeps a per-rollout cookie, as a service with state
would. Control routes let a test make the next calls fail:

    POST /_faults   {"faults": [fault, ...]}  each call takes the next fault before doing anything else:
                    {"status": n, "body": {...}, "retry_after": s}, {"hang": true}, {"disconnect": true},
                    {"answer": <any JSON>} (sent as is), {"text": "..."} (a 200 that is not JSON),
                    {"redirect": "<url>"} (a 307)
    GET  /_calls    every call received: {"headers", "cookies", "body"}
    POST /_reset    forgets faults and calls

Run as `python agent_service.py` with EXPECTED_API_KEY and MODEL_SERVER_URL set; it reports its address as
Gym servers do (tests/local_service.py).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections import deque
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tests.local_service import serve

OWN_TOOL = "service_clock"
SESSION_COOKIE = "service_session"
MODEL_CALL_TIMEOUT_S = 30.0

faults: deque[dict[str, Any]] = deque()
calls: list[dict[str, Any]] = []


async def responses(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    calls.append({"headers": dict(request.headers), "cookies": dict(request.cookies), "body": body})
    if faults:
        return await faulty(request, faults.popleft())
    if request.headers.get("Authorization") != f"Bearer {os.environ['EXPECTED_API_KEY']}":
        return web.json_response({"error": {"message": "bad API key"}}, status=401)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=MODEL_CALL_TIMEOUT_S)) as model:
        turn = await next_step(model, body)
        own_calls = [
            item
            for item in turn["output"]
            if item.get("type") == "function_call" and item["name"] == OWN_TOOL
        ]
        if own_calls:  # run its own tool, then let the model go on; the pair stays in the answer
            pairs = [
                *turn["output"],
                *(
                    {"type": "function_call_output", "call_id": call["call_id"], "output": "12:00"}
                    for call in own_calls
                ),
            ]
            turn = await next_step(model, {**body, "input": [*body["input"], *pairs]})
            turn["output"] = [*pairs, *turn["output"]]
    answer = web.json_response(turn)
    if SESSION_COOKIE not in request.cookies:
        answer.set_cookie(SESSION_COOKIE, uuid.uuid4().hex)
    return answer


async def next_step(model: aiohttp.ClientSession, body: dict[str, Any]) -> dict[str, Any]:
    async with model.post(f"{os.environ['MODEL_SERVER_URL']}/v1/responses", json=body) as answer:
        answer.raise_for_status()
        return await answer.json()


async def faulty(request: web.Request, fault: dict[str, Any]) -> web.StreamResponse:
    if fault.get("hang"):
        await asyncio.Event().wait()  # cancelled when the caller goes away
    if fault.get("disconnect"):
        assert request.transport is not None
        request.transport.close()
        return web.Response()
    if "answer" in fault:
        return web.Response(body=orjson.dumps(fault["answer"]), content_type="application/json")
    if "text" in fault:
        return web.Response(text=fault["text"], content_type="application/json")
    if "redirect" in fault:
        return web.Response(status=307, headers={"Location": fault["redirect"]})
    headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else {}
    return web.json_response(
        fault.get("body", {"error": "injected"}), status=fault["status"], headers=headers
    )


async def add_faults(request: web.Request) -> web.Response:
    faults.extend((await request.json())["faults"])
    return web.json_response({"queued": len(faults)})


async def list_calls(request: web.Request) -> web.Response:
    return web.json_response(calls)


async def reset(request: web.Request) -> web.Response:
    faults.clear()
    calls.clear()
    return web.json_response({})


def main() -> None:
    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    app.router.add_post("/_faults", add_faults)
    app.router.add_get("/_calls", list_calls)
    app.router.add_post("/_reset", reset)
    serve(app)


if __name__ == "__main__":
    main()
