"""nemo_gym.serving.responses_streaming on its own: a streaming client's request made into the strict params,
and a finished (or failed) response written as the Responses event sequence."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from nemo_gym.serving.responses_streaming import (
    restore_namespace_tool_calls,
    sanitize_streaming_responses_body,
    synthesize_responses_failure_sse,
    synthesize_responses_sse,
    validate_streaming_responses_params,
)
from nemo_gym.wire.responses import NeMoGymResponseCreateParamsNonStreaming
from tests.model_server_kinds import sse_events
from tests.upstream_script import assistant_message, function_call


def test_sanitizing_flattens_namespaces_moves_carried_tools_and_drops_what_no_backend_takes() -> None:
    namespace = {"type": "namespace", "name": "fs", "tools": [{"type": "function", "name": "read"}]}
    body = {
        "stream": True,
        "client_metadata": {"a": 1},
        "input": [
            {"type": "function_call", "namespace": "fs", "name": "read", "call_id": "c1", "arguments": "{}"},
            {
                "type": "additional_tools",
                "tools": [{"type": "namespace", "name": "web", "tools": [{"name": "get"}]}],
            },
            {"type": "additional_tools", "tools": "not a list"},
            {"type": "custom_tool_call", "name": "apply_patch"},
            {"type": ["unhashable"]},
            "text",
            {"role": "user", "content": "hi"},
        ],
        "tools": [namespace, {"type": "web_search"}],
    }
    cleaned, names = sanitize_streaming_responses_body(body)
    assert set(cleaned) == {"input", "tools"}
    assert [tool.get("name") for tool in cleaned["tools"]] == ["fs__read", None, "web__get"]
    assert names == {"fs__read": ("fs", "read"), "web__get": ("web", "get")}
    assert [item.get("name", item.get("role")) for item in cleaned["input"]] == ["fs__read", "user"]
    assert body["input"][0]["namespace"] == "fs"  # the caller's body is left as it was
    restored = restore_namespace_tool_calls([{"type": "function_call", "name": "web__get"}], names)
    assert restored == [{"type": "function_call", "name": "get", "namespace": "web"}]


def test_validation_drops_nested_fields_newer_than_the_params_but_not_real_errors() -> None:
    tool = {"type": "function", "name": "f", "parameters": {}, "defer_loading": True}
    params = validate_streaming_responses_params({"input": "x", "tools": [tool]})
    assert params.tools == [{"type": "function", "name": "f", "parameters": {}}]
    with pytest.raises(ValidationError):
        validate_streaming_responses_params({"input": "x", "tools": [tool], "temperature": "hot"})


def test_responses_events_cover_refusals_reasoning_and_other_items() -> None:
    message = {**assistant_message("hi"), "content": [{"type": "refusal", "refusal": "no"}]}
    thought = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]}
    other = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    events = sse_events(b"".join(synthesize_responses_sse({"id": "r", "output": [message, thought, other]})))
    assert [name for name, _ in events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert events[10][1]["delta"] == "hmm" and events[-1][1]["response"]["output"][2] == other


def test_a_namespaced_call_streams_its_arguments_and_gets_its_namespace_back() -> None:
    call = function_call("fs__read", {"path": "a.txt"}, "call_1")
    names = {"fs__read": ("fs", "read")}
    events = sse_events(b"".join(synthesize_responses_sse({"id": "r", "output": [call]}, names)))
    by_name = dict(events)
    assert by_name["response.output_item.added"]["item"]["arguments"] == ""
    assert by_name["response.function_call_arguments.delta"]["delta"] == call["arguments"]
    assert by_name["response.function_call_arguments.done"]["name"] == "read"
    restored = {**call, "name": "read", "namespace": "fs"}
    assert by_name["response.output_item.done"]["item"] == restored
    assert by_name["response.completed"]["response"]["output"] == [restored]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))


def test_items_keep_the_fields_of_the_non_stream_answer() -> None:
    message = {**assistant_message("4"), "generation_token_ids": [7, 8]}
    events = sse_events(
        b"".join(synthesize_responses_sse({"id": "r", "status": "completed", "output": [message]}))
    )
    created, completed = events[0][1]["response"], events[-1][1]["response"]
    assert (created["status"], created["output"]) == ("in_progress", [])
    assert completed == {"id": "r", "status": "completed", "output": [message]}
    text_done = next(data for name, data in events if name == "response.output_text.done")
    assert text_done["text"] == "4" and text_done["item_id"] == message["id"]


def test_a_failure_after_the_start_ends_the_stream_with_response_failed() -> None:
    events = sse_events(b"".join(synthesize_responses_failure_sse("HTTP 400: bad", code="invalid_request")))
    assert [name for name, _ in events] == ["response.created", "response.failed"]
    started, failed = events[0][1]["response"], events[1][1]["response"]
    assert (started["status"], started["error"]) == ("in_progress", None)
    assert failed["status"] == "failed" and failed["id"] == started["id"]
    assert failed["error"] == {"code": "invalid_request", "message": "HTTP 400: bad"}


def test_validation_gives_the_servers_own_params_type() -> None:
    class WithSeed(NeMoGymResponseCreateParamsNonStreaming):
        seed: int = 0

    params = validate_streaming_responses_params({"input": "x", "seed": 3}, WithSeed)
    assert isinstance(params, WithSeed) and params.seed == 3
    plain = validate_streaming_responses_params({"input": "x", "seed": 3})
    assert type(plain) is NeMoGymResponseCreateParamsNonStreaming and "seed" not in plain.model_dump()


def test_sanitizing_keeps_the_fields_of_the_servers_own_params() -> None:
    class WithSeed(NeMoGymResponseCreateParamsNonStreaming):
        seed: int = 0

    body = {"input": "x", "seed": 3, "prompt_cache_key": "k", "stream": True}
    assert sanitize_streaming_responses_body(body, WithSeed)[0] == {"input": "x", "seed": 3}
    assert sanitize_streaming_responses_body(body)[0] == {"input": "x"}
