"""`gym demo` (what `make demo` runs): offline with the recorded turns, and live through env.yaml."""

import contextlib
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.helpers import EXIT_WAIT_S, REPO_ROOT, OutputReader, gym_command, process_alive
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

MCQA_DATA = REPO_ROOT / "resources_servers/mcqa/data"
EXAMPLE_ROWS = [json.loads(line) for line in (MCQA_DATA / "example.jsonl").read_text().splitlines()]
RECORDED = [json.loads(line) for line in (MCQA_DATA / "example_rollouts.jsonl").read_text().splitlines()]
REWARD_LINE = re.compile(r"^rollout (\d+): reward (\d\.\d\d)  \(expected (\w+), the model answered (\w+)\)$")
TABLE_ROW = re.compile(r"^(\S+)\s+\S+\s+\S+\s+http://127\.0\.0\.1:\d+\s+(\d+)$")
SAVED = "results/demo/rollouts.jsonl"
SAVED_LINE = f"Rollouts saved to {SAVED}: look at them with `gym view {SAVED}` or `gym show {SAVED}`."


def _question(row: dict) -> str:
    return row["responses_create_params"]["input"][-1]["content"]


def _question_tail(row: dict) -> str:
    """The end of a question's text as JSON-escaped in a request body: unique to that question."""
    return json.dumps(_question(row))[-60:-1]


def run_demo(cwd: Path, env_yaml: dict) -> subprocess.CompletedProcess:
    """`gym demo` from a folder whose env.yaml is `env_yaml` (so a developer's own env.yaml never leaks in)."""
    (cwd / "env.yaml").write_text(yaml.safe_dump(env_yaml))
    return subprocess.run(gym_command("demo"), cwd=cwd, capture_output=True, text=True, timeout=120)


def check_demo_output(result: subprocess.CompletedProcess) -> tuple[list[float], list[int]]:
    """The rewards printed (one line per example row, every row once) and the pids of the instance table."""
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("INSTANCE"))
    assert header.split() == ["INSTANCE", "TYPE", "IMPLEMENTATION", "URL", "PID"]
    table = [match for line in lines if (match := TABLE_ROW.match(line))]
    assert {match[1] for match in table} == {"head_server", "mcqa", "mcqa_simple_agent", "policy_model"}
    shown = {int(match[1]): match for line in lines if (match := REWARD_LINE.match(line))}
    assert sorted(shown) == list(range(len(EXAMPLE_ROWS)))
    rewards = [float(shown[index][2]) for index in range(len(EXAMPLE_ROWS))]
    assert [shown[index][3] for index in range(len(EXAMPLE_ROWS))] == [
        row["expected_answer"] for row in EXAMPLE_ROWS
    ]
    mean = sum(rewards) / len(rewards)
    own_lines = [line for line in lines if not line.startswith("(")]  # not a server's prefixed output
    assert own_lines[-2:] == [SAVED_LINE, f"mean reward over {len(EXAMPLE_ROWS)} rollouts: {mean:.3f}"]
    child_pids = [int(match[2]) for match in table if match[1] != "head_server"]
    return rewards, child_pids


def check_saved_rollouts(cwd: Path, rewards: list[float]) -> None:
    """The demo's rollouts, kept in its folder for `gym view` and `gym show`: one line per example row,
    stamped as rollout collection stamps them, with the rewards printed; aggregate metrics beside them."""
    saved = [json.loads(line) for line in (cwd / SAVED).read_text().splitlines()]
    assert len(saved) == len(EXAMPLE_ROWS)
    by_task = sorted(saved, key=lambda row: row["_ng_task_index"])
    assert [row["_ng_task_index"] for row in by_task] == list(range(len(EXAMPLE_ROWS)))
    assert [row["reward"] for row in by_task] == rewards
    assert {row["_ng_rollout_index"] for row in saved} == {0}
    assert all(row["agent_ref"] == {"name": "mcqa_simple_agent"} for row in saved)
    assert [row["expected_answer"] for row in by_task] == [row["expected_answer"] for row in EXAMPLE_ROWS]
    (metrics,) = json.loads((cwd / "results/demo/rollouts_aggregate_metrics.json").read_text())
    assert metrics["agent_ref"] == {"name": "mcqa_simple_agent"}
    assert metrics["agent_metrics"]["mean/reward"] == pytest.approx(sum(rewards) / len(rewards))


def test_demo_replays_the_recorded_turns_without_any_key(tmp_path):
    result = run_demo(tmp_path, {})
    rewards, child_pids = check_demo_output(result)
    assert "configs/demo.yaml" in result.stdout
    recorded = {_question(rollout): rollout["reward"] for rollout in RECORDED}
    assert rewards == [recorded[_question(row)] for row in EXAMPLE_ROWS]
    assert len(set(rewards)) > 1, "the demo should show a wrong answer next to right ones"
    assert not [pid for pid in child_pids if process_alive(pid)]
    check_saved_rollouts(tmp_path, rewards)


def test_demo_talks_to_a_live_model_configured_in_env_yaml(tmp_path, scripted_upstream: ScriptedUpstream):
    model = fresh_model("demo")
    # The first question is answered wrongly, the others rightly; each rule matches its question's text.
    answers = ["A" if index == 0 else row["expected_answer"] for index, row in enumerate(EXAMPLE_ROWS)]
    rules = [
        {"match": _question_tail(row), "output": [assistant_message(f"\\boxed{{{answer}}}")]}
        for row, answer in zip(EXAMPLE_ROWS, answers, strict=True)
    ]
    scripted_upstream.script(model, rules)
    env_yaml = {
        "policy_base_url": scripted_upstream.base_url,
        "policy_api_key": "sk-demo-live",
        "policy_model_name": model,
    }
    result = run_demo(tmp_path, env_yaml)
    rewards, child_pids = check_demo_output(result)
    assert "configs/demo_live.yaml" in result.stdout
    assert "openai_model" in result.stdout
    assert "sk-demo-live" not in result.stdout + result.stderr
    assert rewards == [0.0] + [1.0] * (len(EXAMPLE_ROWS) - 1)
    requests = scripted_upstream.requests(model)
    assert len(requests) == len(EXAMPLE_ROWS)
    assert {entry["headers"]["Authorization"] for entry in requests} == {"Bearer sk-demo-live"}
    assert not [pid for pid in child_pids if process_alive(pid)]


def wait_until(condition: Callable[[], object], timeout_s: float) -> bool:
    """Check `condition` until it holds or `timeout_s` passes; whether it held."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def live_env_yaml(scripted_upstream: ScriptedUpstream, model: str) -> dict:
    return {
        "policy_base_url": scripted_upstream.base_url,
        "policy_api_key": "sk-demo-live",
        "policy_model_name": model,
    }


def test_demo_prints_rollouts_in_row_order(tmp_path, scripted_upstream: ScriptedUpstream):
    model = fresh_model("demo-order")
    # The first row's rollout finishes last; the others get the upstream's immediate default answer.
    scripted_upstream.script(
        model,
        [{"match": _question_tail(EXAMPLE_ROWS[0]), "delay_s": 2, "output": [assistant_message("Hi.")]}],
    )
    result = run_demo(tmp_path, live_env_yaml(scripted_upstream, model))
    check_demo_output(result)
    printed = [int(match[1]) for line in result.stdout.splitlines() if (match := REWARD_LINE.match(line))]
    assert printed == list(range(len(EXAMPLE_ROWS)))


def test_ctrl_c_during_the_demo_stops_it_cleanly(tmp_path, scripted_upstream: ScriptedUpstream):
    model = fresh_model("demo-interrupted")
    scripted_upstream.script(model, [{"match": "step-by-step", "delay_s": 60}])
    (tmp_path / "env.yaml").write_text(yaml.safe_dump(live_env_yaml(scripted_upstream, model)))
    private_tmp = tmp_path / "private_tmp"
    private_tmp.mkdir()
    process = subprocess.Popen(
        gym_command("demo"),
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = OutputReader(process)
        output.wait_for("server(s) are up", 60)
        child_pids = [int(match[2]) for line in output.lines if (match := TABLE_ROW.match(line))]
        child_pids = [pid for pid in child_pids if pid != process.pid]
        assert wait_until(lambda: scripted_upstream.requests(model), 30)
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 130
        with contextlib.suppress(AssertionError):
            output.wait_for("\0never printed\0", 10)
        assert not [line for line in output.lines if "Traceback" in line], output.lines
        assert output.lines[-1].startswith("Interrupted"), output.lines[-5:]
        assert wait_until(lambda: not [pid for pid in child_pids if process_alive(pid)], EXIT_WAIT_S)
        assert sorted(private_tmp.glob("gym-run-*")) == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
