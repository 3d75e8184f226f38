"""ClineAgent over HTTP: the real `cline` CLI (installed from this folder's package-lock.json) runs a
rollout against openai_model's streamed /v1/chat/completions in front of the scripted upstream, on the
shipped string_match environment; every server is a real process on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from tests.cli_agents import (
    COMMAND,
    check_a_failing_model_fails_the_rollout,
    check_a_hanging_model_times_out,
    check_a_tool_call_then_an_answer,
    check_start_refusals,
    check_token_ids_come_back,
    check_unusable_tasks_are_refused,
    scripted_cli_stack,
    skip_without_cli,
)

skip_without_cli("cline_agent")
CLI_TIMEOUT_S = 60
API_KEY = "sk-cline-never-shown-0123456789"
ARGUMENTS = {"commands": [COMMAND]}


def command_results(output: str) -> str:
    """run_commands answers a record per command: the command, its output and whether it succeeded."""
    (record,) = orjson.loads(output)
    assert record["success"] is True and record["query"] == COMMAND, record
    return record["result"].strip()


@pytest.fixture(scope="module")
def stack(scripted_upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    workdir = tmp_path_factory.mktemp("cline_agent")
    with scripted_cli_stack(
        "cline_agent", scripted_upstream, workdir, timeout=CLI_TIMEOUT_S, openai_api_key=API_KEY
    ) as started:
        yield started


async def test_the_cli_runs_a_tool_then_answers_and_the_answer_is_verified(stack):
    await check_a_tool_call_then_an_answer(
        stack, "run_commands", ARGUMENTS, "commands", chat=True, command_output=command_results
    )


async def test_a_failing_model_server_fails_the_rollout_clearly(stack):
    await check_a_failing_model_fails_the_rollout(stack, "cline", API_KEY)


async def test_a_task_no_cli_can_be_given_is_refused(stack):
    await check_unusable_tasks_are_refused(stack)


async def test_a_hanging_model_ends_in_a_timeout(scripted_upstream, tmp_path_factory):
    await check_a_hanging_model_times_out("cline_agent", scripted_upstream, tmp_path_factory.mktemp("hang"))


async def test_token_ids_come_back_when_the_model_server_has_them(vllm_upstream, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("tokens")
    await check_token_ids_come_back("cline_agent", vllm_upstream, workdir, "run_commands", ARGUMENTS)


def test_a_missing_cli_or_another_version_is_refused_at_start(tmp_path):
    check_start_refusals("cline_agent", "cline", "cline_version", tmp_path)
