"""`gym eval run` end to end (its own deployment, offline and against an OpenAI-compatible URL), with
`--no-serve` against a running deployment, the refusal to replace results, and `gym eval reverify`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, one_line_error, process_alive, running_deployment
from tests.helpers import run_gym as gym
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

BIN = Path(sys.executable).parent
MCQA_DATA = REPO_ROOT / "resources_servers/mcqa/data"
MCQA_ROWS = [json.loads(line) for line in (MCQA_DATA / "example.jsonl").read_text().splitlines()]
MCQA_RECORDED = [json.loads(line) for line in (MCQA_DATA / "example_rollouts.jsonl").read_text().splitlines()]
TABLE_ROW = re.compile(r"^(\S+)\s+\S+\s+\S+\s+http://127\.0\.0\.1:(\d+)\s+(\d+)$")


def question(row: dict) -> str:
    return row["responses_create_params"]["input"][-1]["content"]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rewards_by_question(results: list[dict], rows: list[dict]) -> dict[str, float]:
    """Result rewards keyed by question text, through the materialized rows' task indices."""
    by_task = {result["_ng_task_index"]: result["reward"] for result in results}
    return {question(row): by_task[row["_ng_task_index"]] for row in rows}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text("{}\n")
    return tmp_path


SELECTORS = ("--resources-server", "mcqa", "--model-type", "replay_model")


@pytest.mark.parametrize(
    "command",
    [
        ("gym", "eval", "run", *SELECTORS),
        ("ng_e2e_collect_rollouts", *SELECTORS),
        ("gym", "eval", "run", "+config_paths=[configs/demo.yaml]"),
    ],
    ids=["selectors", "legacy-script", "config-paths"],
)
def test_eval_run_offline_starts_collects_aggregates_and_stops(command, workdir):
    data_files = {path: path.read_bytes() for path in MCQA_DATA.iterdir()}
    executable, *args = command
    result = subprocess.run(
        [str(BIN / executable), *args, "--dataset", "example", "-o", "out/rollouts.jsonl"],
        cwd=workdir, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    out = workdir / "out"
    results = read_jsonl(out / "rollouts.jsonl")
    materialized = read_jsonl(out / "rollouts_materialized_inputs.jsonl")
    assert len(results) == len(MCQA_ROWS) and read_jsonl(out / "rollouts_failures.jsonl") == []
    recorded = {question(rollout): rollout["reward"] for rollout in MCQA_RECORDED}
    assert rewards_by_question(results, materialized) == recorded
    metrics = json.loads((out / "rollouts_aggregate_metrics.json").read_text())
    assert metrics[0]["agent_ref"]["name"] == "mcqa_simple_agent"
    assert metrics[0]["agent_metrics"]["mean/reward"] == pytest.approx(sum(recorded.values()) / len(recorded))
    assert (out / "preprocessed_datasets/example.jsonl").is_file()
    lines = result.stdout.splitlines()
    assert any(line.startswith("Ran 5 rollout(s)") for line in lines)
    assert any(line.startswith("mcqa_simple_agent: ") and "mean/reward 0.6" in line for line in lines)
    table = {match[1]: match for line in lines if (match := TABLE_ROW.match(line))}
    assert table["head_server"][2] != "11000", "an evaluation must not take the default head port"
    assert not [
        int(row[3]) for name, row in table.items() if name != "head_server" and process_alive(int(row[3]))
    ]
    assert {path: path.read_bytes() for path in MCQA_DATA.iterdir()} == data_files, (
        "evaluating must not rewrite the environment's data files"
    )


def test_eval_run_against_an_openai_compatible_url(workdir, scripted_upstream: ScriptedUpstream):
    model = fresh_model("eval-run")
    answers = {
        question(row): "A" if index == 0 else row["expected_answer"] for index, row in enumerate(MCQA_ROWS)
    }
    scripted_upstream.script(
        model,
        [
            {"match": json.dumps(text)[-60:-1], "output": [assistant_message(f"\\boxed{{{answer}}}")]}
            for text, answer in answers.items()
        ],
    )
    result = gym(
        "eval", "run", "--resources-server", "mcqa", "--dataset", "example",
        "--model-type", "openai_model", "--model-url", scripted_upstream.base_url, "--model", model,
        "--model-api-key", "sk-eval-run-secret", "-o", "live/r.jsonl", cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sk-eval-run-secret" not in result.stdout + result.stderr
    rewards = rewards_by_question(
        read_jsonl(workdir / "live/r.jsonl"), read_jsonl(workdir / "live/r_materialized_inputs.jsonl")
    )
    assert rewards == {
        text: 0.0 if answer == "A" and text == question(MCQA_ROWS[0]) else 1.0
        for text, answer in answers.items()
    }
    requests = scripted_upstream.requests(model)
    # each row once, after the health check's tiny probe and its rollout of the first example row
    assert len(requests) == len(MCQA_ROWS) + 2
    assert requests[0]["body"]["max_output_tokens"] == 16
    assert {entry["headers"]["Authorization"] for entry in requests} == {"Bearer sk-eval-run-secret"}


def test_eval_run_refuses_to_replace_results_before_starting_any_server(workdir):
    (workdir / "out").mkdir()
    (workdir / "out/r.jsonl").write_text('{"reward": 1.0}\n')
    result = gym("eval", "run", *SELECTORS, "-o", "out/r.jsonl", cwd=workdir)
    assert "out/r.jsonl already holds 1 result(s)" in one_line_error(result)
    assert "INSTANCE" not in result.stdout, "no server should have been started"
    assert (workdir / "out/r.jsonl").read_text() == '{"reward": 1.0}\n'


def test_a_task_without_a_recording_is_refused_before_any_server_starts(workdir):
    unrecorded = {**MCQA_ROWS[0], "responses_create_params": {"input": "a question nobody recorded"}}
    (workdir / "tasks.jsonl").write_text(json.dumps(MCQA_ROWS[1]) + "\n" + json.dumps(unrecorded) + "\n")
    result = gym("eval", "run", *SELECTORS, "-i", "tasks.jsonl", "+agent_name=mcqa_simple_agent", cwd=workdir)
    line = one_line_error(result)
    assert "tasks.jsonl: 1 row(s) have no recording to replay: line 2: 'a question nobody recorded'" in line
    assert "INSTANCE" not in result.stdout, "no server should have been started"


def test_a_row_that_cannot_run_is_refused_before_any_server_starts(workdir):
    broken = {**MCQA_ROWS[0], "responses_create_params": {"input": "hi", "temprature": 0.5}}
    (workdir / "tasks.jsonl").write_text(json.dumps(MCQA_ROWS[0]) + "\n" + json.dumps(broken) + "\n")
    result = gym("eval", "run", *SELECTORS, "-i", "tasks.jsonl", "+agent_name=mcqa_simple_agent", cwd=workdir)
    line = one_line_error(result)
    assert (
        "tasks.jsonl: 1 row(s) cannot run: line 2: responses_create_params" in line and "temprature" in line
    )
    assert "INSTANCE" not in result.stdout, "no server should have been started"


def test_eval_run_without_a_model_says_how_to_choose_one(workdir):
    line = one_line_error(gym("eval", "run", "--resources-server", "mcqa", cwd=workdir))
    assert "policy_model" in line and "--model-type openai_model" in line and "--replay" in line


def test_no_serve_collects_from_the_running_deployment_and_reverify_rescores(workdir):
    with running_deployment(["+config_paths=[configs/demo.yaml]"], cwd=workdir) as deployment:
        head = ["++head_server.port=" + deployment.head_url.rsplit(":", 1)[1]]
        first = gym("eval", "run", "--no-serve", "--dataset", "example", "-o", "r.jsonl", *head, cwd=workdir)
        assert first.returncode == 0, first.stdout + first.stderr
        results = read_jsonl(workdir / "r.jsonl")
        assert len(results) == len(MCQA_ROWS)

        again = gym(
            "collect", "-i", "preprocessed_datasets/example.jsonl", "-o", "r.jsonl", *head, cwd=workdir
        )
        assert "already holds 5 result(s)" in one_line_error(again) and "--overwrite" in again.stderr
        assert read_jsonl(workdir / "r.jsonl") == results, "a refused run must leave the results alone"
        replaced = gym(
            "collect", "-i", "preprocessed_datasets/example.jsonl", "-o", "r.jsonl", "--overwrite", *head,
            cwd=workdir,
        )  # fmt: skip
        assert replaced.returncode == 0, replaced.stderr
        assert len(read_jsonl(workdir / "r.jsonl")) == len(MCQA_ROWS)

        # A right answer edited into a wrong one: reverify must see it, the others keep their reward.
        stored = read_jsonl(workdir / "r.jsonl")
        edited = next(index for index, record in enumerate(stored) if record["reward"] == 1.0)
        record = stored[edited]
        wrong = next(letter for letter in "ABCDEFGHIJ" if letter != record["expected_answer"])
        message = next(item for item in record["response"]["output"] if item["type"] == "message")
        message["content"][-1]["text"] = f"\\boxed{{{wrong}}}"
        (workdir / "stored.jsonl").write_text("".join(json.dumps(item) + "\n" for item in stored))
        rescored = gym(
            "eval", "reverify", "-i", "stored.jsonl", "--inputs", "r_materialized_inputs.jsonl", "-o", "rescored.jsonl",
            *head, cwd=workdir,
        )  # fmt: skip
        assert rescored.returncode == 0, rescored.stdout + rescored.stderr
        assert "1 reward(s) changed" in rescored.stdout
        refused = gym("eval", "reverify", "-i", "stored.jsonl", "-o", "rescored.jsonl", *head, cwd=workdir)
        assert "--overwrite" in one_line_error(refused) and "--resume" not in refused.stderr
        aggregate = json.loads((workdir / "rescored_aggregate_metrics.json").read_text())
        assert [entry["agent_ref"]["name"] for entry in aggregate] == ["mcqa_simple_agent"]

        # NeMo Gym 0.7's flags: --rollouts, --limit, --resume finishing a partial output.
        partial = gym("eval", "reverify", "--rollouts", "stored.jsonl", "--limit", "2", "-o", "partial.jsonl",
                      "--disable-aggregation", *head, cwd=workdir)  # fmt: skip
        assert partial.returncode == 0, partial.stderr
        assert len(read_jsonl(workdir / "partial.jsonl")) == 2
        assert not (workdir / "partial_aggregate_metrics.json").exists()
        finished = gym("eval", "reverify", "--rollouts", "stored.jsonl", "-o", "partial.jsonl", "--resume", *head,
                       cwd=workdir)  # fmt: skip
        assert finished.returncode == 0, finished.stderr
        assert "Rescored 3 rollout(s)" in finished.stdout
        assert sorted(item["_ng_task_index"] for item in read_jsonl(workdir / "partial.jsonl")) == sorted(
            item["_ng_task_index"] for item in stored
        )
        # --judge-failed-only rescores only rollouts whose judgment failed: mcqa has no judge, so none.
        judged = gym("eval", "reverify", "-i", "stored.jsonl", "-o", "partial.jsonl", "--judge-failed-only",
                     "--append", *head, cwd=workdir)  # fmt: skip
        assert judged.returncode == 0 and "Rescored 0 rollout(s)" in judged.stdout, judged.stderr
        assert len(read_jsonl(workdir / "partial.jsonl")) == len(stored)
        both = gym("eval", "reverify", "-i", "stored.jsonl", "--rollouts", "r.jsonl", "-o", "x.jsonl", *head,
                   cwd=workdir)  # fmt: skip
        assert "name the stored rollouts once" in one_line_error(both)
        new = {
            (item["_ng_task_index"], item["_ng_rollout_index"]): item
            for item in read_jsonl(workdir / "rescored.jsonl")
        }
        for index, item in enumerate(stored):
            again = new[(item["_ng_task_index"], item["_ng_rollout_index"])]
            assert again["_ng_previous_reward"] == item["reward"]
            assert again["reward"] == (0.0 if index == edited else item["reward"])
            assert again["agent_ref"] == item["agent_ref"]
