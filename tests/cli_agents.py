"""A stack for the tests of a CLI agent (claude_code_agent, codex_agent, ...): the shipped string_match
environment, a model server in front of the scripted upstream and the agent, each a real server process
on 127.0.0.1; the upstream plays the model the CLI talks to."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from tests.helpers import REPO_ROOT, instance_config, missing_program, run_instance
from tests.upstream_script import assistant_message, chat_tool_call, function_call

ROWS = REPO_ROOT / "resources_servers" / "string_match" / "data" / "example.jsonl"
ROW = orjson.loads(ROWS.read_bytes().splitlines()[0])  # a hexagon's sides, "Final answer: 6"
START_CHECK_TIMEOUT_S = 60
FINAL_ANSWER = "The file says 6.\nFinal answer: 6"
# The command each test's model has the CLI run: its output is the answer.
COMMAND = "echo 6 > sides.txt && cat sides.txt"
# More model calls than a CLI makes with its retries (the CLI agents cap those at 1 per call).
MODEL_CALLS_REFUSED = 10


def skip_without_cli(folder: str) -> None:
    """Skip the test module, saying why, when `make agent-clis` could not install the folder's CLI (no
    node/npm here, or the registry could not serve the package)."""
    if reason := missing_program(folder):
        pytest.skip(reason, allow_module_level=True)


@dataclass
class CliStack:
    agent_url: str
    model: str
    upstream: Any
    requests_before_script: int = 0

    def script(self, *turns: dict) -> None:
        self.upstream.clear(self.model)
        self.requests_before_script = len(self.upstream.requests(self.model))
        self.upstream.script(self.model, list(turns))

    def model_requests(self) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(self.model)[self.requests_before_script :]]

    async def run(self, row: dict) -> tuple[int, dict]:
        response = await request("POST", self.agent_url + "/run", json=row)
        return response.status, await get_response_json(response)


@contextmanager
def cli_stack(
    folder: str, workdir: Path, model_server: dict, model: str, upstream: Any, **agent_settings: Any
) -> Iterator[CliStack]:
    """string_match, `model_server` (an instance_config block named policy_model) and the agent."""
    config = {
        "string_match": instance_config("resources_servers", "string_match", domain="other"),
        "policy_model": model_server,
    }
    with ExitStack() as servers:
        for name in ("string_match", "policy_model"):
            started = servers.enter_context(run_instance(config, name, workdir))
            (inner,) = next(iter(config[name].values())).values()
            inner["port"] = started.port
        config["agent"] = agent_config(folder, **agent_settings)
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        yield CliStack(agent.url, model, upstream)


def agent_config(folder: str, **settings: Any) -> dict:
    return instance_config(
        "responses_api_agents",
        folder,
        resources_server={"type": "resources_servers", "name": "string_match"},
        model_server={"type": "responses_api_models", "name": "policy_model"},
        **settings,
    )


def start_refusal(folder: str, workdir: Path, **settings: Any) -> str:
    """What the agent says when it refuses to start with `settings` (it must exit non-zero)."""
    config_file = workdir / "refused.yaml"
    config_file.write_bytes(orjson.dumps({"agent": agent_config(folder, **settings)}))
    app = REPO_ROOT / "responses_api_agents" / folder / "app.py"
    env = {**os.environ, "NEMO_GYM_CONFIG_FILE": str(config_file), "NEMO_GYM_CONFIG_PATH": "agent"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, str(app)], env=env, cwd=app.parent, capture_output=True, text=True,
        timeout=START_CHECK_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
    return result.stderr.strip().splitlines()[-1]


def input_texts(params: dict) -> str:
    """All the text of a Responses request's input items, or a chat request's messages (what the model
    was shown)."""
    texts = []
    for item in params.get("input") or params.get("messages") or []:
        content = item.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [part.get("text", "") for part in content if isinstance(part, dict)]
    return "\n".join(texts)


def tool_results_sent(params: dict) -> list[str]:
    """The tool results a Responses or chat request gave back to the model."""
    if "messages" in params:
        return [
            str(message.get("content")) for message in params["messages"] if message.get("role") == "tool"
        ]
    return [item.get("output", "") for item in params["input"] if item.get("type") == "function_call_output"]


def openai_model(upstream: Any, model: str) -> dict:
    """openai_model in front of the scripted upstream, playing `model`."""
    return instance_config(
        "responses_api_models", "openai_model",
        openai_base_url=upstream.base_url, openai_api_key="sk-upstream", openai_model=model,
    )  # fmt: skip


async def check_a_failing_model_fails_the_rollout(stack: CliStack, program: str, api_key: str) -> None:
    """A model server that refuses every call of the CLI (its own retries included): the CLI fails, and so
    does the rollout, clearly (502 naming the CLI), without the API key in sight."""
    refusal = {"error": {"message": "context too long", "type": "invalid_request_error"}}
    stack.script({"status": 400, "body": refusal, "repeat": MODEL_CALLS_REFUSED})
    status, result = await stack.run(ROW)
    assert status == 502, result
    assert result["error"]["type"] == "cli_failed" and result["error"]["message"].startswith(f"{program} ")
    assert api_key not in orjson.dumps(result).decode()


async def check_a_hanging_model_times_out(folder: str, upstream: Any, workdir: Path) -> None:
    """A model that never answers: the CLI run is killed at its `timeout` and the rollout answers 504."""
    model = f"{folder}-hang-{workdir.name}"
    upstream.script(model, [{"hang": True}])
    with cli_stack(folder, workdir, openai_model(upstream, model), model, upstream, timeout=3) as stack:
        status, result = await stack.run(ROW)
    assert status == 504, result
    assert result["error"]["type"] == "timeout" and "3s timeout" in result["error"]["message"]


def check_start_refusals(folder: str, program: str, version_key: str, workdir: Path) -> None:
    """No CLI where `cli_path` says, or a config naming a version other than the pinned one: refused at
    start in one line saying what to do."""
    missing = start_refusal(folder, workdir, cli_path=str(workdir / f"no-{program}"))
    assert f"{program} CLI not found" in missing and "cli_path" in missing and "make agent-clis" in missing
    other = start_refusal(folder, workdir, **{version_key: "0.0.1"})
    assert f"{version_key}: 0.0.1 asked" in other and "package-lock.json" in other


def vllm_model_for_training(upstream: Any, model: str) -> dict:
    """vllm_model in training mode (token ids on its answers) in front of the vLLM-compatible upstream."""
    return instance_config(
        "responses_api_models", "vllm_model",
        base_url=upstream.base_url, api_key="sk-upstream", model=model,
        return_token_id_information=True, uses_reasoning_parser=True,
    )  # fmt: skip


async def check_token_ids_come_back(
    folder: str, upstream: Any, workdir: Path, tool: str, arguments: dict, **agent_settings: Any
) -> None:
    """Over a model server that has token ids (vllm_model training mode), the rollout's output carries
    each model call's ids on the last item that call generated: the tool call, then the final answer."""
    model = f"{folder}-tokens-{workdir.name}"
    upstream.script(
        model, [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": "Final answer: 6"}]
    )
    model_server = vllm_model_for_training(upstream, model)
    with cli_stack(folder, workdir, model_server, model, upstream, timeout=60, **agent_settings) as stack:
        status, result = await stack.run(ROW)
    assert status == 200 and result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert result["response"]["metadata"]["token_ids"] == "attached", result["response"]["metadata"]
    carriers = [item for item in output if item.get("generation_token_ids")]
    assert [item["type"] for item in carriers] == ["function_call", "message"]
    engine_prompts = [
        call["prompt_token_ids"] for call in upstream.requests(model) if "prompt_token_ids" in call
    ]
    assert [item["prompt_token_ids"] for item in carriers] == engine_prompts, "the ids the engine was given"
    assert all(len(item["generation_log_probs"]) == len(item["generation_token_ids"]) for item in carriers)


async def check_unusable_tasks_are_refused(stack: CliStack) -> None:
    """A task no CLI can be given (no user message; a NUL character) is a 422 naming the field, and no
    model call is made."""
    stack.script()
    for content in ("   ", "six\u0000sides"):
        row = {**ROW, "responses_create_params": {"input": [{"role": "user", "content": content}]}}
        status, result = await stack.run(row)
        assert status == 422 and "responses_create_params" in result["error"]["message"], result
    assert stack.model_requests() == []


@contextmanager
def scripted_cli_stack(
    folder: str, upstream: Any, workdir: Path, **agent_settings: Any
) -> Iterator[CliStack]:
    """The agent in front of openai_model over the scripted upstream, playing a model of its own."""
    model = f"{folder}-{workdir.name}"
    with cli_stack(
        folder, workdir, openai_model(upstream, model), model, upstream, **agent_settings
    ) as stack:
        yield stack


def tool_then_answer(tool: str, arguments: dict, answer: str, chat: bool) -> list[dict]:
    """Upstream steps: one call of `tool`, then `answer`; as Chat Completions when the CLI speaks that."""
    if chat:
        return [
            {"message": {"tool_calls": [chat_tool_call(tool, arguments)]}},
            {"message": {"content": answer}},
        ]
    return [{"output": [function_call(tool, arguments)]}, {"output": [assistant_message(answer)]}]


async def check_a_tool_call_then_an_answer(
    stack: CliStack,
    tool: str,
    arguments: dict,
    command_key: str,
    chat: bool = False,
    command_output: Callable[[str], str] = str.strip,
) -> None:
    """The model has the CLI run one command (writing a file in its workspace), then answers: the rollout
    is verified (reward 1.0) and its output shows the call, the command's real result (what
    `command_output` reads from the function_call_output) and the answer; the task reached the model, and
    the result went back to it."""
    stack.script(*tool_then_answer(tool, arguments, FINAL_ANSWER, chat))
    status, result = await stack.run(ROW)
    assert status == 200, result
    assert result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"], output
    call, tool_result, message = output
    assert call["name"] == tool and COMMAND in orjson.loads(call["arguments"])[command_key]
    assert tool_result["call_id"] == call["call_id"] and command_output(tool_result["output"]) == "6", (
        f"the command ran: {tool_result}"
    )
    assert message["content"][0]["text"] == FINAL_ANSWER
    assert result["response"]["metadata"]["cli_outcome"] == "completed"
    first, second = stack.model_requests()
    assert ROW["responses_create_params"]["input"][0]["content"] in input_texts(first), (
        "the task reached the model"
    )
    outputs = tool_results_sent(second)
    assert len(outputs) == 1 and "6" in outputs[0], "the command's result went back to the model"
