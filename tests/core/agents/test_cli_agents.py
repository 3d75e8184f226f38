"""nemo_gym.agents.cli_agents: how a CLI agent runs its CLI (a process group killed at the deadline, capped
output, a built environment, the task on stdin), and how the token ids its relay kept go on the trajectory
(the relay itself: test_cli_model_relay.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import orjson

from nemo_gym.agents.cli_agents import cli_environment, run_cli
from nemo_gym.agents.cli_trajectories import attach_token_ids
from tests.helpers import wait_until_gone

TOKENS = {"prompt_token_ids": [1, 2], "generation_token_ids": [3, 4], "generation_log_probs": [-0.5, -0.25]}


async def test_a_run_past_its_timeout_is_killed_with_everything_it_started(tmp_path: Path) -> None:
    script = "sleep 300 & echo $! > grandchild.pid; echo started; sleep 300"
    run = await run_cli(["sh", "-c", script], env={}, cwd=tmp_path, timeout_s=1, max_output_bytes=1000)
    assert run.timed_out and run.returncode is not None
    assert run.stdout == b"started\n", "what it printed before the kill is kept"
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert wait_until_gone([grandchild]) == [], "the background child died with the group"


async def test_output_past_the_cap_is_cut_and_said(tmp_path: Path) -> None:
    printer = [
        sys.executable,
        "-c",
        "import sys; sys.stdout.write('x' * 200_000); sys.stderr.write('e' * 9000)",
    ]
    run = await run_cli(printer, env={}, cwd=tmp_path, timeout_s=30, max_output_bytes=1000)
    assert (run.returncode, run.timed_out, run.truncated) == (0, False, True)
    assert run.stdout == b"x" * 1000 and run.stderr_tail.endswith("e" * 100) and len(run.stderr_tail) <= 4096


async def test_the_run_sees_only_the_environment_it_is_given(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-of-the-agent-process")
    env = cli_environment(tmp_path, {"CLI_SETTING": "on"})
    run = await run_cli([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
                        env=env, cwd=tmp_path, timeout_s=30, max_output_bytes=100_000)  # fmt: skip
    seen = orjson.loads(run.stdout)
    assert "OPENAI_API_KEY" not in seen
    assert (seen["HOME"], seen["CLI_SETTING"]) == (str(tmp_path), "on")
    assert seen["PATH"] == os.environ["PATH"] and "127.0.0.1" in seen["NO_PROXY"]


def test_token_ids_go_on_the_last_item_of_each_turn_only_when_turns_and_calls_line_up() -> None:
    def trajectory() -> list[dict]:
        return [
            {"type": "reasoning"},
            {"type": "function_call", "call_id": "a"},
            {"type": "function_call_output", "call_id": "a"},
            {"type": "message"},
        ]

    second = {**TOKENS, "generation_token_ids": [5]}
    output = trajectory()
    assert attach_token_ids(output, [TOKENS, second]) == "attached"
    assert [item.get("generation_token_ids") for item in output] == [None, [3, 4], None, [5]]
    output = trajectory()
    assert attach_token_ids(output, [TOKENS]) == "unmatched"
    assert attach_token_ids(output, [TOKENS, None]) == "unmatched"
    assert not any("generation_token_ids" in item for item in output), "nothing half-attached"
    assert attach_token_ids(output, [None, None]) == "unavailable"


async def test_the_task_goes_in_on_stdin_whatever_its_size(tmp_path: Path) -> None:
    task = "é" * 300_000  # past what one command-line argument may hold
    reader = [sys.executable, "-c", "import sys; print(len(sys.stdin.buffer.read()))"]
    run = await run_cli(reader, env={}, cwd=tmp_path, timeout_s=30, max_output_bytes=100, stdin=task.encode())
    assert (run.returncode, run.stdout) == (0, b"600000\n")
