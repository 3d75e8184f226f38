"""A scripted OpenAI-compatible upstream LLM server: the one test double of the project.

Run as `python tests/scripted_upstream.py`. It binds 127.0.0.1 on an OS-chosen port and writes
{"host", "port", "pid"} atomically to the file named by NEMO_GYM_BOUND_ADDRESS_FILE, like Gym servers
(or prints it, when that variable is not set).

Answers are scripted per model name (the request body's `model`), so concurrent tests that each use
their own model name never see each other's steps. Model routes:

    POST /v1/responses          Responses API
    POST /v1/chat/completions   Chat Completions API
    POST /tokenize              vLLM-style tokenizer (deterministic, one token per whitespace word)
    GET  /v1/models             every model name that has been scripted or called

Control routes (JSON):

    POST   /_script/{model}     {"steps": [step, ...]} appends steps to the model's queue
    DELETE /_script/{model}     drops the model's queued steps and rules
    GET    /_requests/{model}   [{"path", "headers", "body"}, ...] every request received, in order
    POST   /_reset              forgets every script and every recorded request
    GET    /_gates/{name}       {"waiting": n, "open": bool}: requests held at the gate right now
    POST   /_gates/{name}       opens the gate: held requests go on, later ones pass straight through

A step is an object; every key is optional and at most one action key is allowed:

    action keys:
      "response": {...}       return this JSON body as-is with status 200
      "output": [items]       (/v1/responses) wrap the items into a complete Response object
      "message": {...}        (/v1/chat/completions) wrap the assistant message into a chat completion
      "status": int           answer this status with `body` (default an OpenAI-style error body)
      "hang": true            never answer (the handler is cancelled when the client goes away)
      "disconnect": true      close the connection without sending any HTTP response
      "malformed": true       answer 200, content-type application/json, with a body that is not JSON
    modifiers:
      "body": {...}           with "status": the JSON error body
      "retry_after": number   with "status": sent as the Retry-After header
      "usage": {...}          with "output"/"message": token counts (defaults 10 in, 5 out)
      "incomplete_details"    with "output": e.g. {"reason": "max_output_tokens"}; status "incomplete"
      "finish_reason": str    with "message": defaults to "tool_calls" or "stop"
      "repeat": n             serve this step n times before it is consumed (default 1)
      "match": str            a standing rule instead of a queued step: served, never consumed, to every
                              request whose JSON body contains this text (rules are tried first, in order)
      "delay_s": float        wait this long before acting
      "gate": str             wait until the named gate is opened (POST /_gates/{name}) before acting

A step without an action key (for example `{"delay_s": 1}`), or a request whose model has no queued
step, gets the default answer: an assistant message whose text is "ok".

This file imports nothing from nemo_gym (only the tests' local-service starter): it stands for a foreign
server.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import zlib
from collections import deque
from typing import Any

import orjson
from aiohttp import web

from tests.local_service import serve

RESPONSES_PATH = "/v1/responses"
CHAT_PATH = "/v1/chat/completions"
TOKENIZE_PATH = "/tokenize"

ACTION_KEYS = ("response", "output", "message", "status", "hang", "disconnect", "malformed")
MODIFIER_KEYS = (
    "body",
    "retry_after",
    "usage",
    "incomplete_details",
    "finish_reason",
    "repeat",
    "delay_s",
    "match",
    "gate",
)
DEFAULT_INPUT_TOKENS = 10
DEFAULT_OUTPUT_TOKENS = 5
HANG_S = 3600.0
VOCAB_SIZE = 50_000

logger = logging.getLogger("scripted_upstream")


class StepError(ValueError):
    """A step that cannot be scripted, or cannot answer the route it was taken by."""


class Upstream:
    """Per-model step queues and request logs. Everything runs on one event loop, so no locks."""

    def __init__(self) -> None:
        # Each queued step is [step, times it is still to be served].
        self.scripts: dict[str, deque[list[Any]]] = {}
        self.rules: dict[str, list[dict[str, Any]]] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.ids = itertools.count(1)
        self.gates: dict[str, asyncio.Event] = {}
        self.waiting: dict[str, int] = {}

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    async def pass_gate(self, name: str) -> None:
        """Hold the request until the gate opens, counted as waiting meanwhile (also if it is cancelled)."""
        self.waiting[name] = self.waiting.get(name, 0) + 1
        try:
            await self.gate(name).wait()
        finally:
            self.waiting[name] -= 1

    def next_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self.ids)}"

    def append(self, model: str, steps: list[dict[str, Any]]) -> None:
        self.rules.setdefault(model, []).extend(step for step in steps if "match" in step)
        queue = self.scripts.setdefault(model, deque())
        queue.extend([step, step.get("repeat", 1)] for step in steps if "match" not in step)

    def take(self, model: str, body_text: str) -> dict[str, Any]:
        """The first rule matching the body, else the model's next step (consumed once served `repeat`
        times), else {} for the default answer."""
        for rule in self.rules.get(model, ()):
            if rule["match"] in body_text:
                return rule
        queue = self.scripts.get(model)
        if not queue:
            return {}
        entry = queue[0]
        entry[1] -= 1
        if entry[1] <= 0:
            queue.popleft()
        return entry[0]

    def record(self, model: str, request: web.Request, body: Any) -> None:
        self.requests.setdefault(model, []).append(
            {
                "path": request.path,
                "headers": {str(k): v for k, v in request.headers.items()},
                "body": body,
                "received_at": time.time(),
            }
        )


def validate_step(step: Any) -> dict[str, Any]:
    if not isinstance(step, dict):
        raise StepError(f"a step must be an object, got {step!r}")
    unknown = set(step) - set(ACTION_KEYS) - set(MODIFIER_KEYS)
    if unknown:
        raise StepError(f"unknown step keys {sorted(unknown)}; allowed: {[*ACTION_KEYS, *MODIFIER_KEYS]}")
    actions = [key for key in ACTION_KEYS if key in step]
    if len(actions) > 1:
        raise StepError(f"a step takes at most one of {list(ACTION_KEYS)}, got {actions}")
    if ("body" in step or "retry_after" in step) and "status" not in step:
        raise StepError("'body' and 'retry_after' need 'status'")
    if "status" in step and not (isinstance(step["status"], int) and 100 <= step["status"] <= 599):
        raise StepError(f"'status' must be an HTTP status code, got {step['status']!r}")
    if "output" in step and not isinstance(step["output"], list):
        raise StepError("'output' must be a list of Responses output items")
    if "message" in step and not isinstance(step["message"], dict):
        raise StepError("'message' must be an assistant message object")
    if "response" in step and not isinstance(step["response"], dict | list):
        raise StepError("'response' must be a JSON object or array")
    if "match" in step and (not isinstance(step["match"], str) or "repeat" in step):
        raise StepError("'match' must be a string, and a rule is never consumed, so it takes no 'repeat'")
    repeat = step.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise StepError(f"'repeat' must be a positive integer, got {repeat!r}")
    if "gate" in step and not isinstance(step["gate"], str):
        raise StepError(f"'gate' must name a gate, got {step['gate']!r}")
    delay = step.get("delay_s", 0)
    if not isinstance(delay, int | float) or delay < 0:
        raise StepError(f"'delay_s' must be a non-negative number, got {delay!r}")
    return step


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json"
    )


def error_body(status: int, message: str, kind: str = "scripted") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": status}}


def responses_usage(step: dict[str, Any]) -> dict[str, Any]:
    usage = step.get("usage") or {}
    input_tokens = usage.get("input_tokens", DEFAULT_INPUT_TOKENS)
    output_tokens = usage.get("output_tokens", DEFAULT_OUTPUT_TOKENS)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": usage.get("input_tokens_details", {"cached_tokens": 0}),
        "output_tokens": output_tokens,
        "output_tokens_details": usage.get("output_tokens_details", {"reasoning_tokens": 0}),
        "total_tokens": usage.get("total_tokens", input_tokens + output_tokens),
    }


def chat_usage(step: dict[str, Any]) -> dict[str, Any]:
    usage = step.get("usage") or {}
    prompt_tokens = usage.get("prompt_tokens", DEFAULT_INPUT_TOKENS)
    completion_tokens = usage.get("completion_tokens", DEFAULT_OUTPUT_TOKENS)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": usage.get("total_tokens", prompt_tokens + completion_tokens),
    }


def given_or(body: dict[str, Any], key: str, default: Any) -> Any:
    """The request's setting echoed in the answer; an explicit null gets the default, as OpenAI does."""
    value = body.get(key)
    return default if value is None else value


def build_response(state: Upstream, body: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """A complete Responses API response around the step's output items (or the default message)."""
    output = step.get("output")
    if output is None:
        output = [
            {
                "id": state.next_id("msg"),
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ]
    incomplete = step.get("incomplete_details")
    return {
        "id": state.next_id("resp"),
        "object": "response",
        "created_at": int(time.time()),
        "model": body.get("model", ""),
        "status": "incomplete" if incomplete else "completed",
        "error": None,
        "incomplete_details": incomplete,
        "instructions": body.get("instructions"),
        "metadata": body.get("metadata") or {},
        "output": output,
        "parallel_tool_calls": given_or(body, "parallel_tool_calls", True),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "tool_choice": given_or(body, "tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "usage": responses_usage(step),
    }


def build_chat_completion(state: Upstream, body: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """A complete chat completion around the step's assistant message (or the default message)."""
    message = {"role": "assistant", "content": None, **step.get("message", {"content": "ok"})}
    finish_reason = step.get("finish_reason", "tool_calls" if message.get("tool_calls") else "stop")
    return {
        "id": f"chatcmpl-{next(state.ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": chat_usage(step),
    }


async def disconnect(request: web.Request) -> web.StreamResponse:
    """Drop the connection without a response. The handler is then cancelled (handler_cancellation)."""
    if request.transport is not None:
        request.transport.close()
    await asyncio.sleep(HANG_S)
    raise ConnectionResetError("scripted disconnect")


async def answer(state: Upstream, request: web.Request, body: dict[str, Any], step: dict[str, Any]):
    if "gate" in step:
        await state.pass_gate(step["gate"])
    if step.get("delay_s"):
        await asyncio.sleep(step["delay_s"])
    if step.get("hang"):
        await asyncio.sleep(HANG_S)
        return json_response(error_body(504, "scripted hang ended"), status=504)
    if step.get("disconnect"):
        return await disconnect(request)
    if step.get("malformed"):
        return web.Response(body=b'{"id": "resp_truncated", "output": [', content_type="application/json")
    if "status" in step:
        status = step["status"]
        headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else None
        payload = step["body"] if "body" in step else error_body(status, f"scripted {status}")
        return json_response(payload, status=status, headers=headers)
    if "response" in step:
        return json_response(step["response"])
    if request.path == RESPONSES_PATH:
        if "message" in step:
            raise StepError(f"a 'message' step cannot answer {RESPONSES_PATH}; use 'output'")
        return json_response(build_response(state, body, step))
    if "output" in step:
        raise StepError(f"an 'output' step cannot answer {CHAT_PATH}; use 'message'")
    return json_response(build_chat_completion(state, body, step))


async def read_json_object(request: web.Request) -> dict[str, Any] | None:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def make_model_handler(state: Upstream):
    async def handle(request: web.Request) -> web.StreamResponse:
        body = await read_json_object(request)
        if body is None:
            text = (await request.read()).decode("utf-8", errors="replace")
            state.record("", request, text)
            return json_response(error_body(400, "body must be a JSON object", "invalid_request_error"), 400)
        model = str(body.get("model", ""))
        state.record(model, request, body)
        step = state.take(model, (await request.text()))
        try:
            return await answer(state, request, body, step)
        except StepError as error:
            logger.error("bad step for model %r: %s", model, error)
            return json_response(error_body(500, f"scripted upstream: {error}", "script_error"), 500)

    return handle


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(word.encode()) % VOCAB_SIZE for word in text.split()]


def make_tokenize_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        body = await read_json_object(request)
        if body is None:
            return json_response(error_body(400, "body must be a JSON object", "invalid_request_error"), 400)
        state.record(str(body.get("model", "")), request, body)
        if "prompt" in body:
            text = str(body["prompt"])
        else:
            parts = []
            for message in body.get("messages") or []:
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, str):
                    parts.append(content)
                elif isinstance(content, list):
                    parts.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
            text = " ".join(parts)
        tokens = tokenize(text)
        return json_response({"count": len(tokens), "max_model_len": 32768, "tokens": tokens})

    return handle


def make_control_routes(state: Upstream) -> list[web.RouteDef]:
    async def append_steps(request: web.Request) -> web.Response:
        payload = await read_json_object(request)
        if payload is None or not isinstance(payload.get("steps"), list):
            return json_response(error_body(400, 'body must be {"steps": [...]}', "invalid_script"), 400)
        try:
            steps = [validate_step(step) for step in payload["steps"]]
        except StepError as error:
            return json_response(error_body(400, str(error), "invalid_script"), 400)
        model = request.match_info["model"]
        state.append(model, steps)
        return json_response({"model": model, "queued": len(state.scripts[model])})

    async def clear_steps(request: web.Request) -> web.Response:
        state.scripts.pop(request.match_info["model"], None)
        state.rules.pop(request.match_info["model"], None)
        return json_response({"cleared": True})

    async def recorded(request: web.Request) -> web.Response:
        return json_response(state.requests.get(request.match_info["model"], []))

    async def reset(request: web.Request) -> web.Response:
        state.scripts.clear()
        state.rules.clear()
        state.requests.clear()
        return json_response({"reset": True})

    async def gate_state(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return json_response({"waiting": state.waiting.get(name, 0), "open": state.gate(name).is_set()})

    async def open_gate(request: web.Request) -> web.Response:
        state.gate(request.match_info["name"]).set()
        return json_response({"open": True})

    return [
        web.get("/_gates/{name}", gate_state),
        web.post("/_gates/{name}", open_gate),
        web.post("/_script/{model:.+}", append_steps),
        web.delete("/_script/{model:.+}", clear_steps),
        web.get("/_requests/{model:.+}", recorded),
        web.post("/_reset", reset),
    ]


def make_models_handler(state: Upstream):
    async def handle(request: web.Request) -> web.Response:
        names = sorted(state.scripts.keys() | state.rules.keys() | state.requests.keys())
        return json_response({"object": "list", "data": [{"id": name, "object": "model"} for name in names]})

    return handle


def make_app() -> web.Application:
    state = Upstream()
    app = web.Application(client_max_size=64 * 1024 * 1024)
    model_handler = make_model_handler(state)
    app.router.add_post(RESPONSES_PATH, model_handler)
    app.router.add_post(CHAT_PATH, model_handler)
    app.router.add_post(TOKENIZE_PATH, make_tokenize_handler(state))
    app.router.add_get("/v1/models", make_models_handler(state))
    app.router.add_routes(make_control_routes(state))
    return app


def main() -> None:
    serve(make_app())


if __name__ == "__main__":
    main()
