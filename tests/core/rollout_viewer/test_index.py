"""The rollout index in-process, on real files: what is listed, searched and sorted, line by line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nemo_gym.rollout_viewer.index import RolloutIndex, RolloutQuery, TaskQuery


def result(
    task: int, rollout: int, reward: float | None, text: str = "an answer", **extra: Any
) -> dict[str, Any]:
    output = [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": f"question {task}"}]},
        "response": {"output": output, "usage": {"input_tokens": 10 + task, "output_tokens": 5}},
        "reward": reward,
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "agent"},
        **extra,
    }


def failure(task: int, rollout: int, attempt: int, failure_class: str = "timeout") -> dict[str, Any]:
    return {
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": "agent"},
        "_ng_failure_class": failure_class,
        "_ng_failure_message": f"attempt {attempt} failed",
        "_ng_failure_attempt": attempt,
    }


def built(folder: Path, lines: list[str], failures: list[dict] = (), inputs: list[dict] = ()) -> RolloutIndex:
    results = folder / "r.jsonl"
    results.write_text("".join(lines))
    if failures:
        (folder / "r_failures.jsonl").write_text("".join(json.dumps(row) + "\n" for row in failures))
    if inputs:
        (folder / "r_materialized_inputs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in inputs))
    index = RolloutIndex(results)
    index.build()
    return index


def line(row: dict[str, Any]) -> str:
    return json.dumps(row) + "\n"


def listed(index: RolloutIndex, **query: Any) -> list[tuple[Any, ...]]:
    rows = index.rollouts(RolloutQuery(limit=1000, **query))["rows"]
    return [(row["task"], row["rollout"]) for row in rows]


def test_search_skips_unreadable_lines_and_reads_text_as_json_writes_it(tmp_path: Path) -> None:
    lines = [
        '{"not json" needle\n',
        line(result(0, 0, 1.0, "hay")),
        "{broken NEEDLE\n",
        line(result(1, 0, 0.0, 'she said "Needle"\nthen left')),
        line(result(2, 0, 1.0, "C:\\needle")),
        line(result(3, 0, 1.0, "needl")),  # unfinished: no newline at the end
    ]
    lines[-1] = lines[-1].rstrip("\n")
    index = built(tmp_path, lines)
    assert index.unreadable.count == 2 and index.unreadable.examples[0].startswith(
        "r.jsonl:1: not valid JSON"
    )
    assert listed(index) == [(0, 0), (1, 0), (2, 0)], "the unfinished last line is left out"
    assert listed(index, q="needle") == [(1, 0), (2, 0)]
    assert listed(index, q='said "needle"\nthen') == [(1, 0)]
    assert listed(index, q="C:\\needle") == [(2, 0)]
    assert listed(index, q="absent") == []


def test_missing_values_sort_last_either_way(tmp_path: Path) -> None:
    rows = [result(0, 0, 0.5), result(1, 0, None), result(2, 0, 1.0), result(3, 0, 0.0)]
    index = built(tmp_path, [line(row) for row in rows])
    assert listed(index, sort="reward") == [(3, 0), (0, 0), (2, 0), (1, 0)]
    assert listed(index, sort="reward", order="desc") == [(2, 0), (0, 0), (3, 0), (1, 0)]
    assert listed(index, sort="input_tokens", order="desc") == [(3, 0), (2, 0), (1, 0), (0, 0)]
    assert listed(index, order="desc") == [(3, 0), (2, 0), (1, 0), (0, 0)]
    assert listed(index, reward_min=0.5) == [(0, 0), (2, 0)]


def test_only_failures_without_a_result_are_listed_and_show_what_was_asked(tmp_path: Path) -> None:
    attempts = [failure(0, 1, 1), failure(1, 0, 1, "http_502"), failure(1, 0, 2), failure(0, 1, 2)]
    inputs = [
        {
            "responses_create_params": {"input": f"asked {task}/{rollout}"},
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
        }
        for task, rollout in ((0, 0), (0, 1), (1, 0))
    ]
    index = built(tmp_path, [line(result(0, 0, 1.0)), line(result(0, 1, 0.0))], attempts, inputs)
    assert listed(index) == [(0, 0), (0, 1), (1, 0)]
    assert listed(index, failed=True) == [(1, 0)]
    summary = index.summary()
    assert (summary["failed"], summary["failed_attempts"], summary["failure_classes"]) == (
        1,
        4,
        {"timeout": 1},
    )
    failed = index.rollout(2)
    assert failed["failure"]["message"] == "attempt 2 failed"
    assert [attempt["failure"] for attempt in failed["failed_attempts"]] == ["http_502"], (
        "the attempts before it"
    )
    assert failed["conversation"] == [
        {"source": "input", "kind": "message", "role": "user", "text": "asked 1/0"}
    ]
    retried = index.rollout(1)
    assert [attempt["failure"] for attempt in retried["failed_attempts"]] == ["timeout", "timeout"]
    assert retried["failure"] is None and retried["verify"]["reward"] == 0.0
    tasks = index.tasks(TaskQuery())["rows"]
    assert [(row["task"], row["passed"], row["mean_reward"]) for row in tasks] == [(0, 1, 0.5), (1, 0, None)]
