"""nemo_gym.envkit.testing, the kit environment tests are written with: it starts a real server process and
always stops it, speaks to it as an agent would, builds what /verify takes, and checks a shipped folder."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nemo_gym.config.sources import install_root
from nemo_gym.envkit.testing import (
    VERIFY_FLAGS,
    check_environment_config,
    function_call_item,
    instance_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    run_server,
    session_id_in_cookie,
    shipped_instance,
    start_refusal,
    stop_process,
    without_verify_flags,
)
from nemo_gym.http.client import request
from nemo_gym.wire.responses import (
    NeMoGymResponse,
    NeMoGymResponseFunctionToolCall,
    NeMoGymResponseOutputMessage,
)
from tests.helpers import run_resources_fixture

INSTANCE = "example_single_tool_call"
FOLDER = install_root() / "resources_servers" / INSTANCE
COOKIE = f"SingleToolCallResourcesServer___{INSTANCE}"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


async def test_a_started_resources_server_answers_as_an_agent_sees_it_and_is_stopped_after(
    tmp_path: Path,
) -> None:
    with run_resources_server(INSTANCE, tmp_path, domain="agent") as server:
        assert server.host == "127.0.0.1" and server.url == f"http://127.0.0.1:{server.port}"
        body = {**ROWS[0], "response": response_with(message_item("cold"))}
        status, answer = await post_json(f"{server.url}/verify", body, require_cookie=COOKIE)
        assert (status, answer["reward"]) == (200, 1.0)
        assert without_verify_flags(answer)["response"]["output"][0]["content"][0]["text"] == "cold"
        with pytest.raises(AssertionError, match="every answer carries the session cookie"):
            await post_json(f"{server.url}/verify", body, require_cookie="no_such_cookie")
        process = server.process
    assert process.poll() is not None, "the server is stopped when the block ends"


async def test_the_session_id_is_read_from_a_servers_cookie(tmp_path: Path) -> None:
    """The counter fixture answers the session id its handler sees, to compare with the cookie's."""
    with run_resources_fixture(
        FIXTURES / "counter_resources_server.py", "counter", "counter", tmp_path
    ) as server:
        answer = await request("POST", f"{server.url}/increment", json={"by": 2})
        cookie = answer.cookies["CounterResourcesServer___counter"].value
        assert session_id_in_cookie(cookie) == (await answer.json())["session_id"]


def test_a_server_that_exits_before_binding_is_reported_with_its_output(tmp_path: Path) -> None:
    script = "import sys; print('no config here'); sys.exit(3)"
    with pytest.raises(RuntimeError, match="exited with 3 before binding:\nno config here"):
        with run_server(["-c", script], tmp_path):
            pytest.fail("a server that never bound was yielded")


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(300)"
    )
    process = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    stop_process(process, grace_s=0.5)
    assert process.returncode == -signal.SIGKILL
    process.stdout.close()
    stop_process(process)  # a process already reaped is left alone


def test_the_built_output_items_are_what_a_model_answers() -> None:
    items = (function_call_item("get_weather", {"city": "sf"}), message_item("cold", id="m2"))
    response = NeMoGymResponse.model_validate(response_with(*items, model="recorded", output=["ignored"]))
    assert [type(item) for item in response.output] == [
        NeMoGymResponseFunctionToolCall,
        NeMoGymResponseOutputMessage,
    ]
    assert response.output[0].arguments == '{"city":"sf"}' and response.output_text == "cold"
    assert response.model == "recorded" and response.id == "resp_test"
    assert function_call_item("f", '{"raw": ')["arguments"] == '{"raw": ', (
        "a string is passed on as generated"
    )


def test_a_flagged_verify_answer_is_not_taken_for_a_0_4_one() -> None:
    answer = {"reward": 0.0, **VERIFY_FLAGS}
    assert without_verify_flags(answer) == {"reward": 0.0}
    with pytest.raises(AssertionError):
        without_verify_flags({**answer, "mask_sample": True, "failure_kind": "grading_timeout"})


def test_an_instance_that_must_refuse_its_config_says_why_and_one_that_starts_fails_the_check(
    tmp_path: Path,
) -> None:
    refused = {"x": instance_config("resources_servers", INSTANCE, domain="agent", no_such_key=1)}
    (line,) = start_refusal(refused, "x", tmp_path)
    assert "unknown key 'no_such_key'" in line
    valid = {"x": instance_config("resources_servers", INSTANCE, domain="agent")}
    with pytest.raises(AssertionError, match="x started although it should refuse"):
        start_refusal(valid, "x", tmp_path)


def test_a_shipped_instance_is_bound_to_a_free_local_port_without_its_datasets() -> None:
    config = FOLDER / "configs" / f"{INSTANCE}.yaml"
    agent = shipped_instance(config, f"{INSTANCE}_simple_agent", max_steps=3)
    inner = agent["responses_api_agents"]["simple_agent"]
    assert "datasets" not in inner
    assert (inner["host"], inner["port"], inner["max_steps"]) == ("127.0.0.1", 0, 3)
    assert inner["resources_server"] == {"type": "resources_servers", "name": INSTANCE}


def test_the_environment_config_check_passes_a_shipped_folder_and_catches_a_wrong_one(tmp_path: Path) -> None:
    config, resources, agent = check_environment_config(FOLDER, INSTANCE, "agent")
    assert resources.domain == "agent" and agent["model_server"]["name"] == "policy_model"
    assert config == yaml.safe_load((FOLDER / "configs" / f"{INSTANCE}.yaml").read_text())
    with pytest.raises(AssertionError):
        check_environment_config(FOLDER, INSTANCE, "math")
    copy = tmp_path / INSTANCE
    shutil.copytree(FOLDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "data" / "example.jsonl").write_bytes(b"{}\n")
    with pytest.raises(AssertionError):
        check_environment_config(copy, INSTANCE, "agent")
