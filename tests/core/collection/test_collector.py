"""Rollout collection: `gym collect` against a real deployment (example_single_tool_call + simple_agent +
openai_model → scripted upstream); materialisation has its own tests (test_materialize.py)."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from nemo_gym.cli.flags import UsageError
from nemo_gym.cli.main import COLLECT
from nemo_gym.collection.config import settings_without_effect
from nemo_gym.config.jsonl import drop_torn_tail
from tests.collection_deployment import ticket_rows
from tests.helpers import REPO_ROOT, RunningDeployment, gym_command
from tests.wandb_run_reader import logged_run, logged_table, logged_values

AGENT = "example_single_tool_call_simple_agent"


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def read_lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def indices(rows: list[dict]) -> list[tuple[int, int]]:
    return [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows]


def test_a_torn_last_line_is_cut(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    drop_torn_tail(path)
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    drop_torn_tail(path)
    assert path.read_bytes() == b'{"a": 1}\n{"b": 2}\n'


def test_flags_become_overrides():
    args = ["-a", "agent", "--input=in.jsonl", "--output", "my out.jsonl", "--resume", "--temperature", "0.5"]
    assert COLLECT.parse([*args, "+limit=3"]).overrides == [
        "++agent_name=agent",
        "++input_jsonl_fpath=in.jsonl",
        "++output_jsonl_fpath='my out.jsonl'",
        "++responses_create_params.temperature=0.5",
        "++resume_from_cache=true",
        "+limit=3",
    ]
    with pytest.raises(UsageError, match="unknown option --agnet; did you mean --agent"):
        COLLECT.parse(["--agnet", "x"])


# ---- against a deployment --------------------------------------------------------------------------------


def head_port(running: RunningDeployment) -> str:
    return running.head_url.rsplit(":", 1)[1]


def run_collect(running: RunningDeployment, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        gym_command("collect", f"++head_server.port={head_port(running)}", "-a", AGENT, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )


def test_failing_and_hanging_rows_are_recorded_and_collection_finishes(
    deployment, scripted_upstream, tmp_path
):
    running, model = deployment
    failing = {5, 15, 25, 35, 45}  # 10 % of 50
    hanging = {30}  # 2 %
    scripted_upstream.clear(model)
    scripted_upstream.script(
        model,
        [{"status": 500, "match": f"T{n:03d}"} for n in failing] + [{"hang": True, "match": "T030"}],
    )
    source = write_rows(tmp_path / "tickets.jsonl", ticket_rows(50))
    output = tmp_path / "out" / "rollouts.jsonl"  # the folder does not exist yet
    result = run_collect(running, "-i", str(source), "-o", str(output), "--concurrency", "8")
    assert result.returncode == 1, result.stdout + result.stderr  # some rollouts have no result

    results = read_lines(output)
    failures = read_lines(tmp_path / "out" / "rollouts_failures.jsonl")
    assert sorted(row["_ng_task_index"] for row in results) == sorted(set(range(50)) - failing - hanging)
    assert all(row["reward"] == 1.0 and row["agent_ref"]["name"] == AGENT for row in results)
    classes = {row["_ng_task_index"]: row["_ng_failure_class"] for row in failures}
    assert classes == {**{n: "http_500" for n in failing}, 30: "timeout"}
    assert all(row["_ng_failure_attempt"] == 1 and row["_ng_failure_message"] for row in failures)
    assert len(read_lines(tmp_path / "out" / "rollouts_materialized_inputs.jsonl")) == 50

    [metrics] = orjson.loads((tmp_path / "out" / "rollouts_aggregate_metrics.json").read_bytes())
    assert metrics["agent_ref"] == {"name": AGENT}
    agent_metrics = metrics["agent_metrics"]
    assert agent_metrics["num_failed_rollouts"] == 6
    assert agent_metrics["num_failed_rollouts/http_500"] == 5
    assert agent_metrics["num_failed_rollouts/timeout"] == 1
    assert agent_metrics["mean/reward"] == 1.0  # failures are not zeros in the statistics
    groups = {group["_ng_task_index"]: group for group in metrics["group_level_metrics"]}
    assert len(groups) == 50
    assert {index for index, group in groups.items() if group["num_failed_rollouts"]} == failing | hanging
    assert groups[30]["num_rollouts"] == 0 and groups[0]["num_rollouts"] == 1

    assert "44 succeeded, 6 failed" in result.stdout
    progress = [line for line in result.stderr.splitlines() if line.startswith("collect: ")]
    assert progress[-1].startswith("collect: 100% (50/50)") and progress[-1].endswith("failed 6")
    assert "mean reward 1.000" in progress[-1] and "rollouts/s" in progress[-1]
    assert "Failures by class: http_500 5, timeout 1" in result.stdout
    assert f"Results: {output}" in result.stdout


def test_kill_9_then_resume_runs_exactly_the_missing_rollouts(deployment, scripted_upstream, tmp_path):
    running, model = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"delay_s": 0.3, "match": "ticket"}])
    source = write_rows(tmp_path / "tickets.jsonl", ticket_rows(20))
    output = tmp_path / "rollouts.jsonl"
    process = subprocess.Popen(
        gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", AGENT, "-i", str(source),
            "-o", str(output), "--num-repeats", "2", "--concurrency", "4",
        ),
        cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not output.exists() or output.read_bytes().count(b"\n") < 6):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    done_before = {(row["_ng_task_index"], row["_ng_rollout_index"]) for row in read_lines(output)}
    assert 6 <= len(done_before) < 40
    with output.open("ab") as file:  # as if the kill had landed in the middle of a write
        file.write(b'{"_ng_task_index": 19, "_ng_rollout_index": 1, "reward": 1.0, "respo')

    scripted_upstream.clear(model)
    result = run_collect(running, "-i", str(source), "-o", str(output), "--num-repeats", "2", "--resume")
    assert result.returncode == 0, result.stdout + result.stderr
    keys = [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in read_lines(output)]
    assert Counter(keys) == Counter({(task, rollout): 1 for task in range(20) for rollout in range(2)})
    assert f"{len(done_before)} already done before this run" in result.stdout
    assert f"Ran {40 - len(done_before)} rollout(s)" in result.stdout


def test_wandb_offline_run_holds_the_metrics_and_the_rollouts_table(deployment, scripted_upstream, tmp_path):
    running, model = deployment
    scripted_upstream.clear(model)
    source = write_rows(tmp_path / "tickets.jsonl", ticket_rows(5))
    secret = "wandb-key-never-in-clear"
    result = subprocess.run(
        gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", AGENT, "-i", str(source),
            "-o", str(tmp_path / "r.jsonl"), "+wandb_project=gym-tests", "+wandb_name=collect-offline",
            f"+wandb_api_key={secret}",
        ),
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path)},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [run_dir] = (tmp_path / "wandb").glob("offline-run-*")
    project, name, config = logged_run(run_dir)
    assert (project, name) == ("gym-tests", "collect-offline")
    assert config["wandb_api_key"] == "****" and config["deployment"]["policy_api_key"] == "****"
    values = logged_values(run_dir)
    assert values[f"{AGENT}/mean/reward"] == 1.0
    assert values[f"key_metrics/{AGENT}/mean/reward"] == 1.0
    assert values[f"{AGENT}/num_failed_rollouts"] == 0
    table = logged_table(run_dir, "rollouts")
    assert table["columns"] == ["task", "rollout", "agent", "reward", "final_text"]
    assert sorted(row[0] for row in table["data"]) == [0, 1, 2, 3, 4]
    assert {(row[2], row[3], row[4]) for row in table["data"]} == {(AGENT, 1.0, "ok")}
    leaked = [path for path in tmp_path.rglob("*") if path.is_file() and secret.encode() in path.read_bytes()]
    assert leaked == [] and secret not in result.stdout + result.stderr


def test_without_exporter_settings_neither_wandb_nor_mlflow_is_imported():
    probe = (
        "import sys\n"
        "from omegaconf import OmegaConf\n"
        "from nemo_gym.exporters import setup_exporters\n"
        "cfg = OmegaConf.create({'wandb_project': 'p', 'mlflow_tracking_uri': 'file:///nowhere'})\n"
        "assert setup_exporters(cfg) == []\n"
        "assert 'wandb' not in sys.modules and 'mlflow' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=REPO_ROOT, timeout=60)


def test_eval_aggregate_merges_shards_by_task_and_counts_their_failures(
    deployment, scripted_upstream, tmp_path
):
    running, model = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"status": 422, "match": "T007"}])
    rows = [{**row, "_ng_task_index": index} for index, row in enumerate(ticket_rows(10))]
    for shard, part in enumerate((rows[5:], rows[:5])):  # the second shard holds the lower task indices
        source = write_rows(tmp_path / f"in_{shard}.jsonl", part)
        out = tmp_path / "out" / f"shard_{shard}.jsonl"
        run_collect(running, "-i", str(source), "-o", str(out), "--num-repeats", "2", "--no-aggregation")
    assert not list((tmp_path / "out").glob("*_aggregate_metrics.json"))

    merged = tmp_path / "merged" / "all.jsonl"
    result = subprocess.run(
        gym_command(
            "eval", "aggregate", f"++head_server.port={head_port(running)}",
            f"+input_glob={tmp_path}/out/shard_*.jsonl", f"+output_jsonl_fpath={merged}", "+merge_shards=true",
        ),
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Aggregated 18 result(s) from 2 file(s)." in result.stdout
    keys = indices(read_lines(merged))
    assert keys == sorted(keys) and len(keys) == 18 and (7, 0) not in keys
    [metrics] = orjson.loads((tmp_path / "merged" / "all_aggregate_metrics.json").read_bytes())
    assert metrics["agent_metrics"]["num_failed_rollouts/http_422"] == 2
    assert metrics["key_metrics"]["num_failed_rollouts"] == 2
    assert metrics["agent_metrics"]["mean/reward"] == 1.0

    duplicate = subprocess.run(
        gym_command(
            "eval", "aggregate", f"++head_server.port={head_port(running)}",
            f"+input_glob='{tmp_path}/out/shard_0.jsonl,{merged}'", f"+output_jsonl_fpath={tmp_path}/x.jsonl",
        ),
        capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
    )  # fmt: skip
    assert duplicate.returncode == 1
    assert "appears in more than one line" in duplicate.stderr and "Traceback" not in duplicate.stderr


def test_nemo_gym_07_settings_gym_does_not_act_on_are_named():
    lines = settings_without_effect(
        {"dispatch_longest_first": True, "require_complete": True, "skills": None}
    )
    assert lines == [
        "dispatch_longest_first has no effect in Gym: a resumed collection runs the missing rollouts in file order"
    ]


def test_a_spent_dispatch_budget_starts_nothing_and_a_resume_runs_the_rest_scoring_chosen_failures_zero(
    deployment, scripted_upstream, tmp_path
):
    running, model = deployment
    scripted_upstream.clear(model)
    source = write_rows(tmp_path / "tickets.jsonl", ticket_rows(4))
    output = tmp_path / "rollouts.jsonl"
    args = ("-i", str(source), "-o", str(output))
    # A margin longer than the budget: not even the first rollout may start.
    unstarted = run_collect(
        running, *args, "+dispatch_budget_s=0", "+drain_margin_s=60", "+require_complete=true",
        "+count_missing_rollouts_as_zero=true",
    )  # fmt: skip
    assert unstarted.returncode == 1, unstarted.stdout + unstarted.stderr
    assert "4 rollout(s) not started: the dispatch budget ran out" in unstarted.stdout
    assert "EVAL FAILED: 0/4 rollouts completed" in unstarted.stdout
    assert output.read_bytes() == b"" and (tmp_path / "rollouts_failures.jsonl").read_bytes() == b""
    [metrics] = orjson.loads((tmp_path / "rollouts_aggregate_metrics.json").read_bytes())
    assert (
        metrics["agent_metrics"]["coverage/imputed"] == 4 and metrics["agent_metrics"]["mean/reward"] == 0.0
    )

    scripted_upstream.script(model, [{"status": 500, "match": "T001"}])
    resumed = run_collect(running, *args, "--resume", "+count_failure_classes_as_zero=[http_500]")
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr  # T001 has no result
    assert "3 succeeded, 1 failed" in resumed.stdout and "not started" not in resumed.stdout
    [metrics] = orjson.loads((tmp_path / "rollouts_aggregate_metrics.json").read_bytes())
    assert metrics["agent_metrics"]["coverage/imputed"] == 1
    assert metrics["agent_metrics"]["mean/reward"] == 0.75  # the http_500 rollout scored 0


def test_a_custom_collection_driver_replaces_gyms(deployment, tmp_path):
    running, _ = deployment
    (tmp_path / "my_driver.py").write_text(
        "from pathlib import Path\n\n"
        "async def drive(config, global_config):\n"
        "    Path(config.output_jsonl_fpath).write_text(config.input_jsonl_fpath + ' ' + global_config.my_tag)\n"
        "\n"
        "def not_async(config, global_config):\n"
        "    pass\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    output = tmp_path / "out.txt"
    source = write_rows(tmp_path / "tasks.jsonl", ticket_rows(1))

    def collect(driver: str) -> subprocess.CompletedProcess:
        command = gym_command(
            "collect", f"++head_server.port={head_port(running)}", "-a", AGENT, "-i", str(source),
            "-o", str(output), f"+rollout_collection_driver={driver}", "+my_tag=tagged",
        )  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT, env=env)

    assert collect("my_driver:drive").returncode == 0
    assert output.read_text() == f"{source} tagged"
    for driver, problem in [
        ("my_driver", "write it as 'module.path:function'"),
        ("my_driver:missing", "my_driver has no missing"),
        ("my_driver:not_async", "must be an async function"),
    ]:
        refused = collect(driver)
        assert refused.returncode != 0 and problem in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
