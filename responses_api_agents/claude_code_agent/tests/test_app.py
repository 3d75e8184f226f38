"""ClaudeCodeAgent over HTTP: the real `claude` CLI (installed from this folder's package-lock.json) runs a
rollout against openai_model's /v1/messages in front of the scripted upstream, on the shipped string_match
environment; every server is a real process on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.cli_agents import ROW, CliStack, cli_stack, skip_without_cli, start_refusal
from tests.helpers import instance_config
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

skip_without_cli("claude_code_agent")
CLI_TIMEOUT_S = 60
API_KEY = "sk-ant-never-shown-0123456789"


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CliStack]:
    model = fresh_model("claude-code")
    model_server = instance_config(
        "responses_api_models",
        "openai_model",
        openai_base_url=scripted_upstream.base_url,
        openai_api_key="sk-upstream",
        openai_model=model,
    )
    workdir = tmp_path_factory.mktemp("claude_code_agent")
    with cli_stack(
        "claude_code_agent", workdir, model_server, model, scripted_upstream,
        timeout=CLI_TIMEOUT_S, anthropic_api_key=API_KEY,
    ) as started:  # fmt: skip
        yield started


async def test_the_cli_runs_a_tool_then_answers_and_the_answer_is_verified(stack):
    command = "echo 6 > sides.txt && cat sides.txt"
    stack.script(
        {"output": [function_call("Bash", {"command": command, "description": "count"})]},
        {"output": [assistant_message("The file says 6.\nFinal answer: 6")]},
    )
    status, result = await stack.run(ROW)
    assert status == 200, result
    assert result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    call, tool_result, message = output
    assert (call["name"], orjson.loads(call["arguments"])["command"]) == ("Bash", command)
    assert tool_result["call_id"] == call["call_id"] and tool_result["output"].strip() == "6", (
        "the command ran"
    )
    assert message["content"][0]["text"].endswith("Final answer: 6")
    first, second = stack.model_requests()
    assert ROW["responses_create_params"]["input"][0]["content"] in orjson.dumps(first["input"]).decode()
    assert "6" in [item.get("output", "").strip() for item in second["input"] if isinstance(item, dict)]


async def test_a_failing_model_server_fails_the_rollout_clearly(stack):
    stack.script(
        {"status": 400, "body": {"error": {"message": "context too long", "type": "invalid_request_error"}}}
    )
    status, result = await stack.run(ROW)
    assert status == 502, result
    assert result["error"]["type"] == "cli_failed" and result["error"]["message"].startswith("claude ")
    assert API_KEY not in orjson.dumps(result).decode()


async def test_a_hanging_model_ends_in_a_timeout(scripted_upstream, tmp_path_factory):
    model = fresh_model("claude-code-hang")
    scripted_upstream.script(model, [{"hang": True}])
    model_server = instance_config(
        "responses_api_models", "openai_model",
        openai_base_url=scripted_upstream.base_url, openai_api_key="sk-upstream", openai_model=model,
    )  # fmt: skip
    workdir = tmp_path_factory.mktemp("claude_code_agent_hang")
    with cli_stack("claude_code_agent", workdir, model_server, model, scripted_upstream, timeout=3) as stack:
        status, result = await stack.run(ROW)
    assert status == 504, result
    assert result["error"]["type"] == "timeout" and "3s timeout" in result["error"]["message"]


def test_a_missing_cli_or_another_version_is_refused_at_start(tmp_path):
    missing = start_refusal("claude_code_agent", tmp_path, cli_path=str(tmp_path / "no-claude"))
    assert "claude CLI not found" in missing and "cli_path" in missing and "make agent-clis" in missing
    other = start_refusal("claude_code_agent", tmp_path, claude_code_version="0.0.1")
    assert "claude_code_version: 0.0.1 asked" in other and "package-lock.json" in other
