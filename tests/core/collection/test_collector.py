"""Rollout collection: materialisation on real files, then `gym collect` against a real deployment
(example_single_tool_call + simple_agent + openai_model → scripted upstream)."""

import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.cli.flags import UsageError
from nemo_gym.cli.main import COLLECT
from nemo_gym.collection.config import settings_without_effect
from nemo_gym.config.jsonl import drop_torn_tail
from nemo_gym.config_types import BaseServerConfig, ConfigError
from nemo_gym.rollout_collection import (
    CollectionLedger,
    CollectionPaths,
    RolloutCollectionConfig,
    RolloutRunner,
    materialize,
)
from nemo_gym.server_utils import ServerClient
from tests.helpers import REPO_ROOT, RunningDeployment, gym_command, running_deployment
from tests.upstream_script import ScriptedUpstream, fresh_model
from tests.wandb_run_reader import logged_run, logged_table, logged_values

AGENT = "example_single_tool_call_simple_agent"
DEADLINE_S = 5.0


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def read_lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def task(text: str, **extra) -> dict:
    return {"responses_create_params": {"input": [{"role": "user", "content": text}]}, **extra}


def materialized(
    tmp_path: Path, rows: list[dict], sources: dict[str, str] | None = None, **settings
) -> list[dict]:
    """The materialized inputs of `rows`; `sources` resolves a task_source to its agent."""
    source = write_rows(tmp_path / "in.jsonl", rows)
    config = RolloutCollectionConfig(
        input_jsonl_fpath=str(source), output_jsonl_fpath=str(tmp_path / "out.jsonl"), **settings
    )
    paths = CollectionPaths.for_output(config.output_jsonl_fpath)
    ledger = CollectionLedger()
    try:
        materialize(config, source, paths, ledger, (sources or {}).get)
    finally:
        ledger.close()
    return read_lines(paths.materialized)


def indices(rows: list[dict]) -> list[tuple[int, int]]:
    return [(row["_ng_task_index"], row["_ng_rollout_index"]) for row in rows]


# ---- materialisation -------------------------------------------------------------------------------------


def test_repeats_are_adjacent_and_indexed_per_task(tmp_path):
    rows = materialized(tmp_path, [task("a"), task("b")], agent_name="agent", num_repeats=2)
    assert [row["responses_create_params"]["input"][0]["content"] for row in rows] == ["a", "a", "b", "b"]
    assert indices(rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(row["agent_ref"] == {"name": "agent"} for row in rows)
    assert list(rows[0]) == ["responses_create_params", "agent_ref", "_ng_task_index", "_ng_rollout_index"]


def test_interleaved_repeats_run_one_round_of_every_task_at_a_time(tmp_path):
    rows = materialized(
        tmp_path,
        [task("a", agent_ref={"name": "agent"}), task("b", agent_ref={"name": "twice"})],
        num_repeats={"agent": 3, "twice": 2},
        interleave_repeats=True,
    )
    assert indices(rows) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]


def test_byte_identical_rows_share_a_task_and_continue_its_rollout_count(tmp_path):
    rows = materialized(tmp_path, [task("a"), task("b"), task("a")], agent_name="agent", num_repeats=2)
    assert indices(rows) == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3)]


def test_a_given_task_index_and_agent_ref_are_kept(tmp_path):
    rows = materialized(tmp_path, [task("a", _ng_task_index=7, agent_ref={"name": "other"})])
    assert indices(rows) == [(7, 0)]
    assert rows[0]["agent_ref"]["name"] == "other"


def test_agent_name_runs_every_row_on_its_agent_and_names_the_agents_it_replaced(tmp_path, caplog):
    rows = [task("a", agent_ref={"name": "other"}), task("b"), task("c", agent_ref={"name": "other"})]
    with caplog.at_level(logging.WARNING):
        routed = materialized(tmp_path, rows, agent_name="agent", num_repeats=2, interleave_repeats=True)
    assert {row["agent_ref"]["name"] for row in routed} == {"agent"}
    assert "agent_name=agent runs rows whose agent_ref names another agent: other (2 rows)" in caplog.text


def test_agent_map_naming_a_row_s_agent_beats_agent_name(tmp_path):
    rows = [task("a", agent_ref={"name": "old"}), task("b", agent_ref={"name": "other"})]
    routed = materialized(tmp_path, rows, agent_name="agent", agent_map={"old": "new"})
    assert [row["agent_ref"]["name"] for row in routed] == ["new", "agent"]


def test_agent_name_and_a_different_default_route_are_refused(tmp_path):
    with pytest.raises(ValueError, match="agent_name=agent and agent_map._default=elsewhere"):
        materialized(tmp_path, [task("a")], agent_name="agent", agent_map={"_default": "elsewhere"})


def test_rows_without_an_agent_are_listed_in_one_error(tmp_path):
    rows = [task("a", agent_ref={"name": "x"}), task("b"), task("c"), task("d", agent_ref={"name": "x"})]
    with pytest.raises(ConfigError) as error:
        materialized(tmp_path, rows)
    assert "2 row(s) name no agent (lines 2, 3)" in str(error.value)
    assert "+agent_name=" in str(error.value)
    assert not (tmp_path / "out_materialized_inputs.jsonl").exists()


def test_agent_map_fan_out_and_task_source_route_rows_as_nemo_gym_07_does(tmp_path):
    rows = [
        task("old", agent_ref={"name": "old_agent"}),
        task("shared", agent_ref={"name": "a"}),
        task("sourced", task_source="math_rs"),
    ]
    routed = materialized(
        tmp_path,
        rows,
        sources={"math_rs": "math_agent"},
        agent_map={"old_agent": "new_agent"},
        fan_out={"a": ["a", "b"]},
    )
    assert [
        (row["responses_create_params"]["input"][0]["content"], row["agent_ref"]["name"]) for row in routed
    ] == [
        ("old", "new_agent"),
        ("shared", "a"),
        ("shared", "b"),
        ("sourced", "math_agent"),
    ]
    assert indices(routed) == [(0, 0), (1, 0), (1, 1), (2, 0)], "fanned-out copies share the task"
    with pytest.raises(ValidationError, match="must list distinct agents"):
        materialized(tmp_path, rows, fan_out={"a": ["b", "b"]})


def test_num_repeats_per_agent_with_default_and_a_missing_agent(tmp_path):
    rows = [task("a", agent_ref={"name": "x"}), task("b", agent_ref={"name": "y"})]
    repeated = materialized(tmp_path, rows, num_repeats={"x": 3, "_default": 1})
    assert [row["agent_ref"]["name"] for row in repeated] == ["x", "x", "x", "y"]
    with pytest.raises(ConfigError, match="num_repeats has no count for agent.*'y' \\(lines 2\\)"):
        materialized(tmp_path, rows, num_repeats={"x": 3})


def test_overrides_seed_limit_and_prompt_templates(tmp_path):
    rows = materialized(
        tmp_path,
        [task("a", responses_create_params={"input": "a", "temperature": 0.1}), task("b"), task("c")],
        agent_name="agent",
        limit=2,
        num_repeats=2,
        num_repeats_add_seed=True,
        responses_create_params={"temperature": 0.9, "max_output_tokens": 64},
    )
    assert len(rows) == 4
    params = rows[1]["responses_create_params"]
    assert params["temperature"] == 0.9 and params["max_output_tokens"] == 64
    assert [orjson.loads(row["responses_create_params"]["metadata"]["extra_body"]) for row in rows] == [
        {"seed": 0},
        {"seed": 1},
        {"seed": 0},
        {"seed": 1},
    ]
    (tmp_path / "prompt.yaml").write_text("system: Be brief.\nuser: 'Solve {question}'\n")
    prompted = materialized(
        tmp_path, [{"question": "2+2"}], agent_name="agent", prompt_config=str(tmp_path / "prompt.yaml")
    )
    assert prompted[0]["responses_create_params"]["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Solve 2+2"},
    ]
    with pytest.raises(ConfigError, match="in.jsonl:1: the row already has responses_create_params.input"):
        materialized(tmp_path, [task("x")], agent_name="a", prompt_config=str(tmp_path / "prompt.yaml"))
    with pytest.raises(ConfigError, match="in.jsonl:1: prompt_config needs the field 'question'"):
        materialized(tmp_path, [{"other": 1}], agent_name="a", prompt_config=str(tmp_path / "prompt.yaml"))


def test_a_malformed_line_is_named_by_file_and_line(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"responses_create_params": {}}\n\n{"broken": \n')
    config = RolloutCollectionConfig(
        input_jsonl_fpath=str(tmp_path / "in.jsonl"),
        output_jsonl_fpath=str(tmp_path / "o.jsonl"),
        agent_name="a",
    )
    ledger = CollectionLedger()
    with pytest.raises(ConfigError, match=r"in.jsonl:3: not valid JSON"):
        materialize(config, tmp_path / "in.jsonl", CollectionPaths.for_output(tmp_path / "o.jsonl"), ledger)
    ledger.close()


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


@pytest.fixture(scope="module")
def deployment(scripted_upstream: ScriptedUpstream) -> Iterator[tuple[RunningDeployment, str]]:
    model = fresh_model("collect")
    args = [
        "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,"
        "configs/policy_model.yaml]",
        f"+policy_base_url={scripted_upstream.base_url}",
        "+policy_api_key=sk-collect",
        f"+policy_model_name={model}",
        f"+global_http_deadline_s={DEADLINE_S}",
        # One retry of a scripted 500: it then fails within about a second, far from the deadline.
        "++policy_model.responses_api_models.openai_model.max_retries=1",
    ]
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model


def head_port(running: RunningDeployment) -> str:
    return running.head_url.rsplit(":", 1)[1]


def ticket_rows(count: int) -> list[dict]:
    return [task(f"weather please, ticket T{number:03d}") for number in range(count)]


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
    assert {task for task, group in groups.items() if group["num_failed_rollouts"]} == failing | hanging
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


async def test_the_collectors_runner_yields_results_and_failure_records(deployment, scripted_upstream):
    running, model = deployment
    scripted_upstream.clear(model)
    scripted_upstream.script(model, [{"status": 400, "match": "T001"}])
    client = ServerClient.load_from_global_config(_head_config(running))
    helper = RolloutRunner(client, max_in_flight=2)
    rows = [
        {**row, "agent_ref": {"name": AGENT}, "_ng_task_index": index, "_ng_rollout_index": 0}
        for index, row in enumerate(ticket_rows(3))
    ]
    rows.append({**rows[0], "agent_ref": {"name": "no_such_agent"}, "_ng_task_index": 9})
    seen = {}
    async for row, result in helper.run_rows(iter(rows)):
        seen[row["_ng_task_index"]] = result
    assert seen[0]["reward"] == 1.0 and seen[0]["_ng_task_index"] == 0
    assert seen[1]["_ng_failure_class"] == "http_400" and seen[1]["_ng_failure_terminal"] is True
    assert "policy_model" in seen[1]["_ng_failure_message"]
    assert seen[9]["_ng_failure_class"] == "invalid_request"


def _head_config(running: RunningDeployment) -> BaseServerConfig:
    host, port = running.head_url.removeprefix("http://").rsplit(":", 1)
    return BaseServerConfig(host=host, port=int(port))


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
