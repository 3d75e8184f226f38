import base64
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time

import pytest
import yaml
from omegaconf import OmegaConf

from nemo_gym.config import deployment
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.global_config import reset_global_config_dict_cache, set_global_config_dict
from nemo_gym.http import client as http_client
from nemo_gym.http.client import get_response_json, request
from nemo_gym.http.protocol import RequestLimits
from nemo_gym.server_utils import (
    CHECK_CONFIG_ONLY_ENV_VAR_NAME,
    NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME,
    ServerClient,
)
from nemo_gym.serving import cpu_pool
from tests.fixtures.counter_resources_server import CounterResourcesServer
from tests.helpers import REPO_ROOT, StartedServer
from tests.shared_fixtures import COOKIE_NAME, FIXTURES, SECRET, closed_port, unique_key

VERIFY_BODY = {
    "responses_create_params": {"input": "hi"},
    "response": {
        "id": "resp_1",
        "created_at": 1.0,
        "model": "m",
        "object": "response",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    },
}


def signed_cookie(session_id: str, secret: str, issued_at: int | None = None) -> str:
    """A session cookie made the way the servers document it: payload.issued_at.HMAC-SHA256 over the
    cookie's name and the first two parts."""
    payload = base64.urlsafe_b64encode(json.dumps({"session_id": session_id}).encode()).rstrip(b"=")
    signed_part = payload + b"." + str(int(time.time()) if issued_at is None else issued_at).encode()
    signed = COOKIE_NAME.encode() + b"=" + signed_part  # the cookie's name is signed too
    signature = base64.urlsafe_b64encode(hmac.new(secret.encode(), signed, hashlib.sha256).digest())
    return (signed_part + b"." + signature.rstrip(b"=")).decode()


async def post(server: StartedServer, path: str, body: dict, cookie: str | None = None):
    cookies = {COOKIE_NAME: cookie} if cookie else None
    response = await request("POST", server.url + path, json=body, cookies=cookies)
    return response, await get_response_json(response)


async def test_liveness(counter_server):
    response = await request("GET", counter_server.url + "/")
    assert response.status == 200
    assert await get_response_json(response) == {"status": "ok"}


async def test_session_state_survives_across_calls_carrying_the_cookie(counter_server):
    response, body = await post(counter_server, "/seed_session", {"initial_count": 5})
    assert response.status == 200 and body == {}
    cookie = response.cookies[COOKIE_NAME]
    assert cookie["max-age"] == str(14 * 24 * 3600)
    _, first = await post(counter_server, "/increment", {}, cookie.value)
    _, second = await post(counter_server, "/increment", {"by": 2}, cookie.value)
    assert (first["count"], second["count"]) == (6, 8)
    assert first["session_id"] == second["session_id"]
    _, without_cookie = await post(counter_server, "/increment", {})
    assert without_cookie["count"] == 1 and without_cookie["session_id"] != first["session_id"]


async def test_cookie_signed_with_the_deployment_secret_is_accepted(counter_server):
    response, _ = await post(counter_server, "/seed_session", {"initial_count": 10})
    _, state = await post(counter_server, "/increment", {}, response.cookies[COOKIE_NAME].value)
    _, again = await post(counter_server, "/increment", {}, signed_cookie(state["session_id"], SECRET))
    assert again == {"session_id": state["session_id"], "count": 12}


@pytest.mark.parametrize("forger_secret", [COOKIE_NAME, "some-other-deployment"])
async def test_forged_or_foreign_cookie_is_a_new_session(counter_server, forger_secret):
    response, _ = await post(counter_server, "/seed_session", {"initial_count": 100})
    _, victim = await post(counter_server, "/increment", {}, response.cookies[COOKIE_NAME].value)
    _, attacker = await post(
        counter_server, "/increment", {}, signed_cookie(victim["session_id"], forger_secret)
    )
    assert attacker["session_id"] != victim["session_id"]
    assert attacker["count"] == 1


async def test_tampered_payload_with_original_signature_is_a_new_session(counter_server):
    response, _ = await post(counter_server, "/seed_session", {"initial_count": 100})
    genuine = response.cookies[COOKIE_NAME].value
    _, victim = await post(counter_server, "/increment", {}, genuine)
    _, signature_parts = genuine.split(".", 1)
    forged = base64.urlsafe_b64encode(json.dumps({"session_id": victim["session_id"] + "x"}).encode())
    _, attacker = await post(
        counter_server, "/increment", {}, f"{forged.decode().rstrip('=')}.{signature_parts}"
    )
    assert attacker["count"] == 1 and attacker["session_id"] != victim["session_id"] + "x"


async def test_expired_cookie_is_a_new_session(counter_server):
    response, _ = await post(counter_server, "/seed_session", {"initial_count": 100})
    _, victim = await post(counter_server, "/increment", {}, response.cookies[COOKIE_NAME].value)
    fifteen_days_ago = int(time.time()) - 15 * 24 * 3600
    _, late = await post(
        counter_server, "/increment", {}, signed_cookie(victim["session_id"], SECRET, fifteen_days_ago)
    )
    assert late["session_id"] != victim["session_id"] and late["count"] == 1


async def test_bad_body_gets_422_with_field_locations(counter_server):
    response, body = await post(counter_server, "/verify", {"responses_create_params": {"input": "hi"}})
    assert response.status == 422
    assert ["body", "response"] in [error["loc"] for error in body["detail"]]
    assert COOKIE_NAME in response.cookies

    response, body = await post(counter_server, "/increment", {"by": "lots"})
    assert response.status == 422
    assert body["detail"][0]["loc"] == ["body", "by"]


async def test_malformed_json_body_gets_422_naming_the_position(counter_server):
    response = await request(
        "POST",
        counter_server.url + "/increment",
        data=b'{"by": 1,',
        headers={"Content-Type": "application/json"},
    )
    body = await get_response_json(response)
    assert response.status == 422
    assert body["detail"][0]["type"] == "json_invalid"
    assert body["detail"][0]["loc"][0] == "body"


async def test_a_body_only_python_json_reads_is_accepted(counter_server):
    """NaN and -Infinity (a -inf logprob, say) are not JSON to orjson, but Python writes them."""
    raw = json.dumps({**VERIFY_BODY, "responses_create_params": {"input": "hi", "temperature": float("nan")}})
    assert "NaN" in raw
    response = await request(
        "POST",
        counter_server.url + "/verify",
        data=raw.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 200, await response.read()


async def test_unknown_key_in_responses_create_params_is_named(counter_server):
    bad = {**VERIFY_BODY, "responses_create_params": {"input": "hi", "top_k": 5}}
    response, body = await post(counter_server, "/verify", bad)
    assert response.status == 422
    assert ["body", "responses_create_params", "top_k"] in [error["loc"] for error in body["detail"]]


async def test_verify_reads_session_state(counter_server):
    response, _ = await post(counter_server, "/seed_session", {"initial_count": 3})
    response, body = await post(counter_server, "/verify", VERIFY_BODY, response.cookies[COOKIE_NAME].value)
    assert response.status == 200
    assert body["reward"] == 3.0
    assert body["response"]["id"] == "resp_1"


async def test_inner_server_error_keeps_its_status_and_structured_cause(counter_server):
    key = unique_key()
    response, body = await post(
        counter_server, "/relay", {"server_name": "fake_upstream", "url_path": f"/s/{key}/400/9/"}
    )
    assert response.status == 400
    assert body["error"]["status"] == 400
    assert body["error"]["type"] == "inner_server_error"
    assert body["error"]["server"] == COOKIE_NAME
    assert body["error"]["cause"] == {"message": "scripted 400", "code": 400}


async def test_unreachable_inner_server_is_a_502_naming_the_url(counter_server):
    response, body = await post(counter_server, "/relay", {"server_name": "dead_upstream", "url_path": "/x"})
    assert response.status == 502
    assert body["error"]["type"] == "connection"
    assert "/x" in body["error"]["message"]


async def test_relay_through_the_deployment_succeeds(counter_server):
    key = unique_key()
    response, body = await post(
        counter_server, "/relay", {"server_name": "fake_upstream", "url_path": f"/s/{key}/200/0/"}
    )
    assert response.status == 200 and body == {"attempts": 1}


async def test_head_server_serves_masked_config_and_instances(head_server):
    response = await request("GET", head_server.url + "/")
    assert await get_response_json(response) == {"status": "ok"}
    config_yaml = await get_response_json(await request("GET", head_server.url + "/global_config_dict_yaml"))
    assert isinstance(config_yaml, str)
    assert "sk-very-secret" not in config_yaml
    assert yaml.safe_load(config_yaml)["policy_api_key"] == "****"
    instances = await get_response_json(await request("GET", head_server.url + "/server_instances"))
    assert instances[0]["process_name"] == "counter"


def test_server_client_resolves_instances_from_the_head_server(head_server, flaky_server):
    client = ServerClient.load_from_global_config(
        BaseServerConfig(host=head_server.host, port=head_server.port)
    )
    assert client.server_base_url("fake_upstream") == f"http://127.0.0.1:{flaky_server.port}"
    with pytest.raises(ValueError, match="No server instance named 'nope'"):
        client.server_base_url("nope")


def test_server_client_names_an_unreachable_head_server():
    port = closed_port()
    with pytest.raises(ValueError, match=f"127.0.0.1:{port}"):
        ServerClient.load_from_global_config(BaseServerConfig(host="127.0.0.1", port=port))


def counter_config(port: int, **top_level) -> dict:
    inner = {"entrypoint": "app.py", "host": "127.0.0.1", "port": port, "domain": "other"}
    return {"counter": {"resources_servers": {"counter": inner}}, **top_level}


def start_counter_server(
    tmp_path, config: dict | None, instance: str = "counter"
) -> subprocess.CompletedProcess:
    config_file = tmp_path / "config.yaml"
    if config is not None:
        config_file.write_text(yaml.safe_dump(config))
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_FILE": str(config_file),
        "NEMO_GYM_CONFIG_PATH": instance,
        "PYTHONPATH": str(REPO_ROOT),
    }
    return subprocess.run(
        [sys.executable, str(FIXTURES / "counter_resources_server.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("port taken", "cannot listen on 127.0.0.1:"),
        ("missing config file", "does not exist"),
        ("unknown instance", "No server instance named 'countr'"),
        ("bad http setting", "'global_http_max_attempts'"),
        ("bad port", "port"),
    ],
)
def test_a_server_that_cannot_start_exits_with_one_line(tmp_path, flaky_server, case, expected):
    config, instance = counter_config(closed_port()), "counter"
    if case == "port taken":
        config = counter_config(flaky_server.port)
    elif case == "missing config file":
        config = None
    elif case == "unknown instance":
        instance = "countr"
    elif case == "bad http setting":
        config = counter_config(closed_port(), global_http_max_attempts="many")
    elif case == "bad port":
        config = counter_config("high")
    result = start_counter_server(tmp_path, config, instance)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("Error: ") and expected in last_line


@pytest.mark.parametrize("path", ["/health", "/healthz", "/livez", "/readyz"])
async def test_every_server_answers_the_health_routes_as_soon_as_it_serves(counter_server, path):
    response = await request("GET", counter_server.url + path)
    assert (response.status, await get_response_json(response)) == (200, {"status": "ok"})


async def test_the_head_server_is_live_at_once_and_ready_only_when_the_launcher_says_so(head_server):
    """This head server runs without a launcher, so it never becomes ready."""
    live = await request("GET", head_server.url + "/livez")
    assert (live.status, await get_response_json(live)) == (200, {"status": "ok"})
    for path in ("/readyz", "/healthz", "/health"):
        response = await request("GET", head_server.url + path)
        assert (response.status, await get_response_json(response)) == (503, {"status": "starting"})


async def test_a_resources_server_answers_reverify_mode_and_close_session(counter_server):
    response = await request("GET", counter_server.url + "/reverify_mode")
    assert (response.status, await get_response_json(response)) == (200, "unknown")
    close = {"resources_session_id": "resources-session-1", "episode_id": {"rollout_id": "r1", "attempt": 0}}
    response, body = await post(counter_server, "/close_session", close)
    assert (response.status, body) == (200, {"resources_session_id": "resources-session-1"})
    response, body = await post(counter_server, "/close_session", {"resources_session_id": "x"})
    assert response.status == 422 and ["body", "episode_id"] in [error["loc"] for error in body["detail"]]


def test_a_server_start_reads_the_deployment_settings_once(monkeypatch, tmp_path):
    """In process, up to the point a server would serve (`NEMO_GYM_CHECK_CONFIG_ONLY`): the settings are
    read from the raw config and checked once, and that one object is what the start passes down (pool,
    request limits, head server address), so no part re-reads or re-checks them."""
    reads = []
    real_read = deployment._validated_settings

    def counted(given_json):
        reads.append(real_read(given_json))
        return reads[-1]

    monkeypatch.setattr(deployment, "_validated_settings", counted)
    limits = []
    monkeypatch.setattr(RequestLimits, "of", classmethod(lambda cls, knobs: limits.append(knobs) or "limits"))
    # What the start sets for its process, put back afterwards: the pool and the CPU pool's backend.
    monkeypatch.setattr(http_client, "_state", http_client._ClientState())
    monkeypatch.setattr(cpu_pool, "_backend", cpu_pool._backend)
    monkeypatch.setattr(cpu_pool, "_cluster_config", cpu_pool._cluster_config)
    monkeypatch.setenv(NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME, "counter")
    monkeypatch.setenv(CHECK_CONFIG_ONLY_ENV_VAR_NAME, "1")
    monkeypatch.chdir(tmp_path)
    config = {
        "counter": {
            "resources_servers": {
                "counter": {
                    "entrypoint": "app.py",
                    "domain": "other",
                    "host": "127.0.0.1",
                    "port": closed_port(),
                }
            }
        },
        "head_server": {"host": "127.0.0.1", "port": closed_port()},
        "global_http_max_attempts": 7,
        "global_max_request_body_mb": 3,
    }
    set_global_config_dict(global_config_dict=OmegaConf.create(config))
    try:
        with pytest.raises(SystemExit) as exited:
            CounterResourcesServer.run_webserver()
    finally:
        reset_global_config_dict_cache()
    assert exited.value.code == 0
    assert len(reads) == 1, f"the deployment settings were read {len(reads)} times in one server start"
    assert limits == [reads[0].knobs], "the request limits come from the one settings object"
    assert http_client.default_retry_policy().max_attempts == 7
