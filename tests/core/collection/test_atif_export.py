"""`gym eval export --format atif` and `gym eval reverify --input-format atif`: the schema refuses what ATIF
forbids, a real run's export validates and re-verifies to the recorded rewards, and bad input is refused
with nothing written (the mapping itself: test_atif_mapping.py)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from nemo_gym.wire.atif_v1_7 import ATIF_SCHEMA_VERSION, AtifTrajectory
from tests.helpers import REPO_ROOT, one_line_error, running_deployment
from tests.helpers import run_gym as gym

STATEFUL = "resources_servers/example_session_state_mgmt"
EXPORT = ("eval", "export", "--format", "atif", "--session-id", "run-7", "--agent-version", "2.10")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def stamped(row: dict, task: int) -> dict:
    return {**row, "agent_ref": {"name": "agent"}, "_ng_task_index": task, "_ng_rollout_index": 0}


@pytest.mark.parametrize(
    ("step", "problem"),
    [
        ({"step_id": 2, "source": "user", "message": "hi"}, "steps count from 1"),
        ({"step_id": 1, "source": "user", "message": "hi", "reasoning_content": "x"}, "only belong to agent steps"),
        ({"step_id": 1, "source": "agent", "message": "", "observation": {"results": [{"source_call_id": "c9"}]}},
         "which no tool call of the step made"),
        ({"step_id": 1, "source": "robot", "message": ""}, "source"),
        ({"step_id": 1, "source": "user", "message": "hi", "colour": "red"}, "colour"),
    ],
)  # fmt: skip
def test_the_schema_refuses_what_atif_forbids(step: dict, problem: str):
    document = {
        "schema_version": ATIF_SCHEMA_VERSION,
        "session_id": "s",
        "agent": {"name": "a", "version": "1"},
    }
    AtifTrajectory.model_validate({**document, "steps": []})
    with pytest.raises(ValueError, match=problem):
        AtifTrajectory.model_validate({**document, "steps": [step]})


def test_export_then_reverify_reproduces_the_recorded_rewards(tmp_path: Path):
    (tmp_path / "env.yaml").write_text("{}\n")
    config = f"+config_paths=[{STATEFUL}/configs/example_session_state_mgmt.yaml," \
             "responses_api_models/replay_model/configs/replay_model.yaml]"  # fmt: skip
    replay = f"++policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath=[{STATEFUL}/data/example_rollouts.jsonl]"
    with running_deployment([config, replay], cwd=tmp_path) as deployment:
        head = "++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]
        collected = gym("collect", "-o", "r.jsonl", head, cwd=tmp_path)
        assert collected.returncode == 0, collected.stdout + collected.stderr
        stored = read_jsonl(tmp_path / "r.jsonl")
        assert stored and any(item["type"] == "function_call" for item in stored[0]["response"]["output"])

        exported = gym(*EXPORT, "--rollouts", "r.jsonl", "--output-dir", "atif", cwd=tmp_path)
        assert exported.returncode == 0, exported.stderr
        manifest = read_jsonl(tmp_path / "atif/manifest.jsonl")
        assert len(manifest) == len(stored)
        for entry in manifest:
            assert (
                list(entry)
                == sorted(entry)
                == ["_ng_rollout_index", "_ng_task_index", "expected_sha256", "trajectory_path"]
            )
            data = (tmp_path / "atif" / entry["trajectory_path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == entry["expected_sha256"]
            trajectory = AtifTrajectory.model_validate_json(data)
            assert (trajectory.schema_version, trajectory.session_id) == (ATIF_SCHEMA_VERSION, "run-7")
            assert (trajectory.agent.name, trajectory.agent.version) == (
                stored[0]["agent_ref"]["name"],
                "2.10",
            )
            assert any(step.tool_calls for step in trajectory.steps)

        reverify = ("eval", "reverify", "--input-format", "atif", "--atif-manifest", "atif/manifest.jsonl",
                    "--inputs", "r_materialized_inputs.jsonl", head)  # fmt: skip
        again = gym(*reverify, "-o", "again.jsonl", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "0 reward(s) changed, 0 failed" in again.stdout
        recorded = {(row["_ng_task_index"], row["_ng_rollout_index"]): row["reward"] for row in stored}
        rescored = read_jsonl(tmp_path / "again.jsonl")
        assert {
            (row["_ng_task_index"], row["_ng_rollout_index"]): row["reward"] for row in rescored
        } == recorded

        # The response really comes from the ATIF file: a changed tool argument (re-hashed) changes the
        # state the replay builds, and the reward with it; a changed file left unhashed is refused.
        entry = manifest[0]
        path = tmp_path / "atif" / entry["trajectory_path"]
        document = json.loads(path.read_text())
        call = next(step["tool_calls"][0] for step in document["steps"] if step.get("tool_calls"))
        call["arguments"]["count"] += 1000
        path.write_text(json.dumps(document))
        refused = gym(*reverify, "-o", "refused.jsonl", cwd=tmp_path)
        assert (
            "does not match its expected_sha256" in refused.stderr
            and entry["trajectory_path"] in refused.stderr
        )
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert not (tmp_path / "refused.jsonl").exists()
        entry["expected_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        write_jsonl(tmp_path / "atif/manifest.jsonl", manifest)
        edited = gym(*reverify, "-o", "edited.jsonl", cwd=tmp_path)
        assert edited.returncode == 0 and "1 reward(s) changed" in edited.stdout, (
            edited.stdout + edited.stderr
        )


def test_bad_exports_are_refused_with_every_bad_row_named_and_nothing_written(tmp_path: Path):
    source = REPO_ROOT / STATEFUL / "data/example_rollouts.jsonl"
    rows = [stamped(json.loads(line), task) for task, line in enumerate(source.read_text().splitlines())]
    write_jsonl(tmp_path / "good.jsonl", rows)
    failed = {key: rows[1][key] for key in ("_ng_task_index", "_ng_rollout_index", "agent_ref")}
    bad = [
        rows[0],
        {**failed, "_ng_failure_class": "timeout"},
        {**rows[2], "response": None},
        rows[0],
        rows[3],
    ]
    write_jsonl(tmp_path / "bad.jsonl", bad)

    refused = gym(*EXPORT, "--rollouts", "bad.jsonl", "--output-dir", "out", cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert "3 row(s)" in lines[0] and "nothing was written" in lines[0]
    assert [line.split(": ", 1)[0] for line in lines[1:]] == [
        f"{tmp_path / 'bad.jsonl'}:{n}" for n in (2, 3, 4)
    ]
    assert "failure record" in lines[1] and "no response" in lines[2] and "already on line 1" in lines[3]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl"]

    (tmp_path / "taken").mkdir()
    taken = one_line_error(gym(*EXPORT, "--rollouts", "good.jsonl", "--output-dir", "taken", cwd=tmp_path))
    assert "output_dirpath" in taken and "already exists" in taken
    assert list((tmp_path / "taken").iterdir()) == []
    blank = gym("eval", "export", "--format", "atif", "--rollouts", "good.jsonl", "--output-dir", "out",
                "--session-id", " ", "--agent-version", "1", cwd=tmp_path)  # fmt: skip
    assert "session_id" in one_line_error(blank) and "blank" in blank.stderr
    assert not (tmp_path / "out").exists()
