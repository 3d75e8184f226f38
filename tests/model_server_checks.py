"""What the tests of the provider model servers (azure_openai_model, litellm_model, inference_provider,
switchyard_model) share: a provider's stand-in (tests/provider_gateways.py) in front of the scripted
upstream, and a rollout of the shipped example_single_tool_call environment through simple_agent with the
model server under test as its policy model."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from omegaconf import OmegaConf

from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from nemo_gym.testing import read_jsonl
from tests.helpers import REPO_ROOT, StartedServer, instance_config, run_instance, run_server
from tests.upstream_script import ScriptedUpstream, assistant_message, chat_tool_call, function_call

GATEWAYS = REPO_ROOT / "tests" / "provider_gateways.py"
WEATHER_ROWS = REPO_ROOT / "resources_servers" / "example_single_tool_call" / "data" / "example.jsonl"
ANSWER_TIMEOUT_S = 60.0
# A server that refuses its config exits before it listens; this bounds the wait for that.
START_FAILURE_TIMEOUT_S = 60.0


@contextmanager
def run_gateway(
    face: str, upstream: ScriptedUpstream, key: str, workdir: Path, env: dict[str, str] | None = None
) -> Iterator[StartedServer]:
    """The provider stand-in `face` (azure, litellm, switchyard) in front of `upstream`, taking `key`."""
    with run_server([str(GATEWAYS), face, upstream.url, key], workdir, env, cwd=REPO_ROOT) as gateway:
        yield gateway


def model_config(implementation: str, **settings: Any) -> dict[str, Any]:
    """The `policy_model` instance of the model server folder `implementation`."""
    return {"policy_model": instance_config("responses_api_models", implementation, **settings)}


@contextmanager
def run_model(config: dict[str, Any], workdir: Path) -> Iterator[StartedServer]:
    """The `policy_model` of `config`, started; its port written back into `config` for its peers."""
    with run_instance(config, "policy_model", workdir) as server:
        inner = next(iter(config["policy_model"]["responses_api_models"].values()))
        inner["port"] = server.port
        yield server


def assert_key_stays_out_of_reprs(server_class: type, settings: dict[str, Any], key: str) -> None:
    """The key is in the upstream client (it must be sent) but in no repr, str or JSON dump of the config,
    the server or the client."""
    config_class = server_class.model_fields["config"].annotation
    config = config_class(name="policy_model", host="127.0.0.1", port=0, entrypoint="app.py", **settings)
    client_of = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=OmegaConf.create({})
    )
    server = server_class(config=config, server_client=client_of)
    server.setup_webserver()
    client = server.client if hasattr(server, "client") else server._clients[0]
    assert client.api_key == key
    shown = (
        repr(config),
        str(config),
        repr(server),
        repr(client),
        orjson.dumps(config.model_dump(mode="json")),
    )
    assert all(key not in (text if isinstance(text, str) else text.decode()) for text in shown)


def failed_start(config: dict[str, Any], workdir: Path) -> str:
    """The error output of the `policy_model` of `config` started as `gym run` would, which must exit
    (non-zero) instead of serving."""
    inner = next(iter(config["policy_model"]["responses_api_models"].items()))
    app = REPO_ROOT / "responses_api_models" / inner[0] / "app.py"
    config_file = workdir / "failing-config.json"
    config_file.write_bytes(orjson.dumps(config))
    env = {
        **os.environ,
        "NEMO_GYM_CONFIG_FILE": str(config_file),
        "NEMO_GYM_CONFIG_PATH": "policy_model",
        "PYTHONPATH": str(REPO_ROOT),
    }
    result = subprocess.run(
        [sys.executable, str(app)],
        env=env,
        cwd=app.parent,
        capture_output=True,
        text=True,
        timeout=START_FAILURE_TIMEOUT_S,
    )
    assert result.returncode != 0, result.stdout
    return result.stderr + result.stdout


@contextmanager
def weather_agent(model: dict[str, Any], workdir: Path) -> Iterator[StartedServer]:
    """simple_agent over the shipped example_single_tool_call environment, with `model`'s (started)
    `policy_model` as its model server."""
    resources = {
        "example_single_tool_call": instance_config(
            "resources_servers", "example_single_tool_call", domain="agent"
        )
    }
    with ExitStack() as servers:
        environment = servers.enter_context(run_instance(resources, "example_single_tool_call", workdir))
        resources["example_single_tool_call"]["resources_servers"]["example_single_tool_call"]["port"] = (
            environment.port
        )
        agent = instance_config(
            "responses_api_agents",
            "simple_agent",
            resources_server={"type": "resources_servers", "name": "example_single_tool_call"},
            model_server={"type": "responses_api_models", "name": "policy_model"},
            max_steps=4,
        )
        yield servers.enter_context(run_instance({**resources, **model, "agent": agent}, "agent", workdir))


def weather_steps(api: str, final_text: str, city: str = "SF") -> list[dict[str, Any]]:
    """The scripted upstream's two answers of a weather rollout, in the API the model server calls
    (`chat` or `responses`): a get_weather call for `city`, then `final_text`."""
    if api == "chat":
        call = {"content": None, "tool_calls": [chat_tool_call("get_weather", {"city": city})]}
        return [{"message": call}, {"message": {"content": final_text}}]
    return [
        {"output": [function_call("get_weather", {"city": city})]},
        {"output": [assistant_message(final_text)]},
    ]


def weather_row() -> dict[str, Any]:
    return read_jsonl(WEATHER_ROWS)[0]


async def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, Any]:
    timeout = aiohttp.ClientTimeout(total=ANSWER_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        async with session.post(url, json=body, headers=headers) as answer:
            return answer.status, orjson.loads(await answer.read())


async def run_weather_rollout(model: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """One `/run` of the first shipped row by simple_agent, with `model`'s `policy_model` started as its
    model server; the agent's answer (200 asserted)."""
    with run_model(model, workdir), weather_agent(model, workdir) as agent:
        status, result = await post(f"{agent.url}/run", weather_row())
    assert status == 200, result
    return result


def assert_weather_rollout(result: dict[str, Any], city: str, final_text: str) -> None:
    """The model called get_weather for `city`, the environment answered, the model said `final_text`,
    and the environment rewarded the rollout."""
    output = result["response"]["output"]
    kinds = [item["type"] for item in output]
    assert "function_call" in kinds and "function_call_output" in kinds, kinds
    call = next(item for item in output if item["type"] == "function_call")
    assert (call["name"], orjson.loads(call["arguments"])) == ("get_weather", {"city": city})
    tool_output = next(item for item in output if item["type"] == "function_call_output")
    assert f"The weather in {city} is cold." in tool_output["output"]
    assert output[-1]["type"] == "message"
    assert output[-1]["content"][0]["text"] == final_text
    assert result["reward"] == 1.0
