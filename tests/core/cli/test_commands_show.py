"""`gym show`: a real subprocess printing the rollouts of a run collected by `gym eval run` (five results, one
rollout that failed for good), and of a longer file with a 5000-character answer."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.core.rollout_viewer.test_server import AGENT, UNRECORDED_QUESTION, collect_run
from tests.helpers import gym_command, one_line_error

HEADER = re.compile(
    r"^━━ task (?P<task>\d+) · rollout (?P<rollout>\d+) · (?P<agent>\S+) · "
    r"(?:reward (?P<reward>\S+)|failed: (?P<failure>\S+))"
    r"(?: · (?P<tokens>[\d,]+ in / [\d,]+ out tokens))?   \((?P<source>results|failures) line (?P<line>\d+)\)$"
)
LONG_END = " END-OF-LONG-ANSWER"
LONG_ANSWER = ("The long answer begins. " + "lorem ipsum dolor " * 300)[: 5000 - len(LONG_END)] + LONG_END
LONG_ROLLOUTS = 12


def show(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`gym show` with its output piped, in an environment that would want colours on a terminal."""
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"} | {"TERM": "xterm-256color"}
    result = subprocess.run(
        gym_command("show", *args), cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert "\x1b[" not in result.stdout + result.stderr, "no ANSI escape codes when piped"
    return result


def printed(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout.splitlines()


def headers(lines: list[str]) -> list[dict[str, Any]]:
    found = [HEADER.match(line) for line in lines if line.startswith("━━ ")]
    assert all(found), [line for line in lines if line.startswith("━━ ")]
    return [match.groupdict() for match in found if match]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_run(tmp_path_factory.mktemp("collected"))


@pytest.fixture(scope="module")
def long_run(collected: Path) -> Path:
    """Twelve results (tasks 0-11) made from the collected ones; task 0 answers with 5000 characters."""
    results = [json.loads(line) for line in collected.read_text().splitlines()]
    rows = []
    for task in range(LONG_ROLLOUTS):
        row = json.loads(json.dumps(results[task % len(results)])) | {"_ng_task_index": task}
        rows.append(row)
    rows[0]["response"]["output"][-1]["content"][0]["text"] = LONG_ANSWER
    path = collected.parent / "long.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def results_by_task(collected: Path) -> dict[int, dict[str, Any]]:
    return {row["_ng_task_index"]: row for row in map(json.loads, collected.read_text().splitlines())}


def test_every_rollout_of_a_small_run_gets_a_header(collected: Path) -> None:
    lines = printed(show(str(collected), cwd=collected.parent))
    shown = headers(lines)
    results = results_by_task(collected)
    assert len(shown) == 6
    assert [header["source"] for header in shown] == ["results"] * 5 + ["failures"]
    for header in shown[:5]:
        result = results[int(header["task"])]
        assert (header["rollout"], header["agent"]) == ("0", AGENT)
        assert float(header["reward"]) == result["reward"]
        usage = result["response"]["usage"]
        assert header["tokens"] == f"{usage['input_tokens']:,} in / {usage['output_tokens']:,} out tokens"
    assert sorted(int(header["task"]) for header in shown[:5]) == [0, 1, 2, 3, 4]
    assert (shown[5]["task"], shown[5]["failure"], shown[5]["reward"]) == ("5", "http_404", None)
    assert lines.count("[final answer]") == 5 and lines.count("[verify]") == 5
    assert not [line for line in lines if "more rollout(s)" in line]


def test_a_rollout_shows_its_conversation_and_verify_fields(collected: Path) -> None:
    lines = printed(show(str(collected), "--task", "0", cwd=collected.parent))
    result = results_by_task(collected)[0]
    question = result["responses_create_params"]["input"][-1]["content"]
    answer = result["response"]["output"][-1]["content"][0]["text"]
    text = "\n".join(lines)
    assert "[user]\n" + "\n".join("    " + line for line in question.splitlines()) in text
    assert "[final answer]\n" + "\n".join("    " + line for line in answer.splitlines()) in text
    verify = lines[lines.index("[verify]") + 1 :]
    assert verify[0] == f"    reward: {json.dumps(result['reward'])}", "reward comes first"
    assert f"    expected_answer: {result['expected_answer']}" in verify


def test_task_filter(collected: Path) -> None:
    shown = headers(printed(show(str(collected), "--task", "3", cwd=collected.parent)))
    assert [(header["task"], header["rollout"]) for header in shown] == [("3", "0")]
    lines = printed(show(str(collected), "--task", "42", cwd=collected.parent))
    assert lines == ["No rollout matches."]


def test_failed_shows_only_the_failure_and_what_was_asked(collected: Path) -> None:
    lines = printed(show(str(collected), "--failed", cwd=collected.parent))
    shown = headers(lines)
    assert [(header["task"], header["failure"]) for header in shown] == [("5", "http_404")]
    assert lines[1] == "[failure] http_404 on attempt 1"
    assert "unknown task: no recording" in lines[2] and lines[2].startswith("    ")
    asked = lines.index("what was asked:")
    assert lines[asked + 1 : asked + 3] == ["[user]", f"    {UNRECORDED_QUESTION}"]
    assert "[final answer]" not in lines and "[verify]" not in lines


def test_max_reward_shows_the_wrongly_answered_rollouts(collected: Path) -> None:
    wrong = sorted(task for task, row in results_by_task(collected).items() if row["reward"] == 0.0)
    shown = headers(printed(show(str(collected), "--max-reward", "0", cwd=collected.parent)))
    assert wrong and sorted(int(header["task"]) for header in shown) == wrong


def test_limit_then_a_hint_for_the_next_ones(collected: Path) -> None:
    lines = printed(show(str(collected), "--limit", "2", cwd=collected.parent))
    first = headers(lines)
    assert len(first) == 2
    assert lines[-1] == "… 4 more rollout(s); --offset 2 shows the next ones, --limit 0 all of them"
    everything = headers(printed(show(str(collected), "--limit", "0", cwd=collected.parent)))
    following = headers(printed(show(str(collected), "--offset", "2", "--limit", "2", cwd=collected.parent)))
    assert first + following == everything[:4] and len(everything) == 6


def test_at_most_ten_rollouts_and_long_texts_cut_unless_full(long_run: Path) -> None:
    lines = printed(show(str(long_run), cwd=long_run.parent))
    assert [int(header["task"]) for header in headers(lines)] == list(range(10))
    assert lines[-1] == "… 2 more rollout(s); --offset 10 shows the next ones, --limit 0 all of them"
    cut = [line for line in lines if line.startswith("    The long answer begins.")]
    assert cut == [f"    {LONG_ANSWER[:2000]}… (3,000 more characters; --full shows all)"]
    assert LONG_END not in "\n".join(lines)

    full = printed(show(str(long_run), "--full", "--limit", "1", cwd=long_run.parent))
    assert f"    {LONG_ANSWER}" in full and len(LONG_ANSWER) == 5000
    assert not [line for line in full if "more characters" in line]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--limit", "x"], "limit"),
        (["--task", "-1"], "task"),
        (["--offset", "many"], "offset"),
    ],
)
def test_bad_flag_values_are_one_line_errors(collected: Path, args: list[str], names: str) -> None:
    result = show(str(collected), *args, cwd=collected.parent)
    assert result.returncode == 1
    error = one_line_error(result)
    assert error.startswith("Error: ") and names in error
    assert result.stdout == ""


def test_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    result = show("absent.jsonl", cwd=tmp_path)
    assert result.returncode == 1
    error = one_line_error(result)
    assert error.startswith("Error: jsonl_fpath") and "absent.jsonl" in error
