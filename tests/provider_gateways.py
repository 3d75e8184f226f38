"""Local stand-ins for three hosted APIs, each in front of the scripted upstream (tests/scripted_upstream.py),
so a model server is tested against the provider's own routes, auth and error shapes while the answers stay
scripted per model name.

Run as `python tests/provider_gateways.py <face> <upstream base URL> <key>`; it binds 127.0.0.1 and reports
its address like tests/local_service.py. Faces:

    azure       POST /openai/deployments/{deployment}/chat/completions?api-version=...  (and /openai/v1/...)
                key in `api-key`; the deployment is the scripted model; Azure's error body
                {"error": {"code", "message"}}, 429 kept with its Retry-After
    litellm     POST /v1/responses, /v1/chat/completions (and without /v1), GET /health/readiness/details
                key as `Authorization: Bearer` or `x-litellm-key`; LiteLLM's error body
                {"error": {"message", "type", "param", "code"}}; the version reported is the
                GATEWAY_LITELLM_VERSION environment variable (default 1.83.0)
    switchyard  POST /v1/responses, /v1/chat/completions, GET /v1/stats; the body's `model` is a route,
                sent upstream as the target named in GATEWAY_SWITCHYARD_ROUTES (JSON {route: target});
                `x-switchyard-session-id` counted per session in /v1/stats

Every request the gateway passes on reaches the scripted upstream with the headers it came with, so a test
reads what the provider received from `scripted_upstream.requests(model)`.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from tests.local_service import serve

SUPPORTED_API_VERSIONS = frozenset({"2024-06-01", "2024-10-21", "2025-04-01-preview"})
FORWARD_TIMEOUT_S = 60.0
# Headers that describe one hop, not the request.
HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
SESSION_HEADER = "x-switchyard-session-id"


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json"
    )


class Gateway:
    def __init__(self, upstream: str, key: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.key = key
        self.session: aiohttp.ClientSession | None = None

    async def close(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def forward(
        self, request: web.Request, path: str, body: dict[str, Any]
    ) -> tuple[int, dict[str, str], Any]:
        """(status, headers worth keeping, parsed body) of the upstream's answer to `body` at `path`."""
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        headers = {name: value for name, value in request.headers.items() if name.lower() not in HOP_HEADERS}
        async with self.session.post(
            f"{self.upstream}{path}", data=orjson.dumps(body), headers=headers
        ) as answer:
            raw = await answer.read()
            kept = {"Retry-After": answer.headers["Retry-After"]} if "Retry-After" in answer.headers else {}
            try:
                return answer.status, kept, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return answer.status, kept, raw.decode("utf-8", errors="replace")


async def read_body(request: web.Request) -> dict[str, Any] | None:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def upstream_message(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        return str(payload["error"].get("message", ""))
    return str(payload)


# ---- Azure OpenAI ----------------------------------------------------------------------------------------


def azure_error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return json_response({"error": {"code": code, "message": message}}, status, headers)


def azure_app(gateway: Gateway) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        if request.headers.get("api-key") != gateway.key:
            return azure_error(
                401,
                "401",
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                "valid key for an active subscription and use a correct regional API endpoint for your resource.",
            )
        deployment = request.match_info.get("deployment")
        version = request.query.get("api-version")
        if deployment is not None and version is None:
            return azure_error(404, "404", "Resource not found")
        if version is not None and version not in SUPPORTED_API_VERSIONS:
            return azure_error(400, "BadRequest", f"API version not supported: {version}")
        body = await read_body(request)
        if body is None:
            return azure_error(400, "BadRequest", "the request body must be a JSON object")
        if deployment is not None:
            body["model"] = deployment
        status, headers, answer = await gateway.forward(request, "/v1/chat/completions", body)
        if status < 400:
            return json_response(answer, status)
        message = upstream_message(answer)
        if status == 429:
            wait = headers.get("Retry-After", "1")
            message = (
                f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version {version} have "
                f"exceeded token rate limit of your current pricing tier. Please retry after {wait} seconds."
            )
        return azure_error(status, str(status), message, headers)

    app = web.Application()
    app.router.add_post("/openai/deployments/{deployment}/chat/completions", chat)
    app.router.add_post("/openai/v1/chat/completions", chat)
    return app


# ---- LiteLLM proxy ---------------------------------------------------------------------------------------


def litellm_error(
    status: int, message: str, kind: str | None, headers: dict[str, str] | None = None
) -> web.Response:
    payload = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    return json_response(payload, status, headers)


def litellm_key(request: web.Request) -> str | None:
    bearer = request.headers.get("Authorization", "")
    return (
        bearer.removeprefix("Bearer ")
        if bearer.startswith("Bearer ")
        else request.headers.get("x-litellm-key")
    )


def litellm_app(gateway: Gateway) -> web.Application:
    version = os.environ.get("GATEWAY_LITELLM_VERSION", "1.83.0")

    def refused(request: web.Request) -> web.Response | None:
        key = litellm_key(request)
        if key == gateway.key:
            return None
        # The proxy names the key it refused; a model server must not pass that on.
        return litellm_error(
            401,
            f"Authentication Error, Invalid proxy server token passed. Received API Key = {key}",
            "auth_error",
        )

    async def readiness(request: web.Request) -> web.Response:
        return refused(request) or json_response(
            {"status": "healthy", "db": "connected", "cache": None, "litellm_version": version}
        )

    def model_route(path: str):
        async def handle(request: web.Request) -> web.Response:
            if (refusal := refused(request)) is not None:
                return refusal
            body = await read_body(request)
            if body is None:
                return litellm_error(400, "Invalid JSON body", "invalid_request_error")
            status, headers, answer = await gateway.forward(request, path, body)
            if status < 400:
                return json_response(answer, status)
            kind = "throttling_error" if status == 429 else None
            return litellm_error(status, f"litellm.APIError: {upstream_message(answer)}", kind, headers)

        return handle

    app = web.Application()
    app.router.add_get("/health/readiness/details", readiness)
    for suffix in ("/responses", "/chat/completions"):
        handler = model_route(f"/v1{suffix}")
        app.router.add_post(suffix, handler)
        app.router.add_post(f"/v1{suffix}", handler)
    return app


# ---- Switchyard routing proxy ----------------------------------------------------------------------------


def switchyard_app(gateway: Gateway) -> web.Application:
    routes: dict[str, str] = orjson.loads(os.environ.get("GATEWAY_SWITCHYARD_ROUTES", "{}"))
    by_target: Counter[str] = Counter()
    by_session: Counter[str] = Counter()

    def model_route(path: str):
        async def handle(request: web.Request) -> web.Response:
            body = await read_body(request)
            if body is None:
                return json_response(
                    {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}}, 400
                )
            target = routes.get(str(body.get("model")))
            if target is None:
                message = f"no route named {body.get('model')!r}; routes: {sorted(routes)}"
                return json_response({"error": {"message": message, "type": "invalid_request_error"}}, 404)
            by_target[target] += 1
            if SESSION_HEADER in request.headers:
                by_session[request.headers[SESSION_HEADER]] += 1
            status, headers, answer = await gateway.forward(request, path, {**body, "model": target})
            return json_response(answer, status, headers)

        return handle

    async def stats(request: web.Request) -> web.Response:
        return json_response(
            {"requests": sum(by_target.values()), "by_target": by_target, "by_session": by_session}
        )

    app = web.Application()
    app.router.add_post("/v1/responses", model_route("/v1/responses"))
    app.router.add_post("/v1/chat/completions", model_route("/v1/chat/completions"))
    app.router.add_get("/v1/stats", stats)
    return app


FACES = {"azure": azure_app, "litellm": litellm_app, "switchyard": switchyard_app}


def main() -> None:
    face, upstream, key = sys.argv[1:4]
    gateway = Gateway(upstream, key)
    app = FACES[face](gateway)
    app.on_cleanup.append(gateway.close)
    serve(app)


if __name__ == "__main__":
    main()
