"""`expose_tools_over_mcp`: a resources server's tool routes served over MCP at `/mcp`, driven with the
official `mcp` client (Streamable HTTP) against a real server process."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, function_call_item, message_item, response_with
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[2] / "fixtures" / "notes_resources_server.py"
INSTANCE = "notes_mcp"
COOKIE = f"NotesResourcesServer___{INSTANCE}"
TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
EPISODE = {"rollout_id": "mcp-1", "attempt": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(
        FIXTURE, INSTANCE, "notes", tmp_path_factory.mktemp(INSTANCE), expose_tools_over_mcp=True
    ) as started:
        yield started


async def typed_seed(server: StartedServer, session_id: str, **task_data: Any) -> dict:
    """The seed's answer, plus the session cookie it set under `_cookie`."""
    body = {"resources_session_id": session_id, "episode_id": EPISODE, "task_id": {"taskset": "notes", "task_id": "1"},
            "task_data": task_data}  # fmt: skip
    response = await request("POST", server.url + "/seed_session", json=body)
    assert response.status == 200
    return {**await get_response_json(response), "_cookie": response.cookies[COOKIE].value}


async def mcp_session_call(server: StartedServer, headers: dict[str, str], action: str, *args: Any) -> Any:
    async with (
        httpx.AsyncClient(headers=headers, trust_env=False, timeout=30) as http,
        streamable_http_client(server.url + "/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await getattr(session, action)(*args)


def text_of(result: Any) -> str:
    return " ".join(part.text for part in result.content)


async def test_a_typed_seed_says_where_the_tools_are_and_a_call_acts_in_that_session(
    server: StartedServer,
) -> None:
    session_id = "resources-session-mcp-typed"
    answer = await typed_seed(server, session_id)
    tools = answer["resources_tools"]
    assert (tools["server_name"], tools["url_path"], tools["transport"]) == (INSTANCE, "/mcp", "http")
    token_headers = tools["headers"]
    assert set(token_headers) == {TOKEN_HEADER}

    listed = await mcp_session_call(server, {}, "list_tools")
    names = {tool.name for tool in listed.tools}
    assert names == {"write_note", "read_note", "rollout_key"}  # no protocol route is a tool
    write_note = next(tool for tool in listed.tools if tool.name == "write_note")
    assert write_note.inputSchema["properties"] == {
        "text": {"default": "", "title": "Text", "type": "string"}
    }
    assert write_note.description == "Keep one note for this session."

    result = await mcp_session_call(server, token_headers, "call_tool", "write_note", {"text": "sunny"})
    assert not result.isError and result.structuredContent == {"text": "sunny"}
    # The same session over plain HTTP: the note written over MCP is there.
    reading = await request("POST", server.url + "/read_note", cookies={COOKIE: answer["_cookie"]})
    assert await get_response_json(reading) == {"text": "sunny"}


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, f"Missing {TOKEN_HEADER} for Gym MCP tool call."),
        ({TOKEN_HEADER: "eyJzaWQiOiJ4In0.forged"}, "Invalid Gym MCP session token."),
    ],
)
async def test_a_call_without_a_valid_token_is_refused(
    server: StartedServer, headers: dict, message: str
) -> None:
    result = await mcp_session_call(server, headers, "call_tool", "write_note", {"text": "x"})
    assert result.isError and message in text_of(result)


async def test_unknown_tools_and_bad_arguments_are_tool_errors(server: StartedServer) -> None:
    headers = (await typed_seed(server, "resources-session-mcp-errors"))["resources_tools"]["headers"]
    unknown = await mcp_session_call(server, headers, "call_tool", "verify", {})
    assert unknown.isError and "Unknown tool: 'verify'" in text_of(unknown)
    bad = await mcp_session_call(server, headers, "call_tool", "write_note", {"text": 5})
    assert bad.isError and "HTTP 422 from POST /write_note" in text_of(bad)


async def test_an_allow_list_narrows_the_listing_and_the_calls(server: StartedServer) -> None:
    seed = await typed_seed(server, "resources-session-mcp-narrow", allowed_tools=["read_note"])
    headers = seed["resources_tools"]["headers"]
    listed = await mcp_session_call(server, headers, "list_tools")
    assert [tool.name for tool in listed.tools] == ["read_note"]
    refused = await mcp_session_call(server, headers, "call_tool", "write_note", {"text": "x"})
    assert refused.isError and "not allowed" in text_of(refused)


async def test_a_row_seed_answer_carries_the_mcp_metadata(server: StartedServer) -> None:
    response = await request("POST", server.url + "/seed_session", json={"anything": 1})
    answer = await get_response_json(response)
    assert response.status == 200 and answer["mcp"]["server_name"] == INSTANCE
    headers = answer["mcp"]["headers"]
    written = await mcp_session_call(server, headers, "call_tool", "write_note", {"text": "row seed"})
    assert not written.isError
    cookie = response.cookies[COOKIE].value
    reading = await request("POST", server.url + "/read_note", cookies={COOKIE: cookie})
    assert await get_response_json(reading) == {"text": "row seed"}


async def test_verify_scores_mcp_named_calls_as_the_tools_and_echoes_the_emitted_names(
    server: StartedServer,
) -> None:
    emitted = f"mcp__{INSTANCE}__write_note"
    response = response_with(function_call_item(emitted, {"text": "x"}), message_item("done"))
    answer = await get_response_json(
        await request(
            "POST",
            server.url + "/verify",
            json={"responses_create_params": {"input": "hi"}, "response": response},
        )
    )
    assert answer["called_tools"] == ["write_note"]
    assert answer["response"]["output"][0]["name"] == emitted
