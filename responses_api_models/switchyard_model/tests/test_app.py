"""switchyard_model against a local stand-in for a Switchyard routing proxy (tests/provider_gateways.py,
face `switchyard`: route names mapped to targets, the session header, /v1/stats) in front of the scripted
upstream: real server processes over HTTP, the official openai client as the caller."""

from __future__ import annotations

import time
from pathlib import Path

import aiohttp
import openai
import orjson

from responses_api_models.switchyard_model.app import SwitchyardModel
from tests.model_server_checks import (
    assert_key_stays_out_of_reprs,
    assert_weather_rollout,
    failed_start,
    model_config,
    post,
    run_gateway,
    run_model,
    run_weather_rollout,
    weather_steps,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

API_KEY = "sk-switchyard-0123456789abcdef"
ROUTE = "policy-route"


def routes_to(target: str) -> dict[str, str]:
    return {"GATEWAY_SWITCHYARD_ROUTES": orjson.dumps({ROUTE: target}).decode()}


def switchyard(proxy_url: str, **settings: object) -> dict:
    settings = {"switchyard_model": ROUTE, **settings}
    return model_config(
        "switchyard_model", switchyard_base_url=f"{proxy_url}/v1", switchyard_api_key=API_KEY, **settings
    )


async def stats(proxy_url: str) -> dict:
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{proxy_url}/v1/stats", timeout=aiohttp.ClientTimeout(total=10)) as answer:
            return await answer.json()


async def test_calls_ask_for_the_route_and_carry_the_rollout_as_session(
    tmp_path: Path, scripted_upstream: ScriptedUpstream
) -> None:
    target = fresh_model("switchyard")
    scripted_upstream.script(
        target, [{"output": [assistant_message("routed")]}, {"message": {"content": "routed chat"}}]
    )
    headers = {
        "default_headers": {"X-Team": "gym"},
        "session_id_headers": ["x-switchyard-session-id", "x-other"],
    }
    with run_gateway("switchyard", scripted_upstream, API_KEY, tmp_path, routes_to(target)) as proxy:
        with run_model(switchyard(proxy.url, **headers), tmp_path) as server:
            prefixed = f"{server.url}/ng-rollout/task3-r1/v1"
            async with openai.AsyncOpenAI(base_url=prefixed, api_key="unused", max_retries=0) as client:
                response = await client.responses.create(model="ignored", input="hi")
            async with openai.AsyncOpenAI(
                base_url=f"{server.url}/v1", api_key="unused", max_retries=0
            ) as client:
                completion = await client.chat.completions.create(
                    model="ignored", messages=[{"role": "user", "content": "hi"}]
                )
        counted = await stats(proxy.url)

    # The target that served the call comes back on the answer, not the route.
    assert (response.model, response.output_text) == (target, "routed")
    assert completion.choices[0].message.content == "routed chat"
    within_rollout, outside = scripted_upstream.requests(target)
    assert (
        within_rollout["headers"]["x-switchyard-session-id"]
        == within_rollout["headers"]["x-other"]
        == "task3-r1"
    )
    assert "x-switchyard-session-id" not in outside["headers"]
    for call in (within_rollout, outside):
        assert call["headers"]["Authorization"] == f"Bearer {API_KEY}" and call["headers"]["X-Team"] == "gym"
    assert counted["by_target"] == {target: 2} and counted["by_session"] == {"task3-r1": 1}


async def test_forward_session_id_false_sends_no_session(tmp_path: Path, scripted_upstream) -> None:
    target = fresh_model("switchyard")
    with run_gateway("switchyard", scripted_upstream, API_KEY, tmp_path, routes_to(target)) as proxy:
        with run_model(switchyard(proxy.url, forward_session_id=False), tmp_path) as server:
            status, _ = await post(f"{server.url}/ng-rollout/task0-r0/v1/responses", {"input": "hi"})
    assert status == 200
    assert "x-switchyard-session-id" not in scripted_upstream.requests(target)[0]["headers"]


async def test_proxy_errors_keep_status_retry_after_and_hide_the_key(
    tmp_path: Path, scripted_upstream
) -> None:
    target = fresh_model("switchyard")
    echo = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}
    scripted_upstream.script(
        target,
        [
            {"status": 429, "retry_after": 0.6},
            {"output": [assistant_message("after the wait")]},
            {"status": 403, "body": echo},
        ],
    )
    with run_gateway("switchyard", scripted_upstream, API_KEY, tmp_path, routes_to(target)) as proxy:
        with run_model(switchyard(proxy.url), tmp_path) as server:
            started = time.monotonic()
            status, answer = await post(f"{server.url}/v1/responses", {"input": "hi"})
            waited = time.monotonic() - started
            echo_status, echoed = await post(f"{server.url}/v1/responses", {"input": "hi"})
            log = server.log()
        with run_model(switchyard(proxy.url, switchyard_model="no-such-route"), tmp_path) as server:
            unrouted_status, unrouted = await post(f"{server.url}/v1/responses", {"input": "hi"})

    assert status == 200 and answer["output"][0]["content"][0]["text"] == "after the wait"
    assert waited >= 0.6, "Retry-After was honoured"
    assert echo_status == 403 and API_KEY not in orjson.dumps(echoed).decode()
    assert API_KEY not in log
    assert (
        unrouted_status == 404 and "no route named 'no-such-route'" in unrouted["error"]["cause"]["message"]
    )


async def test_the_routing_condition_is_recorded_at_start_and_the_stats_at_stop(
    tmp_path: Path, scripted_upstream
) -> None:
    target = fresh_model("switchyard")
    folder = tmp_path / "condition"
    provenance = {"switchyard_commit": "abc123"}
    with run_gateway("switchyard", scripted_upstream, API_KEY, tmp_path, routes_to(target)) as proxy:
        settings = {"condition_dir": str(folder), "proxy_provenance": provenance}
        with run_model(switchyard(proxy.url, **settings), tmp_path) as server:
            condition = orjson.loads((folder / "switchyard-condition.json").read_bytes())
            status, _ = await post(f"{server.url}/ng-rollout/task1-r0/v1/responses", {"input": "hi"})
            assert not (folder / "switchyard-stats.json").exists()
        snapshot = orjson.loads((folder / "switchyard-stats.json").read_bytes())

    assert status == 200
    assert (condition["route"], condition["mode"], condition["proxy_root_url"]) == (
        ROUTE,
        "attached",
        proxy.url,
    )
    assert condition["proxy_provenance"] == provenance
    assert condition["session_id_headers"] == ["x-switchyard-session-id"]
    assert snapshot["scope"] == "proxy-lifetime aggregate"
    assert snapshot["stats"]["by_target"] == {target: 1} and snapshot["stats"]["by_session"] == {
        "task1-r0": 1
    }
    assert API_KEY not in (folder / "switchyard-condition.json").read_text()


def test_hosting_the_proxy_is_refused_in_one_line(tmp_path: Path) -> None:
    for settings, expected in (
        ({"deployment": "/etc/routes.toml"}, "start `switchyard-server --config <deployment> --port N`"),
        ({}, "switchyard_base_url is required"),
    ):
        output = failed_start(model_config("switchyard_model", switchyard_model=ROUTE, **settings), tmp_path)
        assert expected in output and len(output.strip().splitlines()) == 1, output


async def test_a_shipped_environment_rollout_runs_through_it(tmp_path: Path, scripted_upstream) -> None:
    target = fresh_model("switchyard")
    scripted_upstream.script(target, weather_steps("responses", "Cold in SF."))
    with run_gateway("switchyard", scripted_upstream, API_KEY, tmp_path, routes_to(target)) as proxy:
        config = switchyard(proxy.url)
        result = await run_weather_rollout(config, tmp_path)
    assert_weather_rollout(result, "SF", "Cold in SF.")


def test_the_key_stays_out_of_reprs() -> None:
    settings = {
        "switchyard_base_url": "http://127.0.0.1:1/v1",
        "switchyard_api_key": API_KEY,
        "switchyard_model": ROUTE,
    }
    assert_key_stays_out_of_reprs(SwitchyardModel, settings, API_KEY)
