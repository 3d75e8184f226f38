"""NeMo Gym 0.7's rollout health checks on crafted results files: `gym eval health-check RUN_DIR` writes
`quality_summary.json` and `rollout_verdicts.jsonl`, prints a short report, and exits 1 when a rollout or
a task is unhealthy; its command-line mistakes are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nemo_gym.rollout_health import LINES_PER_WORKER_CHUNK, NOT_IMPLEMENTED, run_health_checks
from tests.helpers import one_line_error
from tests.helpers import run_gym as gym


def rollout(task: int, index: int, **response: object) -> dict:
    """A results row as `gym eval run` writes it: the verify answer, stamped with the rollout's identity."""
    body = {
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "\\boxed{B}"}],
            }
        ],
        "usage": {"input_tokens": 12, "output_tokens": 7, "total_tokens": 19},
        "status": "completed",
        **response,
    }
    return {
        "responses_create_params": {"input": "question", "max_output_tokens": 64},
        "response": body,
        "reward": 1.0,
        "_ng_task_index": task,
        "_ng_rollout_index": index,
        "agent_ref": {"name": "mcqa_simple_agent"},
    }


def write_run(folder: Path, lines: list[dict | str], name: str = "rollouts.jsonl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    (folder / name).write_text(text)
    return folder


def verdicts(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rollout_verdicts.jsonl").read_text().splitlines()]


def findings(verdict: dict) -> list[str]:
    return [finding["check"] for finding in verdict["findings"]]


def test_a_healthy_run_exits_0_and_writes_both_files(tmp_path):
    run = write_run(tmp_path / "run", [rollout(0, 0), rollout(0, 1), rollout(1, 0)])
    result = gym("eval", "health-check", str(run), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 rollout(s): 3 healthy, 0 unhealthy, 0 unobserved" in result.stdout
    assert [(v["_ng_task_index"], v["_ng_rollout_index"], v["verdict"]) for v in verdicts(run)] == [
        (0, 0, "healthy"),
        (0, 1, "healthy"),
        (1, 0, "healthy"),
    ]
    summary = json.loads((run / "quality_summary.json").read_text())
    assert summary["verdicts"] == {"healthy": 3, "unhealthy": 0, "unobserved": 0}
    assert summary["token_totals"] == {"input_tokens": 36, "output_tokens": 21}
    assert summary["tasks"]["0"]["rollouts"] == 2
    assert summary["not_implemented_checks"] == list(NOT_IMPLEMENTED)


def test_each_problem_is_found_on_its_rollout(tmp_path):
    failed_call = rollout(2, 0, status="failed", error={"code": "server_error", "message": "upstream 503"})
    lines = [
        rollout(0, 0),
        rollout(0, 0),  # the same identity again
        failed_call,
        "{not json",
        rollout(3, 0, output=[]),
        rollout(4, 0, usage={"input_tokens": 5}),
        rollout(5, 0, usage={"input_tokens": 5, "output_tokens": 0}),
        rollout(6, 0, status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
        {key: value for key, value in rollout(7, 0).items() if key != "response"},
    ]
    run = write_run(tmp_path / "run", lines)
    result = gym("eval", "health-check", str(run), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(run)
    assert [findings(verdict) for verdict in found] == [
        [],
        ["rollout_duplicate_identity"],
        ["rollout_ended_on_failed_model_call"],
        ["record_unreadable"],
        ["rollout_missing_agent_turns"],
        ["model_call_missing_token_counts"],
        ["model_call_zero_completion_tokens"],
        ["model_call_runaway_generation"],
        [],
    ]
    assert [verdict["verdict"] for verdict in found] == ["healthy"] + ["unhealthy"] * 7 + ["unobserved"]
    assert found[1]["findings"][0]["detail"] == "task 0 rollout 0 is also on line 1"
    assert "upstream 503" in found[2]["findings"][0]["detail"]
    assert found[3]["line"] == 4
    assert "rollout_missing_agent_turns" in found[8]["unobserved"]
    assert "9 rollout(s): 1 healthy, 7 unhealthy, 1 unobserved" in result.stdout
    assert "  rollout_duplicate_identity: 1" in result.stdout

    as_json = gym("eval", "health-check", str(run), "--json", "--ignore", "record_unreadable", cwd=tmp_path)
    summary = json.loads(as_json.stdout)
    assert "record_unreadable" not in summary["findings_by_check"]
    assert summary["findings_by_check"]["rollout_duplicate_identity"] == 1
    assert summary["ignored_checks"] == ["record_unreadable"]
    assert summary == json.loads((run / "quality_summary.json").read_text())


def test_a_task_whose_every_rollout_is_unhealthy_is_reported(tmp_path):
    empty = {"output": []}
    run = write_run(tmp_path / "run", [rollout(0, 0, **empty), rollout(0, 1, **empty), rollout(1, 0)])
    result = gym(
        "eval", "health-check", str(run), "--ignore-checks", "rollout_missing_agent_turns", cwd=tmp_path
    )
    assert result.returncode == 0, "ignored findings make no rollout unhealthy"
    result = gym("eval", "health-check", str(run), cwd=tmp_path)
    assert result.returncode == 1
    summary = json.loads((run / "quality_summary.json").read_text())
    assert [f["check"] for f in summary["tasks"]["0"]["findings"]] == ["task_consistently_unhealthy"]
    assert summary["tasks"]["1"]["findings"] == []


def test_another_rollouts_file_of_the_run_folder(tmp_path):
    run = write_run(tmp_path / "run", [rollout(0, 0)], name="shard_1.jsonl")
    result = gym("eval", "health-check", str(run), "--rollouts-file", "shard_1.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(verdicts(run)) == 1


def test_worker_processes_judge_a_large_file_the_same_way(tmp_path):
    count = LINES_PER_WORKER_CHUNK + 10
    rows = [rollout(task, 0) for task in range(count)] + [rollout(0, 0)]
    path = write_run(tmp_path / "run", rows) / "rollouts.jsonl"
    one = run_health_checks(path, output_dir=tmp_path / "one", workers=1)
    two = run_health_checks(path, output_dir=tmp_path / "two", workers=2)
    assert (tmp_path / "one/rollout_verdicts.jsonl").read_bytes() == (
        tmp_path / "two/rollout_verdicts.jsonl"
    ).read_bytes()
    assert one.counts == two.counts and two.counts["unhealthy"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("missing_dir",), "run folder missing_dir does not exist"),
        (("run", "--rollouts-file", "nope.jsonl"), "no rollouts file run/nope.jsonl"),
        (("run", "--ignore", "no_such_check"), "unknown health check id(s) no_such_check"),
        (("run", "--workers", "0"), "--workers must be a whole number >= 1"),
        (("run", "++limit=3"), "RUN_DIR reads files only"),
        (("run", "--resources-server", "mcqa"), "RUN_DIR reads files only"),
    ],
)
def test_run_dir_mistakes_are_one_line(tmp_path, args, message):
    write_run(tmp_path / "run", [rollout(0, 0)])
    result = gym("eval", "health-check", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in one_line_error(result)
