"""What the views show of one stored rollout: its summary row, its conversation, what `/verify` returned,
and for a failure record, why it failed and what was asked."""

from __future__ import annotations

from nemo_gym.rollout_viewer.records import (
    PREVIEW_CHARS,
    RolloutSummary,
    content_text,
    conversation,
    detail,
    failure_class,
    summarize,
    verify_fields,
)


def message(role: str, text: str, **more) -> dict:
    return {"type": "message", "role": role, "content": [{"type": "output_text", "text": text}], **more}


def result_line(**more) -> dict:
    """A results line as the collector writes it: the agent's `/run` answer stamped with task and rollout."""
    return {
        "_ng_task_index": 3,
        "_ng_rollout_index": 1,
        "agent_ref": {"type": "responses_api_agents", "name": "simple_agent"},
        "responses_create_params": {"instructions": "Be brief.", "input": "What is 6 x 7?"},
        "response": {
            "output": [
                message("assistant", "Let me compute."),
                {
                    "type": "function_call",
                    "name": "multiply",
                    "arguments": '{"a": 6, "b": 7}',
                    "call_id": "c1",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "42"},
                message("assistant", "The answer\n is   42.", generation_token_ids=[5, 6]),
            ],
            "usage": {"input_tokens": 30, "output_tokens": 12},
        },
        "reward": 1.0,
        "extracted": "42",
        **more,
    }


def failure_line(**more) -> dict:
    return {
        "_ng_task_index": 4,
        "_ng_rollout_index": 0,
        "_ng_failure_class": "timeout",
        "_ng_failure_message": "the agent did not answer within 60 s",
        "_ng_failure_attempts": 3,
        **more,
    }


def test_a_result_is_summarized_by_its_final_answer_usage_and_tool_calls():
    assert summarize(result_line()) == RolloutSummary(
        task=3, rollout=1, agent="simple_agent", reward=1.0, input_tokens=30, output_tokens=12, tool_calls=1,
        failure=None, preview="The answer is 42.",
    )  # fmt: skip
    long_answer = result_line(response={"output": [message("assistant", "word " * 100)]})
    preview = summarize(long_answer).preview
    assert len(preview) == PREVIEW_CHARS and preview.startswith("word word") and preview.endswith("…")


def test_a_reward_that_is_not_a_finite_number_is_no_reward():
    for reward in (True, float("nan"), float("inf"), "1.0"):
        assert summarize(result_line(reward=reward)).reward is None, reward
    assert summarize(result_line(reward=0)).reward == 0.0


def test_a_failure_is_summarized_by_its_class_and_message_without_a_reward():
    summary = summarize(failure_line(reward=1.0))
    assert (summary.task, summary.failure, summary.reward) == (4, "timeout", None)
    assert summary.preview == "the agent did not answer within 60 s"


def test_a_result_that_is_not_a_clean_success_says_why():
    assert failure_class(result_line()) is None
    assert failure_class(result_line(judge_failure={"kind": "timeout"})) == "judge_timeout"
    assert failure_class(result_line(judge_failure={})) == "judge_failure"
    assert failure_class(result_line(response={"error": {"message": "boom"}})) == "response_error"
    cut = result_line(response={"output": [], "incomplete_details": {"reason": "max_output_tokens"}})
    assert failure_class(cut) == "incomplete_max_output_tokens"


def test_the_conversation_runs_from_instructions_to_the_final_answer():
    steps = conversation(result_line())
    assert [(step["source"], step["kind"]) for step in steps] == [
        ("input", "message"), ("input", "message"), ("output", "message"), ("output", "tool_call"),
        ("output", "tool_output"), ("output", "message"),
    ]  # fmt: skip
    assert (steps[0]["role"], steps[0]["text"]) == ("system", "Be brief.")
    assert (steps[1]["role"], steps[1]["text"]) == ("user", "What is 6 x 7?")
    assert (steps[3]["name"], steps[3]["arguments"], steps[4]["text"]) == (
        "multiply",
        '{"a": 6, "b": 7}',
        "42",
    )
    assert [step.get("final", False) for step in steps] == [False] * 5 + [True]
    assert steps[5]["tokens"] == {"generation_token_ids": [5, 6]}


def test_content_parts_become_text_naming_what_is_not_text():
    parts = [
        {"type": "input_text", "text": "Look:"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
        {"type": "input_file", "filename": "report.pdf"},
        {"type": "input_file"},
        {"type": "refusal", "refusal": "I cannot."},
    ]
    assert content_text(parts) == "Look:\n[image]\n[file report.pdf]\n[file]\n[refusal] I cannot."
    assert (content_text("plain"), content_text(None)) == ("plain", "")


def test_verify_fields_are_what_verify_returned_reward_first():
    fields = verify_fields(result_line())
    assert list(fields) == ["reward", "extracted"]


def test_a_failure_shows_what_was_asked_and_its_own_fields():
    row = {"responses_create_params": {"input": [{"role": "user", "content": "What is 6 x 7?"}]}}
    shown = detail(failure_line(), task_row=row)
    assert shown["conversation"] == [
        {"source": "input", "kind": "message", "role": "user", "text": "What is 6 x 7?"}
    ]
    assert shown["verify"] == {}
    assert shown["failure"] == {
        "class": "timeout",
        "message": "the agent did not answer within 60 s",
        "attempts": 3,
    }
    assert shown["summary"]["failure"] == "timeout"
