"""A resources server's tools over MCP (`expose_tools_over_mcp: true`, NeMo Gym 0.7).

Every typed POST route of the server except its own protocol routes becomes an MCP tool of the same name,
whose input schema is the route's body model. The endpoint is `/mcp`, Streamable HTTP in the official
`mcp` SDK's stateless mode with JSON answers. A seed answer carries where to find it and a session token
(header `X-NeMo-Gym-Session-Token`): listing tools needs none (a token narrows the list to its allow-list),
calling one needs a valid token, and the call runs in-process against the route with the token's session,
exactly as a direct HTTP call with the session cookie would.

Tokens are signed with the deployment's session secret (NeMo Gym signs them with the server's public
cookie name, so anyone could forge one); to a client they are opaque either way.

The `mcp` SDK is imported only when a server opts in.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import orjson
from fastapi import FastAPI
from fastapi.routing import APIRoute
from itsdangerous import BadSignature, URLSafeSerializer
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym.http.in_process import call_app
from nemo_gym.http.sessions import SESSION_ID_KEY, SignedSessionMiddleware
from nemo_gym.wire.sessions import MCPServerMetadata

MCP_PATH = "/mcp"
SESSION_TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
TOKEN_SALT = "nemo-gym-mcp-session-token"
RESERVED_TOOL_NAMES = frozenset({"verify", "seed_session", "close_session", "aggregate_metrics", "mcp"})
MAX_ERROR_DETAIL_CHARS = 2000
EMPTY_OBJECT_SCHEMA = {"type": "object", "properties": {}}
# Far deeper than any JSON-RPC message with tool arguments; deeper bodies are refused before the SDK parses them.
MAX_MESSAGE_DEPTH = 64


class ToolAccessError(Exception):
    """A call the token does not allow; the SDK answers it as a tool result with `isError: true`."""


def harvested_tools(app: FastAPI) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (description, input schema) of every typed `POST /<name>` route that is not reserved."""
    tools: dict[str, tuple[str, dict[str, Any]]] = {}
    for route in app.router.routes:
        if not isinstance(route, APIRoute) or "POST" not in route.methods or route.param_convertors:
            continue
        name = route.path.strip("/")
        if not name or "/" in name or name in RESERVED_TOOL_NAMES:
            continue
        tools[name] = ((route.endpoint.__doc__ or "").strip(), _input_schema(route))
    return tools


def _input_schema(route: APIRoute) -> dict[str, Any]:
    body = route.dependant.body_params
    if not body:
        return EMPTY_OBJECT_SCHEMA
    annotation = body[0].field_info.annotation
    schema_of = getattr(annotation, "model_json_schema", None)
    return schema_of() if schema_of else EMPTY_OBJECT_SCHEMA


class SessionTokens:
    """Signed `{sid, tools}` tokens: which session a caller acts in, and which tools it may call."""

    def __init__(self, secret: str) -> None:
        self._serializer = URLSafeSerializer(secret, salt=TOKEN_SALT)

    def issue(self, session_id: str, allowed_tools: Iterable[str] | None) -> str:
        return self._serializer.dumps(
            {"sid": session_id, "tools": None if allowed_tools is None else list(allowed_tools)}
        )

    def read(self, token: str) -> tuple[str, set[str] | None]:
        try:
            payload = self._serializer.loads(token)
        except BadSignature as error:
            raise ToolAccessError("Invalid Gym MCP session token.") from error
        tools = payload.get("tools")
        return str(payload["sid"]), None if tools is None else set(tools)


class MCPExposure:
    """The `/mcp` endpoint of one resources server and the metadata its seeds hand out."""

    def __init__(self, app: FastAPI, server_name: str, cookie_name: str, secret: str) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        if any(getattr(route, "path", None) in (MCP_PATH, MCP_PATH + "/") for route in app.router.routes):
            raise ValueError(
                f"{server_name} already serves {MCP_PATH}; it cannot also expose its tools there"
            )
        self.server_name = server_name
        self.tokens = SessionTokens(secret)
        self._tools = harvested_tools(app)
        self._cookie_name = cookie_name
        self._signer = SignedSessionMiddleware(None, cookie_name, secret)  # type: ignore[arg-type]
        self._mcp = Server(server_name)
        self._mcp.list_tools()(self._list_tools)
        self._mcp.call_tool(validate_input=False)(self._call_tool)
        self._manager = StreamableHTTPSessionManager(
            self._mcp,
            json_response=True,
            stateless=True,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        endpoint = _Endpoint(self._manager)
        app.router.routes[0:0] = [Route(MCP_PATH, endpoint), Mount(MCP_PATH, app=endpoint)]
        app.router.lifespan_context = _with_manager(app.router.lifespan_context, self._manager)

    @property
    def tool_names(self) -> list[str]:
        return list(self._tools)

    def metadata(self, session_id: str, allowed_tools: Iterable[str] | None) -> MCPServerMetadata:
        """Where an agent of this session finds the tools, with the token it must send."""
        return MCPServerMetadata(
            server_name=self.server_name,
            url_path=MCP_PATH,
            transport="http",
            headers={SESSION_TOKEN_HEADER: self.tokens.issue(session_id, allowed_tools)},
        )

    # ---- MCP handlers -----------------------------------------------------------------------------------

    def _token(self, required: bool) -> tuple[str, set[str] | None] | None:
        request = self._mcp.request_context.request
        token = request.headers.get(SESSION_TOKEN_HEADER) if request is not None else None
        if not token:
            if required:
                raise ToolAccessError(f"Missing {SESSION_TOKEN_HEADER} for Gym MCP tool call.")
            return None
        return self.tokens.read(token)

    async def _list_tools(self) -> list[Any]:
        from mcp import types

        access = self._token(required=False)
        allowed = access[1] if access else None
        return [
            types.Tool(name=name, description=description or None, inputSchema=schema)
            for name, (description, schema) in self._tools.items()
            if allowed is None or name in allowed
        ]

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        from mcp import types

        session_id, allowed = self._token(required=True)
        if name not in self._tools:
            raise ToolAccessError(f"Unknown tool: {name!r}. Available tools: {sorted(self._tools)}")
        if allowed is not None and name not in allowed:
            raise ToolAccessError(f"Tool {name!r} is not allowed in this session. Allowed: {sorted(allowed)}")
        request = self._mcp.request_context.request
        server = request.scope.get("server") or ("127.0.0.1", 0)
        cookie = self._signer.sign({SESSION_ID_KEY: session_id})
        answer = await call_app(
            request.app, (server[0], server[1]), self.server_name, "POST", f"/{name}",
            json=arguments, cookies={self._cookie_name: cookie},
        )  # fmt: skip
        body = await answer.read()
        if not answer.ok:
            detail = body.decode("utf-8", errors="replace")[:MAX_ERROR_DETAIL_CHARS]
            raise ToolAccessError(f"HTTP {answer.status} from POST /{name}: {detail}")
        result = orjson.loads(body) if body else None
        if isinstance(result, dict):
            return result
        return [types.TextContent(type="text", text=body.decode("utf-8", errors="replace"))]


class _Endpoint:
    """The SDK's request handler as an ASGI app that Starlette routes call as one. A POST body that is not
    JSON a JSON-RPC message could be (unparseable, or nested deeper than any message) is answered here with
    JSON-RPC's parse error (HTTP 400): the SDK would answer some of them with a 500."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            # Stateless with JSON answers: no server-initiated stream to GET (it would stay open for good),
            # no session to DELETE.
            await _answer(send, 405, {"error": "POST JSON-RPC messages to /mcp"}, [(b"allow", b"POST")])
            return
        body = await _whole_body(receive)
        problem = _unusable_json(body)
        if problem is not None:
            parse_error = {"code": -32700, "message": f"Parse error: {problem}"}
            await _answer(send, 400, {"jsonrpc": "2.0", "id": None, "error": parse_error})
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._manager.handle_request(scope, replay, send)


async def _answer(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    start_headers = [(b"content-type", b"application/json"), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})


async def _whole_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if message["type"] != "http.request" or not message.get("more_body"):
            return b"".join(chunks)


def _unusable_json(body: bytes) -> str | None:
    """Why `body` cannot be a JSON-RPC message, or None."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        return str(error)
    depth, stack = 0, [(message, 1)]
    while stack:
        value, level = stack.pop()
        depth = max(depth, level)
        if depth > MAX_MESSAGE_DEPTH:
            return f"nested deeper than {MAX_MESSAGE_DEPTH} levels"
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, level + 1) for child in children)
    return None


def _with_manager(lifespan: Callable[[Any], Any], manager: Any) -> Callable[[Any], Any]:
    """The app's lifespan, with the SDK's session manager running inside it."""

    @contextlib.asynccontextmanager
    async def lifespan_with_manager(app: ASGIApp) -> AsyncIterator[Any]:
        async with lifespan(app) as state, manager.run():
            yield state

    return lifespan_with_manager
