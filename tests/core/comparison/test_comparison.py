"""`gym eval compare` on results that `gym eval run` wrote: two real runs of mcqa against the scripted
upstream, the candidate model answering many more tasks right, must be told apart; two seeded samples of
the same noise, written in the shape of those real rows, must not."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT, one_line_error
from tests.helpers import run_gym as gym
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

AGENT = "mcqa_simple_agent"
TASKS = 30
SEED = 33
MCQA_ROW = json.loads((REPO_ROOT / "resources_servers/mcqa/data/example.jsonl").read_text().splitlines()[0])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def task_row(index: int) -> dict:
    """An mcqa task whose question names its index, so the scripted model can answer it by that name."""
    text = MCQA_ROW["responses_create_params"]["input"][0]["content"]
    return {
        **MCQA_ROW,
        "responses_create_params": {"input": [{"role": "user", "content": f"Task {index:03d}: {text}"}]},
    }


def eval_run(workdir: Path, upstream: ScriptedUpstream, right: set[int], output: str) -> Path:
    """A real `gym eval run` whose model answers the tasks in `right` correctly and the others wrongly."""
    model = fresh_model("compare")
    expected = MCQA_ROW["expected_answer"]
    wrong = next(letter for option in MCQA_ROW["options"] for letter in option if letter != expected)
    upstream.script(
        model,
        [
            {"match": f"Task {index:03d}:", "output": [assistant_message(f"\\boxed{{{expected if index in right else wrong}}}")]}
            for index in range(TASKS)
        ],
    )  # fmt: skip
    result = gym(
        "eval", "run", "--resources-server", "mcqa", "-i", "tasks.jsonl", f"+agent_name={AGENT}",
        "--model-type", "openai_model", "--model-url", upstream.base_url, "--model", model,
        "--model-api-key", "sk-compare", "-o", output, cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return workdir / output


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, scripted_upstream: ScriptedUpstream) -> dict:
    """Two real runs of the same 30 tasks: the baseline right on a seeded 40%, the candidate right on
    those but one, and on three in four of the others."""
    workdir = tmp_path_factory.mktemp("compare")
    (workdir / "env.yaml").write_text("{}\n")
    write_jsonl(workdir / "tasks.jsonl", [task_row(index) for index in range(TASKS)])
    draw = random.Random(SEED)
    baseline_right = {index for index in range(TASKS) if draw.random() < 0.4}
    regressed = min(baseline_right)
    candidate_right = (baseline_right - {regressed}) | {
        index for index in range(TASKS) if index not in baseline_right and index % 4 != 0
    }
    return {
        "workdir": workdir,
        "baseline": eval_run(workdir, scripted_upstream, baseline_right, "baseline/r.jsonl"),
        "candidate": eval_run(workdir, scripted_upstream, candidate_right, "candidate/r.jsonl"),
        "baseline_right": baseline_right,
        "candidate_right": candidate_right,
    }


def compare(workdir: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    result = gym("eval", "compare", *args, "-o", "report", cwd=workdir)
    assert result.returncode == 0, result.stdout + result.stderr
    return result, json.loads((workdir / "report/compare_report.json").read_text())


def test_a_real_improvement_is_flagged_task_by_task(runs):
    workdir = runs["workdir"]
    result, report = compare(workdir, str(runs["baseline"]), str(runs["candidate"]))
    assert report["verdict"] == "candidate better (significant at alpha=0.05)"
    assert "verdict: candidate better (significant at alpha=0.05)" in result.stdout
    changed = {delta["task"]: delta["delta"] for delta in report["deltas"] if delta["delta"]}
    gained = runs["candidate_right"] - runs["baseline_right"]
    lost = runs["baseline_right"] - runs["candidate_right"]
    assert changed == {**{task: 1.0 for task in gained}, **{task: -1.0 for task in lost}}
    assert report["test"]["differing_tasks"] == len(gained) + len(lost) and report["test"]["p_value"] < 0.05
    assert report["baseline"]["mean_reward"]["mean"] == pytest.approx(len(runs["baseline_right"]) / TASKS)
    assert report["candidate"]["mean_reward"]["mean"] == pytest.approx(len(runs["candidate_right"]) / TASKS)
    difference = report["difference"]
    assert 0 < difference["low"] < difference["mean"] < difference["high"]
    # The key metrics of the aggregate metrics files gym eval run wrote beside the results, side by side.
    assert {"agent": AGENT, "name": "mean/reward"} | {
        "baseline": pytest.approx(len(runs["baseline_right"]) / TASKS),
        "candidate": pytest.approx(len(runs["candidate_right"]) / TASKS),
    } in report["key_metrics"]
    markdown = (workdir / "report/compare_report.md").read_text()
    assert f"{len(gained) + len(lost)} of {TASKS} common task(s) changed" in markdown
    histogram = markdown.split("```")[1].splitlines()[1:]
    assert histogram[0].startswith("[-1.000, ") and histogram[0].endswith(f"  {len(lost)}")
    assert histogram[5].startswith("[-0.091, +0.091)") and histogram[5].endswith(
        f"  {TASKS - len(gained) - len(lost)}"
    )
    assert histogram[-1] == f"[+0.818, +1.000]  {'#' * 40}  {len(gained)}"

    _, swapped = compare(workdir, "--baseline", str(runs["candidate"]), "--candidates", str(runs["baseline"]))
    assert swapped["verdict"] == "candidate worse (significant at alpha=0.05)"


def noisy_copy(rows: list[dict], seed: int, rollouts: int) -> list[dict]:
    """The real rows with rewards drawn again: task i passes each rollout with probability (i % 5) / 4, so
    every seed samples the same tasks' same noise."""
    draw = random.Random(seed)
    return [
        {
            **row,
            "_ng_rollout_index": rollout,
            "reward": float(draw.random() < (row["_ng_task_index"] % 5) / 4),
        }
        for row in sorted(rows, key=lambda row: row["_ng_task_index"])
        for rollout in range(rollouts)
    ]


@pytest.mark.parametrize("seeds", [(1, 2), (3, 4), (5, 6)])
def test_two_samples_of_the_same_noise_are_not_flagged(runs, seeds):
    workdir, rows = runs["workdir"], read_jsonl(runs["baseline"])
    first = write_jsonl(workdir / f"noise{seeds[0]}/r.jsonl", noisy_copy(rows, seeds[0], rollouts=4))
    second = write_jsonl(workdir / f"noise{seeds[1]}/r.jsonl", noisy_copy(rows, seeds[1], rollouts=4))
    _, report = compare(workdir, str(first), str(second))
    assert report["verdict"] == "no significant difference at alpha=0.05"
    assert report["test"]["p_value"] >= 0.05 and report["test"]["differing_tasks"] > 0
    assert report["baseline"]["measured_rollouts"] == report["candidate"]["measured_rollouts"] == 4 * TASKS


def test_rollouts_without_a_reward_are_left_out_and_counted_and_one_sided_tasks_listed(runs):
    workdir = runs["workdir"]
    rows = read_jsonl(runs["candidate"])
    masked = [{**row, "mask_sample": True} if row["_ng_task_index"] in (1, 2) else row for row in rows]
    kept = [row for row in masked if row["_ng_task_index"] != 3]
    candidate = write_jsonl(workdir / "partial/r.jsonl", kept)
    failed = {**rows[0], "_ng_task_index": 3, "_ng_failure_class": "timeout", "_ng_failure_message": "late"}
    write_jsonl(workdir / "partial/r_failures.jsonl", [failed])
    result, report = compare(workdir, str(runs["baseline"]), str(candidate))
    assert (report["candidate"]["masked"], report["candidate"]["failed"]) == (2, 1)
    assert report["candidate"]["tasks"] == TASKS - 3
    assert report["only_baseline"] == [[AGENT, 1], [AGENT, 2], [AGENT, 3]] and report["only_candidate"] == []
    assert "2 masked, 1 failed" in result.stdout
    assert "3 baseline-only, 0 candidate-only" in result.stdout


def test_agents_are_matched_by_name_or_paired_by_flag(runs):
    workdir = runs["workdir"]
    renamed = write_jsonl(
        workdir / "renamed/r.jsonl",
        [{**row, "agent_ref": {"name": "other_agent"}} for row in read_jsonl(runs["candidate"])],
    )
    line = one_line_error(gym("eval", "compare", str(runs["baseline"]), str(renamed), cwd=workdir))
    assert line.startswith("Error: mismatched agents:") and AGENT in line and "other_agent" in line
    assert "--baseline-agent" in line
    _, report = compare(
        workdir,
        str(runs["baseline"]),
        str(renamed),
        "--baseline-agent",
        AGENT,
        "--candidate-agents",
        "other_agent",
    )
    assert report["verdict"] == "candidate better (significant at alpha=0.05)"
    line = one_line_error(
        gym("eval", "compare", str(runs["baseline"]), str(renamed), "--agent", "nobody", cwd=workdir)
    )
    assert "has no agent 'nobody'" in line
    # Files holding the same two agents: each agent's tasks are paired with its own, and pooled.
    both = [
        write_jsonl(workdir / f"both_{side}/r.jsonl", [*rows, *({**row, "agent_ref": {"name": "other_agent"}} for row in rows)])
        for side, rows in (("baseline", read_jsonl(runs["baseline"])), ("candidate", read_jsonl(runs["candidate"])))
    ]  # fmt: skip
    _, pooled = compare(workdir, str(both[0]), str(both[1]))
    assert (
        pooled["baseline"]["agents"] == [AGENT, "other_agent"] and pooled["difference"]["count"] == 2 * TASKS
    )
    assert "mismatched agents" in one_line_error(
        gym("eval", "compare", str(both[0]), str(renamed), cwd=workdir)
    )


def test_bad_input_is_one_line_and_an_exit_code(runs):
    workdir = runs["workdir"]
    baseline = str(runs["baseline"])
    missing = gym("eval", "compare", baseline, "nowhere/r.jsonl", cwd=workdir)
    assert missing.returncode == 1
    assert "candidate results file nowhere/r.jsonl does not exist" in one_line_error(missing)
    shifted = write_jsonl(
        workdir / "shifted/r.jsonl",
        [{**row, "_ng_task_index": row["_ng_task_index"] + 1000} for row in read_jsonl(runs["candidate"])],
    )
    disjoint = gym("eval", "compare", baseline, str(shifted), cwd=workdir)
    assert disjoint.returncode == 1 and "no task was measured in both" in one_line_error(disjoint)
    unindexed = write_jsonl(workdir / "unindexed/r.jsonl", [{"agent_ref": {"name": AGENT}, "reward": 1.0}])
    line = one_line_error(gym("eval", "compare", baseline, str(unindexed), cwd=workdir))
    assert f"{unindexed}:1: _ng_task_index must be an integer" in line
    no_metrics = gym(
        "eval", "compare", baseline, baseline, "--baseline-agg-metrics", "none.json", cwd=workdir
    )
    assert "baseline aggregate metrics file none.json does not exist" in one_line_error(no_metrics)
    for args in (
        [baseline, baseline, "+output_jsonl_fpath=x.jsonl"],
        [baseline],
        [baseline, baseline, "--baseline", baseline],
        ["--baseline", baseline, "--candidates", f"{baseline},{baseline}"],
    ):
        usage = gym("eval", "compare", *args, cwd=workdir)
        assert usage.returncode == 2 and one_line_error(usage).startswith("Error: gym eval compare")
    assert not (workdir / "shifted/compare_report.md").exists(), "a failed comparison writes no report"
