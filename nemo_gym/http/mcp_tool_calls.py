"""Calling a tool an agent session was granted over MCP (`MCPToolAccess`), with the official `mcp` client.

Each call is one short MCP session (initialize, call) against a stateless server, within the caller's
deadline. What comes back is what the model reads as the tool's output: the structured result as JSON, or
the text parts; a tool error comes back as its text too, like a failed HTTP tool call.
"""

from __future__ import annotations

import orjson

from nemo_gym.http.client import default_retry_policy
from nemo_gym.http.deadlines import bounded
from nemo_gym.wire.sessions import MCPToolAccess


async def call_mcp_tool(grant: MCPToolAccess, name: str, arguments: dict) -> str:
    """The output of tool `name` called with `arguments` at the grant's MCP endpoint."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    timeout_s = bounded(default_retry_policy().deadline_s)
    connection = grant.connection
    async with (
        httpx.AsyncClient(headers=connection.headers, timeout=timeout_s, trust_env=False) as http,
        streamable_http_client(str(connection.url), http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool(name, arguments)
    if result.structuredContent is not None and not result.isError:
        return orjson.dumps(result.structuredContent).decode()
    return "\n".join(getattr(part, "text", "") for part in result.content)
