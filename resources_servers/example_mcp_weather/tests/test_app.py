"""example_mcp_weather over real processes: the tool over MCP with the official `mcp` client (the token binds
a call to its session), grading in the session, and whole rollouts through the folder's own deployment
config (environment server granting the tools over MCP only, simple_agent, openai_model in front of the
scripted upstream)."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "example_mcp_weather"
AGENT = "example_mcp_weather_simple_agent"
ENVIRONMENT = "example_mcp_weather_environment_server"
COOKIE = f"ExampleMCPWeatherResourcesServer___{INSTANCE}"
TOKEN_HEADER = "X-NeMo-Gym-Session-Token"
CONFIG = yaml.safe_load((FOLDER / "configs" / f"{INSTANCE}.yaml").read_text())
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
PARIS = ROWS[0]
PARIS_SENTENCE = "The weather in Paris is sunny and 72 F."


def block(instance: str, port: int = 0, **changes: Any) -> dict:
    """The shipped config block of `instance`, bound to 127.0.0.1."""
    ((server_type, implementations),) = CONFIG[instance].items()
    ((implementation, inner),) = implementations.items()
    inner = {key: value for key, value in inner.items() if key != "datasets"}
    return {server_type: {implementation: {**inner, "host": "127.0.0.1", "port": port, **changes}}}


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every server of the folder's deployment, each a real process; the model is the scripted upstream."""
    workdir = tmp_path_factory.mktemp(INSTANCE)
    model = fresh_model("weather")
    config: dict[str, Any] = {
        "policy_model": {
            "responses_api_models": {
                "openai_model": {
                    "entrypoint": "app.py", "host": "127.0.0.1", "port": 0, "openai_base_url": scripted_upstream.base_url,
                    "openai_api_key": "sk-weather-test", "openai_model": model,
                }
            }
        }
    }  # fmt: skip
    started: dict[str, StartedServer] = {}
    with ExitStack() as servers:
        for name in (INSTANCE, "policy_model", AGENT, ENVIRONMENT):
            if name != "policy_model":
                config[name] = block(name)
            started[name] = servers.enter_context(run_instance(config, name, workdir))
            next(iter(next(iter(config[name].values())).values()))["port"] = started[name].port
        yield {"servers": started, "model": model, "upstream": scripted_upstream}


@pytest.fixture
def server(stack: dict) -> StartedServer:
    return stack["servers"][INSTANCE]


async def seed(server: StartedServer, row: dict = PARIS) -> tuple[dict, str]:
    """A row seed: its answer (with the MCP metadata) and the session cookie it set."""
    response = await request("POST", server.url + "/seed_session", json=row)
    assert response.status == 200
    return await get_response_json(response), response.cookies[COOKIE].value


async def mcp(server: StartedServer, headers: dict[str, str], action: str, *args: Any) -> Any:
    async with (
        httpx.AsyncClient(headers=headers, trust_env=False, timeout=30) as http,
        streamable_http_client(server.url + "/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await getattr(session, action)(*args)


async def verify(server: StartedServer, cookie: str | None, text: str, row: dict = PARIS) -> dict:
    body = {
        **row,
        "response": response_with(function_call_item("get_weather", {"city": "x"}), message_item(text)),
    }
    response = await request(
        "POST", server.url + "/verify", json=body, cookies={COOKIE: cookie} if cookie else None
    )
    assert response.status == 200
    return await get_response_json(response)


# --- the tool over MCP ----------------------------------------------------------------------------------


async def test_the_seed_says_where_the_tool_is_and_mcp_lists_it(server):
    answer, _ = await seed(server)
    assert (answer["mcp"]["server_name"], answer["mcp"]["url_path"], answer["mcp"]["transport"]) == (
        INSTANCE,
        "/mcp",
        "http",
    )
    assert set(answer["mcp"]["headers"]) == {TOKEN_HEADER}
    listed = await mcp(server, answer["mcp"]["headers"], "list_tools")
    (tool,) = listed.tools
    assert (tool.name, tool.description) == ("get_weather", "Get the weather report for a city.")
    assert tool.inputSchema["required"] == ["city"]


async def test_a_call_over_mcp_in_the_session_then_the_reported_weather_earns_1(server):
    answer, cookie = await seed(server)
    result = await mcp(server, answer["mcp"]["headers"], "call_tool", "get_weather", {"city": "paris"})
    assert not result.isError
    assert result.structuredContent == {"city": "paris", "weather": "The weather in paris is sunny and 72 F."}
    graded = await verify(server, cookie, f"Good news. {PARIS_SENTENCE}")
    assert (graded["reward"], graded["tool_call_seen"], graded["final_response_mentions_weather"]) == (
        1.0,
        True,
        True,
    )
    assert (graded["mask_sample"], graded["expected_weather"]) == (False, PARIS_SENTENCE)


async def test_the_right_answer_without_the_tool_in_this_session_earns_0(server):
    mine, my_cookie = await seed(server)
    other, _ = await seed(server)
    await mcp(
        server, other["mcp"]["headers"], "call_tool", "get_weather", {"city": "Paris"}
    )  # another rollout's call
    graded = await verify(server, my_cookie, PARIS_SENTENCE)
    assert (graded["reward"], graded["tool_call_seen"], graded["mask_sample"]) == (0.0, False, False)


@pytest.mark.parametrize(
    ("city", "text", "seen", "mentions"),
    [
        ("Lyon", PARIS_SENTENCE, False, True),  # the tool ran, for another city
        ("Paris", "It is nice out.", True, False),  # the report is not repeated
    ],
)
async def test_a_call_for_another_city_or_an_answer_without_the_report_earns_0(
    server, city, text, seen, mentions
):
    answer, cookie = await seed(server)
    await mcp(server, answer["mcp"]["headers"], "call_tool", "get_weather", {"city": city})
    graded = await verify(server, cookie, text)
    assert (graded["reward"], graded["tool_call_seen"], graded["final_response_mentions_weather"]) == (
        0.0,
        seen,
        mentions,
    )


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, f"Missing {TOKEN_HEADER}"),
        ({TOKEN_HEADER: "eyJzaWQiOiJ4In0.forged"}, "Invalid Gym MCP session token"),
    ],
)
async def test_a_call_without_a_valid_token_is_refused(server, headers, message):
    result = await mcp(server, headers, "call_tool", "get_weather", {"city": "Paris"})
    assert result.isError and message in " ".join(part.text for part in result.content)


async def test_bad_tool_arguments_are_a_422_over_mcp_and_over_http(server):
    answer, _ = await seed(server)
    result = await mcp(server, answer["mcp"]["headers"], "call_tool", "get_weather", {"town": "Paris"})
    assert result.isError and "HTTP 422 from POST /get_weather" in result.content[0].text
    status, body = await post_json(server.url + "/get_weather", {"city": ""})
    assert status == 422 and ["body", "city"] in [error["loc"] for error in body["detail"]]


async def test_a_rollout_whose_session_state_is_gone_is_masked_not_scored(server):
    graded = await verify(server, None, PARIS_SENTENCE)  # no session cookie: a session never seeded
    assert (graded["reward"], graded["mask_sample"], graded["failure_kind"]) == (0.0, True, "session_lost")
    assert "get_weather" in graded["failure_reason"]


async def test_verify_drops_the_session_state(server):
    answer, cookie = await seed(server)
    await mcp(server, answer["mcp"]["headers"], "call_tool", "get_weather", {"city": "Paris"})
    assert (await verify(server, cookie, PARIS_SENTENCE))["reward"] == 1.0
    assert (await verify(server, cookie, PARIS_SENTENCE))["mask_sample"] is True


@pytest.mark.parametrize(
    ("body", "location"),
    [({"verifier_metadata": {"expected_city": ""}}, ["body", "verifier_metadata", "expected_city"]),
     ({"verifier_metadata": "Paris"}, ["body", "verifier_metadata"])],
)  # fmt: skip
async def test_a_malformed_row_is_a_422_naming_the_field(server, body, location):
    status, answer = await post_json(server.url + "/seed_session", body)
    assert status == 422 and location in [error["loc"] for error in answer["detail"]]
    status, answer = await post_json(server.url + "/verify", {**PARIS, **body, "response": response_with()})
    assert status == 422 and location in [error["loc"] for error in answer["detail"]]


# --- whole rollouts through the deployment, tools over MCP ------------------------------------------------


async def test_a_rollout_calls_the_tool_over_mcp_in_its_own_session(stack):
    upstream, model = stack["upstream"], stack["model"]
    upstream.clear(model)
    upstream.script(
        model,
        [
            {
                "output": [function_call("get_weather", {"town": "Paris"})]
            },  # refused: only MCP words it this way
            {"output": [function_call("get_weather", {"city": "Paris"})]},
            {"output": [assistant_message(f"Here you go: {PARIS_SENTENCE}")]},
        ],
    )
    status, result = await post_json(
        stack["servers"][ENVIRONMENT].url + "/run", {**PARIS, "_ng_task_index": 0, "_ng_rollout_index": 0}
    )
    assert status == 200, result
    assert (result["reward"], result["tool_call_seen"], result["mask_sample"]) == (1.0, True, False), result
    outputs = [
        item["output"] for item in result["response"]["output"] if item["type"] == "function_call_output"
    ]
    assert outputs[0].startswith("HTTP 422 from POST /get_weather")  # the MCP endpoint's error wording
    assert orjson.loads(outputs[1]) == {"city": "Paris", "weather": PARIS_SENTENCE}


async def test_a_rollout_that_answers_without_the_tool_earns_0(stack):
    upstream, model = stack["upstream"], stack["model"]
    upstream.clear(model)
    upstream.script(model, [{"output": [assistant_message(PARIS_SENTENCE)]}])
    status, result = await post_json(
        stack["servers"][ENVIRONMENT].url + "/run", {**PARIS, "_ng_task_index": 0, "_ng_rollout_index": 0}
    )
    assert status == 200 and (result["reward"], result["tool_call_seen"]) == (0.0, False), result


@pytest.mark.parametrize(
    "rollout", ROLLOUTS, ids=lambda rollout: rollout["verifier_metadata"]["expected_city"]
)
async def test_recorded_rollouts_replay_over_mcp_to_their_tool_outputs_and_reward(server, rollout):
    answer, cookie = await seed(
        server, {key: value for key, value in rollout.items() if key == "verifier_metadata"}
    )
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for call in (item for item in output if item["type"] == "function_call"):
        result = await mcp(
            server, answer["mcp"]["headers"], "call_tool", call["name"], orjson.loads(call["arguments"])
        )
        got = result.content[0].text if result.isError else orjson.dumps(result.structuredContent).decode()
        assert got == recorded[call["call_id"]]
    response = await request("POST", server.url + "/verify", json=rollout, cookies={COOKIE: cookie})
    graded = await get_response_json(response)
    assert response.status == 200, graded
    assert graded["reward"] == rollout["reward"]


def test_config_serves_the_tool_over_mcp_and_grants_it_over_mcp_only():
    config, resources, _ = check_environment_config(FOLDER, INSTANCE, "agent")
    assert resources.expose_tools_over_mcp is True
    environment = config[ENVIRONMENT]["environment_servers"]["single_agent_turn_legacy"]
    assert environment["resources_tool_transports"] == ["mcp"]
    assert environment["agent_server"] == {"type": "responses_api_agents", "name": AGENT}
