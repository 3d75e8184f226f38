"""`gym demo` (what `make demo` runs): offline with the recorded turns, and live through env.yaml."""

import re
import subprocess
from pathlib import Path

import yaml

from tests.helpers import REPO_ROOT, gym_command, process_alive
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

EXAMPLE_ROWS = (
    (REPO_ROOT / "resources_servers/example_single_tool_call/data/example.jsonl").read_text().splitlines()
)
REWARD_LINE = re.compile(r"^rollout (\d+): reward (\d\.\d\d)")
TABLE_ROW = re.compile(r"^(\S+)\s+\S+\s+\S+\s+http://127\.0\.0\.1:\d+\s+(\d+)$")


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
    assert {match[1] for match in table} == {
        "head_server",
        "example_single_tool_call",
        "example_single_tool_call_simple_agent",
        "policy_model",
    }
    rewards = {int(match[1]): float(match[2]) for line in lines if (match := REWARD_LINE.match(line))}
    assert sorted(rewards) == list(range(len(EXAMPLE_ROWS)))
    mean = sum(rewards.values()) / len(rewards)
    assert lines[-1] == f"mean reward over {len(EXAMPLE_ROWS)} rollouts: {mean:.3f}"
    child_pids = [int(match[2]) for match in table if match[1] != "head_server"]
    return list(rewards.values()), child_pids


def test_demo_replays_the_recorded_turns_without_any_key(tmp_path):
    result = run_demo(tmp_path, {})
    rewards, child_pids = check_demo_output(result)
    assert "configs/quickstart.yaml" in result.stdout
    assert rewards == [1.0] * len(EXAMPLE_ROWS)
    assert not [pid for pid in child_pids if process_alive(pid)]


def test_demo_talks_to_a_live_model_configured_in_env_yaml(tmp_path, scripted_upstream: ScriptedUpstream):
    model = fresh_model("demo")
    weather_then_answer = [
        {"output": [function_call("get_weather", {"city": "San Francisco"})]},
        {"output": [assistant_message("Sunny.")]},
    ]
    scripted_upstream.script(model, weather_then_answer * len(EXAMPLE_ROWS))
    env_yaml = {
        "policy_base_url": scripted_upstream.base_url,
        "policy_api_key": "sk-demo-live",
        "policy_model_name": model,
    }
    result = run_demo(tmp_path, env_yaml)
    rewards, child_pids = check_demo_output(result)
    assert "configs/quickstart_live.yaml" in result.stdout
    assert "openai_model" in result.stdout
    assert "sk-demo-live" not in result.stdout + result.stderr
    requests = scripted_upstream.requests(model)
    assert len(requests) == 2 * len(EXAMPLE_ROWS)
    assert {entry["headers"]["Authorization"] for entry in requests} == {"Bearer sk-demo-live"}
    assert not [pid for pid in child_pids if process_alive(pid)]
