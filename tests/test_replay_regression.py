"""Regression check of every environment: `gym collect` over its example tasks, with replay_model playing
the recorded rollouts as the policy, must give the rewards recorded in those rollouts.

An environment takes part when its folder has configs/<name>.yaml (with a simple_agent serving the
example dataset) and data/example_rollouts.jsonl with rewards, and it grades without a judge model.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest
import yaml

from nemo_gym.collection.row_checks import prompt_key
from tests.helpers import REPO_ROOT, gym_command, running_deployment

REPLAY_CONFIG = "responses_api_models/replay_model/configs/replay_model.yaml"


def environments() -> list[Path]:
    return sorted(
        folder
        for folder in (REPO_ROOT / "resources_servers").iterdir()
        if (folder / "configs" / f"{folder.name}.yaml").is_file()
        and (folder / "data" / "example_rollouts.jsonl").is_file()
    )


def example_agent(config_path: Path) -> tuple[str, str]:
    """The simple_agent instance serving the example dataset, and that dataset's path."""
    for name, block in yaml.safe_load(config_path.read_text()).items():
        agent = (block or {}).get("responses_api_agents", {}).get("simple_agent")
        for dataset in (agent or {}).get("datasets", []):
            if dataset.get("type") == "example":
                return name, dataset["jsonl_fpath"]
    pytest.skip(f"{config_path} has no simple_agent with an example dataset")


def grades_with_a_judge(config_path: Path) -> bool:
    """Whether the environment asks a judge model on every verify (math_with_judge only when
    `should_use_judge` is on): replay_model holds the policy's turns, not the judge's."""
    return any(
        "judge_model_server" in inner and inner.get("should_use_judge", True)
        for block in yaml.safe_load(config_path.read_text()).values()
        for inner in ((block or {}).get("resources_servers") or {}).values()
    )


def ends(rollout: dict) -> bool:
    """Whether simple_agent stops on the recorded last reply: one with only reasoning (a generation cut
    without `incomplete_details`) makes it ask the model again, and the recording has no next turn."""
    response = rollout["response"]
    return bool(response.get("incomplete_details")) or any(
        item.get("type") == "message" for item in response.get("output", [])
    )


@pytest.mark.parametrize("folder", environments(), ids=lambda folder: folder.name)
def test_replayed_rollouts_earn_their_recorded_rewards(folder: Path, tmp_path: Path):
    rollouts_path = folder / "data" / "example_rollouts.jsonl"
    recorded = [orjson.loads(line) for line in rollouts_path.read_bytes().splitlines() if line.strip()]
    expected = {
        prompt_key(rollout["responses_create_params"]): rollout["reward"]
        for rollout in recorded
        if "reward" in rollout and ends(rollout)
    }
    if not expected:
        pytest.skip("the recorded rollouts carry no rewards")
    config = folder / "configs" / f"{folder.name}.yaml"
    if grades_with_a_judge(config):
        pytest.skip("graded by a judge model; its own tests replay the recorded verdicts")
    agent, dataset = example_agent(config)
    tasks = [orjson.loads(line) for line in (REPO_ROOT / dataset).read_bytes().splitlines() if line.strip()]
    replayable = [task for task in tasks if prompt_key(task["responses_create_params"]) in expected]
    if not replayable:
        pytest.skip("the recorded rollouts are of other tasks than the example dataset's")
    dataset_copy = tmp_path / "tasks.jsonl"
    dataset_copy.write_bytes(b"".join(orjson.dumps(task) + b"\n" for task in replayable))
    args = [
        f"+config_paths=[{config.relative_to(REPO_ROOT)},{REPLAY_CONFIG}]",
        f"++policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath=[{rollouts_path}]",
    ]
    output = tmp_path / "rollouts.jsonl"
    with running_deployment(args, REPO_ROOT) as running:
        port = running.head_url.rsplit(":", 1)[1]
        result = subprocess.run(
            gym_command(
                "collect",
                f"++head_server.port={port}",
                "-a",
                agent,
                "-i",
                str(dataset_copy),
                "-o",
                str(output),
            ),
            capture_output=True,
            text=True,
            timeout=180,
            cwd=REPO_ROOT,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    results = [orjson.loads(line) for line in output.read_bytes().splitlines() if line.strip()]
    assert len(results) == len(replayable)
    # A verify that ran out of its grading deadline (a busy machine) is masked, not a wrong reward: it
    # measures nothing, so it is not compared; every measured one must earn its recorded reward.
    measured = {
        prompt_key(row["responses_create_params"]): row["reward"] for row in results if not row["mask_sample"]
    }
    assert all(row["failure_kind"] for row in results if row["mask_sample"])
    assert measured == {key: expected[key] for key in measured}
