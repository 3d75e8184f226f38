"""What collection writes about a rollout besides the agent's answer (nemo_gym.collection.records): the
useful part of an error answer, a failed attempt's record and whether it may be retried, the agent a row
is routed to, and how many attempts a rollout gets."""

from __future__ import annotations

import orjson
import pytest

from nemo_gym.collection.records import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_ATTEMPTS_ENV_VAR_NAME,
    MAX_FAILURE_MESSAGE_CHARS,
    agent_map_with_agent_name,
    error_message,
    failure_record,
    mapped_agent,
    max_rollout_attempts,
    status_failure_class,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.wire.validation_errors import MAX_REPORTED_PROBLEMS, describe_problem

ROW = {"_ng_task_index": 4, "_ng_rollout_index": 1, "agent_ref": {"name": "agent"}, "question": "?"}


def problem(field: str) -> dict:
    return {"loc": ["body", field], "msg": "Field required", "type": "missing"}


def test_an_error_envelope_gives_its_message_and_its_causes():
    envelope = {"error": {"message": "model server failed", "cause": {"message": "upstream said 400"}}}
    assert error_message(orjson.dumps(envelope)) == "model server failed: upstream said 400"
    inner_422 = {"error": {"message": "agent failed", "cause": {"detail": [problem("input")]}}}
    assert (
        error_message(orjson.dumps(inner_422))
        == f"agent failed: invalid request: {describe_problem(problem('input'))}"
    )
    assert error_message(orjson.dumps({"error": {"message": "plain"}})) == "plain"


def test_a_422_names_its_first_problems_and_counts_the_rest():
    fields = [f"field_{number}" for number in range(MAX_REPORTED_PROBLEMS + 2)]
    message = error_message(orjson.dumps({"detail": [problem(field) for field in fields]}))
    shown = [describe_problem(problem(field)) for field in fields[:MAX_REPORTED_PROBLEMS]]
    assert message == "invalid request: " + "; ".join([*shown, "... and 2 more"])


def test_an_answer_that_is_not_an_error_envelope_is_given_as_its_text():
    assert error_message(b"<html>502 Bad Gateway</html>") == "<html>502 Bad Gateway</html>"
    assert error_message(b'["not", "an", "object"]') == '["not", "an", "object"]'
    assert error_message(b"\xff broken") == "\ufffd broken"


@pytest.mark.parametrize(
    ("failure_class", "status", "terminal"),
    [
        ("invalid_request", None, True),
        ("http_404", 404, True),
        ("http_429", 429, False),
        ("timeout", 408, False),
        ("http_500", 500, False),
        ("connection", None, False),
    ],
)
def test_a_failure_is_terminal_when_a_retry_could_not_fix_it(
    failure_class: str, status: int | None, terminal: bool
):
    record = failure_record(ROW, failure_class, "went wrong", 2, status)
    assert record.get("_ng_failure_terminal", False) is terminal
    assert (record["_ng_task_index"], record["_ng_rollout_index"], record["agent_ref"]) == (
        4,
        1,
        {"name": "agent"},
    )
    assert (record["_ng_failure_class"], record["_ng_failure_attempt"]) == (failure_class, 2)
    assert record.get("_ng_failure_status") == status and "question" not in record


def test_the_failing_servers_word_on_retrying_wins_and_long_messages_are_cut():
    assert "_ng_failure_terminal" not in failure_record(ROW, "invalid_request", "x", 1, terminal=False)
    assert failure_record(ROW, "http_500", "x", 1, 500, terminal=True)["_ng_failure_terminal"] is True
    long = failure_record(ROW, "http_500", "y" * (MAX_FAILURE_MESSAGE_CHARS + 10), 1)
    assert long["_ng_failure_message"] == "y" * MAX_FAILURE_MESSAGE_CHARS


def test_deadline_statuses_count_as_timeouts():
    assert [status_failure_class(status) for status in (408, 504, 502, 422)] == [
        "timeout", "timeout", "http_502", "http_422",
    ]  # fmt: skip


def test_agent_map_routes_by_agent_then_task_source_then_default():
    agent_map = {"old": "new", "math": "math_agent", "_default": "fallback"}
    assert mapped_agent({"agent_ref": {"name": "old"}, "task_source": "math"}, agent_map) == "new"
    assert mapped_agent({"task_source": "math"}, agent_map) == "math_agent"
    assert mapped_agent({"agent_ref": {"name": "other"}}, agent_map) == "fallback"
    assert mapped_agent({"agent_ref": {"name": "other"}}, {"old": "new"}) is None
    assert mapped_agent({"agent_ref": {"name": "old"}}, None) is None


def test_agent_name_becomes_the_default_route_unless_another_default_is_set():
    assert agent_map_with_agent_name({"old": "new"}, "agent") == {"old": "new", "_default": "agent"}
    assert agent_map_with_agent_name(None, "agent") == {"_default": "agent"}
    assert agent_map_with_agent_name({"_default": "agent"}, "agent") == {"_default": "agent"}
    assert agent_map_with_agent_name({"old": "new"}, None) == {"old": "new"}
    with pytest.raises(ValueError, match="agent_name=agent and agent_map._default=other both name"):
        agent_map_with_agent_name({"_default": "other"}, "agent")


def test_the_attempts_per_rollout_come_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(MAX_ATTEMPTS_ENV_VAR_NAME, raising=False)
    assert max_rollout_attempts() == DEFAULT_MAX_ATTEMPTS
    monkeypatch.setenv(MAX_ATTEMPTS_ENV_VAR_NAME, "7")
    assert max_rollout_attempts() == 7
    for wrong in ("0", "-1", "two", ""):
        monkeypatch.setenv(MAX_ATTEMPTS_ENV_VAR_NAME, wrong)
        with pytest.raises(
            ConfigError, match=f"{MAX_ATTEMPTS_ENV_VAR_NAME} must be a whole number >= 1, got {wrong!r}"
        ):
            max_rollout_attempts()
