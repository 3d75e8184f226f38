"""CodexAgent over HTTP: the real `codex` CLI (installed from this folder's package-lock.json) runs a
rollout against openai_model's streamed /v1/responses in front of the scripted upstream, on the shipped
string_match environment; every server is a real process on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.cli_agents import (
    ROW,
    CliStack,
    check_a_failing_model_fails_the_rollout,
    check_a_hanging_model_times_out,
    check_start_refusals,
    check_token_ids_come_back,
    check_unusable_tasks_are_refused,
    cli_stack,
    input_texts,
    openai_model,
    skip_without_cli,
)
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

skip_without_cli("codex_agent")
CLI_TIMEOUT_S = 60
API_KEY = "sk-codex-never-shown-0123456789"


@pytest.fixture(scope="module")
def stack(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CliStack]:
    model = fresh_model("codex")
    workdir = tmp_path_factory.mktemp("codex_agent")
    with cli_stack(
        "codex_agent", workdir, openai_model(scripted_upstream, model), model, scripted_upstream,
        timeout=CLI_TIMEOUT_S, openai_api_key=API_KEY,
    ) as started:  # fmt: skip
        yield started


async def test_the_cli_runs_a_command_then_answers_and_the_answer_is_verified(stack):
    command = "echo 6 > sides.txt && cat sides.txt"
    stack.script(
        {"output": [function_call("exec_command", {"cmd": command})]},
        {"output": [assistant_message("The file says 6.\nFinal answer: 6")]},
    )
    status, result = await stack.run(ROW)
    assert status == 200, result
    assert result["reward"] == 1.0, result
    output = result["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "function_call_output", "message"]
    call, tool_result, message = output
    assert call["name"] == "exec_command" and command in orjson.loads(call["arguments"])["cmd"]
    assert tool_result["call_id"] == call["call_id"] and tool_result["output"].strip() == "6", (
        "the command ran"
    )
    assert message["content"][0]["text"].endswith("Final answer: 6")
    assert result["response"]["metadata"]["cli_outcome"] == "completed"
    first, second = stack.model_requests()
    assert ROW["responses_create_params"]["input"][0]["content"] in input_texts(first), (
        "the task reached the model"
    )
    outputs = [
        item.get("output", "") for item in second["input"] if item.get("type") == "function_call_output"
    ]
    assert len(outputs) == 1 and "6" in outputs[0], "the command's result went back to the model"


async def test_a_failing_model_server_fails_the_rollout_clearly(stack):
    await check_a_failing_model_fails_the_rollout(stack, "codex", API_KEY)


async def test_a_hanging_model_ends_in_a_timeout(scripted_upstream, tmp_path_factory):
    await check_a_hanging_model_times_out("codex_agent", scripted_upstream, tmp_path_factory.mktemp("hang"))


def test_a_missing_cli_or_another_version_is_refused_at_start(tmp_path):
    check_start_refusals("codex_agent", "codex", "codex_version", tmp_path)


async def test_token_ids_come_back_when_the_model_server_has_them(vllm_upstream, tmp_path_factory):
    arguments = {"cmd": "echo 6"}
    await check_token_ids_come_back(
        "codex_agent", vllm_upstream, tmp_path_factory.mktemp("tokens"), "exec_command", arguments
    )


async def test_a_task_no_cli_can_be_given_is_refused(stack):
    await check_unusable_tasks_are_refused(stack)
