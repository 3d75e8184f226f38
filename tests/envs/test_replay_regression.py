"""Every shipped environment replays offline: `gym eval run --resources-server NAME --model-type
replay_model` starts the folder's deployment with replay_model playing its recorded rollouts (the judge's
recorded turns included), runs every example task, and each rollout must finish and earn the reward it
was recorded with.

A recording and its replay are matched by the rollout's request (the task's input plus what the agent
added before the first model call, such as a reset observation): both are result rows of the same run.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import orjson
import pytest

from nemo_gym.collection.row_checks import prompt_key
from tests.helpers import LAUNCHER_VERDICT_S, REPO_ROOT, gym_command, missing_program


def environments() -> list[Path]:
    return sorted(
        folder
        for folder in (REPO_ROOT / "resources_servers").iterdir()
        if (folder / "configs" / f"{folder.name}.yaml").is_file()
    )


def read_jsonl(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def recorded_rewards(folder: Path) -> Counter:
    return Counter(
        (prompt_key(rollout["responses_create_params"]), rollout["reward"])
        for path in sorted((folder / "data").glob("example_rollouts*.jsonl"))
        for rollout in read_jsonl(path)
    )


@pytest.mark.parametrize("folder", environments(), ids=lambda folder: folder.name)
def test_every_example_task_replays_to_its_recorded_reward(folder: Path, tmp_path: Path):
    if reason := missing_program(folder.name):
        pytest.skip(reason)
    output = tmp_path / "rollouts.jsonl"
    result = subprocess.run(
        gym_command(
            "eval",
            "run",
            "--resources-server",
            folder.name,
            "--model-type",
            "replay_model",
            "-o",
            str(output),
        ),
        capture_output=True,
        text=True,
        timeout=LAUNCHER_VERDICT_S,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 failed" in result.stdout, result.stdout
    results = read_jsonl(output)
    materialized = read_jsonl(tmp_path / "rollouts_materialized_inputs.jsonl")
    assert len(results) == len(materialized) > 0
    # A verify that ran out of its grading deadline (a busy machine) is masked with its reason, not scored:
    # it measures nothing, so it is not compared; every measured one must earn its recorded reward.
    assert all(row["failure_kind"] for row in results if row.get("mask_sample"))
    measured = Counter(
        (prompt_key(row["responses_create_params"]), row["reward"])
        for row in results
        if not row.get("mask_sample")
    )
    assert measured <= recorded_rewards(folder), (
        f"rewards that differ from the recordings: {dict(measured - recorded_rewards(folder))}"
    )
