"""A NeMo Gym 0.7 deployment started by `gym run`: the session-counter environment with its 0.4 agent (no
environment server: run as its generated legacy_agent relay), a second agent behind a declared
`single_agent_turn` environment server granting the tools over direct HTTP and a third behind one granting
them over MCP, openai_model in front of the scripted upstream. The same tasks,
played the same way by the model, must earn the same rewards down both paths, from `gym collect` and from
the trainer API."""

import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from nemo_gym.collection.trainer import RolloutCollectionHelper
from nemo_gym.config_types import BaseServerConfig
from tests.helpers import REPO_ROOT, RunningDeployment, gym_command, one_line_error, running_deployment
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model, function_call

ENVIRONMENT = "resources_servers/example_session_state_mgmt"
RESOURCES = "example_session_state_mgmt_resources_server"
LEGACY_AGENT = "example_session_state_mgmt_simple_agent"
EPISODE_AGENT = "counter_episode_agent"
EPISODE_SERVER = "counter_episode_environment_server"
MCP_AGENT = "counter_mcp_agent"
MCP_SERVER = "counter_mcp_environment_server"
GENERATED_RELAY = "example_session_state_mgmt_environment_server"
ROWS = [
    orjson.loads(line)
    for line in (REPO_ROOT / ENVIRONMENT / "data" / "example.jsonl").read_bytes().splitlines()
]
# Rows 0 and 2 are counted right, rows 1, 3 and 4 wrong: equal rewards are not equal by accident.
COUNTED_RIGHT = {0, 2}


def simple_agent_block() -> dict:
    return {
        "responses_api_agents": {
            "simple_agent": {
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": RESOURCES},
                "model_server": {"type": "responses_api_models", "name": "policy_model"},
            }
        }
    }


def episode_server_block(agent: str, transport: str) -> dict:
    return {
        "environment_servers": {
            "single_agent_turn": {
                "entrypoint": "app.py",
                "resources_server": {"type": "resources_servers", "name": RESOURCES},
                "agent_server": {"type": "responses_api_agents", "name": agent},
                "resources_tool_transports": [transport],
                "cleanup_timeout_seconds": 30,
            }
        }
    }


CONFIG_0_7 = {
    # The same resources server, its tools also served over MCP (the 0.4 agent keeps calling them directly).
    RESOURCES: {"resources_servers": {"example_session_state_mgmt": {"expose_tools_over_mcp": True}}},
    EPISODE_AGENT: simple_agent_block(),
    EPISODE_SERVER: episode_server_block(EPISODE_AGENT, "direct_http"),
    MCP_AGENT: simple_agent_block(),
    MCP_SERVER: episode_server_block(MCP_AGENT, "mcp"),
}


def config_args(workdir: Path, upstream: ScriptedUpstream, model: str) -> list[str]:
    addition = workdir / "episode_servers.yaml"
    addition.write_bytes(orjson.dumps(CONFIG_0_7))  # JSON is YAML
    return [
        f"+config_paths=[{ENVIRONMENT}/configs/example_session_state_mgmt.yaml,configs/policy_model.yaml,{addition}]",
        f"+policy_base_url={upstream.base_url}",
        "+policy_api_key=sk-episodes",
        f"+policy_model_name={model}",
    ]


@pytest.fixture(scope="module")
def deployment(
    scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningDeployment, str, list[str]]]:
    model = fresh_model("episodes")
    args = config_args(tmp_path_factory.mktemp("episodes"), scripted_upstream, model)
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model, args


def script_rows(upstream: ScriptedUpstream, model: str) -> None:
    """Each row's three turns, told apart by what the request holds (the latest call id first): the right
    increments for COUNTED_RIGHT, one short otherwise."""
    upstream.clear(model)
    rules = []
    for index, row in enumerate(ROWS):
        prompt = row["responses_create_params"]["input"][0]["content"]
        first, second = (int(word) for word in prompt.split() if word.isdigit())
        if index not in COUNTED_RIGHT:
            second -= 1
        first_call, second_call = f"row{index}-first", f"row{index}-second"
        rules += [
            {"output": [assistant_message("counted")], "match": second_call},
            {
                "output": [function_call("increment_counter", {"count": second}, second_call)],
                "match": first_call,
            },
            {"output": [function_call("increment_counter", {"count": first}, first_call)], "match": prompt},
        ]
    upstream.script(model, rules)


def head_port(running: RunningDeployment) -> str:
    return running.head_url.rsplit(":", 1)[1]


def collect(running: RunningDeployment, agent: str, workdir: Path) -> list[dict]:
    source = workdir / "rows.jsonl"
    source.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in ROWS))
    output = workdir / f"{agent}.jsonl"
    result = subprocess.run(
        gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", agent,
            "-i", str(source), "-o", str(output), "--concurrency", "2",
        ),
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return [orjson.loads(line) for line in output.read_bytes().splitlines()]


def rewards(results: list[dict]) -> dict[int, float]:
    return {result["_ng_task_index"]: result["reward"] for result in results}


def test_the_agent_without_an_environment_server_is_announced_once(deployment) -> None:
    running, _, _ = deployment
    line = running.wait_for_output("DEPRECATED")
    assert (
        f"{LEGACY_AGENT} -> {GENERATED_RELAY}" in line and EPISODE_AGENT not in line and MCP_AGENT not in line
    )


def test_0_4_and_0_7_paths_give_the_same_rewards_from_gym_collect(
    deployment, scripted_upstream, tmp_path
) -> None:
    running, model, _ = deployment
    script_rows(scripted_upstream, model)
    legacy = collect(running, LEGACY_AGENT, tmp_path)
    script_rows(scripted_upstream, model)
    episodes = collect(running, EPISODE_AGENT, tmp_path)
    script_rows(scripted_upstream, model)
    over_mcp = collect(running, MCP_AGENT, tmp_path)

    expected = {index: 1.0 if index in COUNTED_RIGHT else 0.0 for index in range(len(ROWS))}
    assert rewards(legacy) == rewards(episodes) == rewards(over_mcp) == expected
    assert {r["_ng_environment_server"] for r in over_mcp} == {MCP_SERVER}
    assert {(r["_ng_environment_server"], r["_ng_result_type"]) for r in legacy} == {
        (GENERATED_RELAY, "legacy_agent")
    }
    assert {(r["_ng_environment_server"], r["_ng_result_type"]) for r in episodes} == {
        (EPISODE_SERVER, "single_agent_turn")
    }
    [metrics] = orjson.loads((tmp_path / f"{EPISODE_AGENT}_aggregate_metrics.json").read_bytes())
    assert metrics["agent_metrics"]["mean/reward"] == pytest.approx(len(COUNTED_RIGHT) / len(ROWS))
    assert (metrics["agent_ref"], metrics["_ng_environment_server"]) == (
        {"name": EPISODE_AGENT},
        EPISODE_SERVER,
    )
    [legacy_metrics] = orjson.loads((tmp_path / f"{LEGACY_AGENT}_aggregate_metrics.json").read_bytes())
    assert legacy_metrics["_ng_environment_server"] == GENERATED_RELAY


async def test_the_trainer_api_runs_rows_through_the_environment_server(
    deployment, scripted_upstream
) -> None:
    running, model, _ = deployment
    script_rows(scripted_upstream, model)
    host, port = running.head_url.removeprefix("http://").rsplit(":", 1)
    rows = [
        {**row, "agent_ref": {"type": "responses_api_agents", "name": EPISODE_AGENT}, "_ng_task_index": index,
         "_ng_rollout_index": 0}
        for index, row in enumerate(ROWS)
    ]  # fmt: skip
    helper = RolloutCollectionHelper()
    outcomes = [await task for task in helper.run_examples(rows, BaseServerConfig(host=host, port=int(port)))]
    by_task = {row["_ng_task_index"]: result for row, result in outcomes}
    assert {task: result["reward"] for task, result in by_task.items()} == {
        index: 1.0 if index in COUNTED_RIGHT else 0.0 for index in range(len(ROWS))
    }
    assert all("_ng_environment_server" not in result for result in by_task.values())  # the answer as given


async def test_a_failed_episode_is_a_failure_record_that_says_whether_to_retry(
    deployment, scripted_upstream, tmp_path
) -> None:
    running, model, _ = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(
        model, [{"status": 400, "body": {"error": {"message": "bad request"}}, "match": "add 1 "}]
    )
    source = tmp_path / "one.jsonl"
    source.write_bytes(orjson.dumps(ROWS[0]) + b"\n")
    output = tmp_path / "one_out.jsonl"
    result = subprocess.run(
        gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", EPISODE_AGENT,
            "-i", str(source), "-o", str(output),
        ),
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [failure] = [
        orjson.loads(line) for line in (tmp_path / "one_out_failures.jsonl").read_bytes().splitlines()
    ]
    assert failure["_ng_failure_class"] == "environment_server_failed"
    assert failure["_ng_failure_terminal"] is True and "agent failed" in failure["_ng_failure_message"]


def test_error_on_agent_without_environment_server_refuses_the_config(deployment) -> None:
    _, _, args = deployment
    result = subprocess.run(
        gym_command("env", "validate", *args, "++error_on_agent_without_environment_server=true"),
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode != 0
    message = one_line_error(result)
    assert (
        f"{LEGACY_AGENT} -> {GENERATED_RELAY}" in message
        and "error_on_agent_without_environment_server" in message
    )


def test_a_retried_rollout_carries_its_attempt_index(deployment, scripted_upstream, tmp_path) -> None:
    running, model, _ = deployment
    prompt = ROWS[0]["responses_create_params"]["input"][0]["content"]
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"status": 503, "match": prompt}])
    source = tmp_path / "one.jsonl"
    source.write_bytes(orjson.dumps(ROWS[0]) + b"\n")
    output = tmp_path / "retried.jsonl"
    command = gym_command(
        "collect", f"++head_server.port={head_port(running)}", "-a", EPISODE_AGENT, "-i", str(source),
        "-o", str(output),
    )  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert first.returncode == 1, first.stdout + first.stderr
    [failure] = [
        orjson.loads(line) for line in (tmp_path / "retried_failures.jsonl").read_bytes().splitlines()
    ]
    assert (
        failure["_ng_failure_class"] == "environment_server_failed" and "_ng_failure_terminal" not in failure
    )

    script_rows(scripted_upstream, model)
    second = subprocess.run(
        [*command, "--resume"], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT
    )
    assert second.returncode == 0, second.stdout + second.stderr
    [result] = [orjson.loads(line) for line in output.read_bytes().splitlines()]
    assert (result["_ng_attempt_index"], result["reward"]) == (1, 1.0)


def test_a_refused_verify_keeps_its_field_and_is_not_advised_for_resume(
    deployment, scripted_upstream, tmp_path
) -> None:
    running, model, _ = deployment
    script_rows(scripted_upstream, model)
    row = {key: value for key, value in ROWS[0].items() if key != "expected_count"}  # /verify needs it
    source = tmp_path / "incomplete.jsonl"
    source.write_bytes(orjson.dumps(row) + b"\n")
    output = tmp_path / "incomplete_out.jsonl"
    result = subprocess.run(
        gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", LEGACY_AGENT, "-i", str(source),
            "-o", str(output),
        ),
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    [failure] = [
        orjson.loads(line) for line in (tmp_path / "incomplete_out_failures.jsonl").read_bytes().splitlines()
    ]
    assert (failure["_ng_failure_class"], failure["_ng_failure_terminal"]) == ("http_422", True)
    assert "expected_count" in failure["_ng_failure_message"], failure
    assert "resume_from_cache" not in result.stdout and "none would succeed on a retry" in result.stdout
