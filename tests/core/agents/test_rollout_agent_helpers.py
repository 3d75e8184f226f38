"""The loop helpers agents share (nemo_gym.agents.rollout_agent): which tool calls may run, and how a rollout that
ended early is marked. The agents' own tests exercise them through real servers; these pin each rule."""

from __future__ import annotations

import orjson
import pytest

from nemo_gym.agents.rollout_agent import (
    declared_tool_names,
    function_call_output,
    input_items,
    marked_incomplete,
    tool_call_refusal,
)

TOOLS = {"tools": [{"type": "function", "name": "get_weather"}, {"type": "web_search"}]}


def call(name: str, arguments: str = "{}") -> dict:
    return {"type": "function_call", "call_id": "c1", "name": name, "arguments": arguments}


def refusal_text(name: str, arguments: str = "{}", declared: set[str] | None = None) -> str | None:
    refused = tool_call_refusal(
        call(name, arguments), declared_tool_names(TOOLS) if declared is None else declared
    )
    return None if refused is None else orjson.loads(refused["output"])["error"]


def test_only_function_tools_are_declared_names() -> None:
    assert declared_tool_names(TOOLS) == {"get_weather"}
    assert declared_tool_names({"tools": None}) == set()


def test_a_declared_tool_with_object_arguments_may_run() -> None:
    assert refusal_text("get_weather", '{"city": "Oslo"}') is None
    assert refusal_text("anything", declared=set()) is None, "no declared tools: any tool name may run"


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("send_email", "{}", "Unknown tool 'send_email'. Available tools: get_weather"),
        ("verify", "{}", "Unknown tool 'verify'"),
        ("../admin", "{}", "Unknown tool '../admin'"),
        ("get_weather", "{city", "Invalid tool call arguments: "),
        ("get_weather", "[1]", "Invalid tool call arguments: expected a JSON object"),
    ],
)
def test_a_call_that_may_not_run_is_answered_with_the_reason(
    name: str, arguments: str, expected: str
) -> None:
    declared = {"get_weather", "verify", "../admin"} if name != "send_email" else None
    text = refusal_text(name, arguments, declared)
    assert text is not None and text.startswith(expected)


def test_a_route_of_the_resources_server_is_never_a_tool_even_when_declared() -> None:
    assert refusal_text("seed_session", declared={"seed_session"}) is not None


def test_outputs_answer_their_call() -> None:
    assert function_call_output(call("get_weather"), "cold") == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": "cold",
    }


def test_a_string_input_is_one_user_message() -> None:
    assert input_items({"input": "hi"}) == [{"role": "user", "content": "hi", "type": "message"}]
    items = [{"role": "user", "content": "hi"}]
    assert input_items({"input": items}) is items
    assert input_items({}) == []


def test_an_early_end_is_marked_and_keeps_other_metadata() -> None:
    marked = marked_incomplete({"status": "completed", "metadata": {"task": "t1"}}, "why", "what happened")
    assert marked["status"] == "incomplete"
    assert marked["metadata"] == {
        "task": "t1",
        "ng_termination_reason": "why",
        "ng_termination_message": "what happened",
    }
