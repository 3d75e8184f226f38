"""The recency policy on conversations with images and reasoning: which items and parts a call is shown."""

from __future__ import annotations

from typing import Any

from responses_api_agents.simple_agent_with_compaction.config import HistoryPolicyConfig
from responses_api_agents.simple_agent_with_compaction.policy import Origin, materialize, plan


def screenshot(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": text},
            {"type": "input_image", "image_url": f"data:image/png;base64,{text}"},
        ],
    }


def reasoning(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{text}", "summary": [{"type": "summary_text", "text": text}]}


def call(n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"c{n}", "name": "click", "arguments": "{}"}


# The task's screenshot, then four calls each followed by a screenshot the next call answers.
ITEMS = [screenshot("task")]
ORIGINS = [Origin(0, False)]
for turn in range(1, 5):
    ITEMS += [reasoning(f"r{turn}"), call(turn), screenshot(f"s{turn}")]
    ORIGINS += [Origin(turn, True), Origin(turn, True), Origin(turn, False)]


def shown(config: dict[str, Any], decision_turn: int = 5) -> list[dict[str, Any]]:
    policy = HistoryPolicyConfig.model_validate({"type": "recency", "config": config})
    return materialize(plan(policy, ITEMS, ORIGINS, decision_turn).pieces, ITEMS, "[Earlier image omitted]")


def texts(items: list[dict[str, Any]]) -> list[str]:
    """Each item as one word: its reasoning, call, or the parts of its content."""
    words = []
    for item in items:
        if item["type"] == "reasoning":
            words.append(item["summary"][0]["text"])
        elif item["type"] == "function_call":
            words.append(item["call_id"])
        else:
            words.append("+".join(part.get("text") or "IMG" for part in item["content"]))
    return words


def test_old_images_give_way_to_one_marker_per_run_and_the_task_and_pending_ones_stay() -> None:
    view = shown({"images": {"enabled": True, "keep_last_groups": 1}})
    assert texts(view) == [
        "task+IMG",  # the task's own input is protected
        "r1", "c1", "s1+[Earlier image omitted]",
        "r2", "c2", "s2",
        "r3", "c3", "s3",
        "r4", "c4", "s4+IMG",  # the one the coming call answers (and the last group)
    ]  # fmt: skip


def test_a_shown_image_between_omitted_ones_starts_a_new_marker_run() -> None:
    """With the task image unprotected and two groups kept, s1..s2 are one run; then s3, s4 are kept."""
    view = shown({"images": {"enabled": True, "keep_last_groups": 2, "protect_initial_context": False}})
    assert [text for text in texts(view) if "+" in text or text.startswith("s")] == [
        "task+[Earlier image omitted]", "s1", "s2", "s3+IMG", "s4+IMG"
    ]  # fmt: skip


def test_reasoning_keeps_the_first_block_and_the_last_ones_when_asked() -> None:
    view = shown({"reasoning": {"enabled": True, "keep_first_block": True, "keep_last_blocks": 1}})
    assert [text for text in texts(view) if text.startswith("r")] == ["r1", "r4"]
    assert len(view) == len(ITEMS) - 2  # the rest is untouched


def test_with_no_marker_an_image_only_part_list_loses_just_its_images() -> None:
    policy = HistoryPolicyConfig.model_validate(
        {
            "type": "recency",
            "config": {"images": {"enabled": True, "keep_last_groups": 0, "omission_marker": None}},
        }
    )
    view = materialize(plan(policy, ITEMS, ORIGINS, 5).pieces, ITEMS, None)
    assert texts(view)[0] == "task+IMG" and texts(view)[3] == "s1" and texts(view)[-1] == "s4+IMG"
