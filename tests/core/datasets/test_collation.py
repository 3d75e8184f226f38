"""`gym dataset collate` over copies of the two reference environments' example data, run as the CLI."""

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nemo_gym.datasets.metrics import rounded_statistic

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[3]
ENVIRONMENTS = {
    "example_single_tool_call_simple_agent": "example_single_tool_call",
    "example_session_state_mgmt_simple_agent": "example_session_state_mgmt",
}
MODEL_CONFIG = "policy_model:\n  responses_api_models:\n    replay_model: {entrypoint: app.py}\n"
CONFIG_PATHS = "+config_paths=[model.yaml," + ",".join(
    f"resources_servers/{env}/configs/{env}.yaml" for env in ENVIRONMENTS.values()
)


def run_cli(project: Path, *args: str, command: tuple[str, ...] = ("gym", "dataset", "collate")):
    return subprocess.run(
        [str(BIN / command[0]), *command[1:], *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )


def collate(project: Path, *extra: str, config_paths: str = CONFIG_PATHS + "]"):
    return run_cli(project, config_paths, "+output_dirpath=out", "+mode=example_validation", *extra)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder holding copies of both environments' configs and data, so nothing under the repo
    is written."""
    for env in ENVIRONMENTS.values():
        for part in ("configs", "data"):
            shutil.copytree(
                REPO / "resources_servers" / env / part, tmp_path / "resources_servers" / env / part
            )
    (tmp_path / "model.yaml").write_text(MODEL_CONFIG)
    return tmp_path


def data_path(project: Path, env: str, name: str = "example.jsonl") -> Path:
    return project / "resources_servers" / env / "data" / name


def as_nemo_gym_rounds(value: float) -> float:
    """Three significant digits below 1, two decimals from 1 on."""
    return float(f"{value:.3g}") if abs(value) < 1 else round(value, 2)


def summary(values: list[float]) -> dict:
    """The statistics block, computed here with the sample standard deviation."""
    return {
        "Total # non-null values": len(values),
        "Average": as_nemo_gym_rounds(statistics.mean(values)) if values else 0.0,
        "Min": min(values, default=0.0),
        "Max": max(values, default=0.0),
        "Standard deviation": as_nemo_gym_rounds(statistics.stdev(values)) if len(values) > 1 else 0.0,
    }


@pytest.mark.parametrize(
    ("value", "written"),
    [(0.5477, 0.548), (0.012345, 0.0123), (1.4832, 1.48), (30.414, 30.41), (20015.813, 20015.81), (0.0, 0.0)],
)
def test_statistics_are_rounded_as_nemo_gym_writes_them(value, written):
    assert rounded_statistic(value) == written == as_nemo_gym_rounds(value)


def expected_metrics(rows: list[dict]) -> dict:
    params = [row["responses_create_params"] for row in rows]
    expected = {
        "Number of examples": len(rows),
        "Number of tools": summary([len(p["tools"]) for p in params if p.get("tools") is not None]),
        "Json-dumped number of words (proxy for token count)": summary(
            [len(json.dumps(p).split()) for p in params]
        ),
        "Number of turns": summary([sum(m["role"] == "user" for m in p["input"]) for p in params]),
        "Temperature": summary([p["temperature"] for p in params if "temperature" in p]),
    }
    for key in {key for row in rows for key, value in row.items() if isinstance(value, int)}:
        expected[key] = summary([row[key] for row in rows if key in row])
    return expected


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_metrics_match_statistics_computed_independently(project):
    result = collate(project)
    assert result.returncode == 0, result.stderr
    merged = read_rows(project / "out" / "example.jsonl")
    all_rows = []
    for agent, env in ENVIRONMENTS.items():
        rows = read_rows(data_path(project, env))
        all_rows += rows
        metrics = json.loads(data_path(project, env, "example_metrics.json").read_text())
        for key, value in expected_metrics(rows).items():
            assert metrics[key] == pytest.approx(value), key
        assert metrics["name"] == "example" and metrics["Key counts"]["responses_create_params"] == 5
        stamped = [
            row for row in merged if row["agent_ref"] == {"type": "responses_api_agents", "name": agent}
        ]
        assert {row["task_source"] for row in stamped} == {agent}, (
            "NeMo Gym 0.7's stamp: the declaring instance"
        )
        assert [
            {k: v for k, v in row.items() if k not in ("agent_ref", "task_source")} for row in stamped
        ] == rows
    type_metrics = json.loads((project / "out" / "example_metrics.json").read_text())
    assert type_metrics["Number of examples"] == len(merged) == 10
    assert type_metrics["Number of tools"] == pytest.approx(expected_metrics(all_rows)["Number of tools"])


def test_a_missing_metrics_file_is_written_and_then_guards_the_data(project):
    stored = {env: data_path(project, env, "example_metrics.json") for env in ENVIRONMENTS.values()}
    for path in stored.values():
        path.unlink()
    result = collate(project)
    assert result.returncode == 0, result.stderr
    for env, path in stored.items():
        shipped = json.loads((REPO / "resources_servers" / env / "data" / "example_metrics.json").read_text())
        written = json.loads(path.read_text())
        assert {key: written.get(key) for key in shipped} == shipped, env  # the shipped file, plus new keys
        assert f"Wrote {path} (it was missing)" in result.stdout

    data = data_path(project, "example_session_state_mgmt")
    data.write_text(data.read_text().replace('"initial_count": 3', '"initial_count": 4', 1))
    result = collate(project)
    assert result.returncode == 1 and "example_metrics.json differs" in result.stderr


def test_changed_data_is_a_conflict_unless_overwrite_is_set(project):
    assert collate(project).returncode == 0
    data = data_path(project, "example_single_tool_call")
    rows = read_rows(data)
    rows[0]["responses_create_params"]["input"][-1]["content"] += " and also in the bay area tomorrow"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))

    result = collate(project)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert "example_metrics.json differs" in result.stderr
    conflict = data_path(project, "example_single_tool_call", "example_metrics_conflict.json")
    assert conflict.is_file()

    assert collate(project, "+overwrite_metrics_conflicts=true").returncode == 0
    assert not conflict.exists()
    metrics = json.loads(data_path(project, "example_single_tool_call", "example_metrics.json").read_text())
    words = metrics["Json-dumped number of words (proxy for token count)"]
    assert words == pytest.approx(
        expected_metrics(rows)["Json-dumped number of words (proxy for token count)"]
    )
    assert collate(project).returncode == 0


def test_malformed_line_is_named_by_file_and_line(project):
    data = data_path(project, "example_session_state_mgmt")
    lines = data.read_text().splitlines()
    lines[2] = lines[2][:-1]
    data.write_text("\n".join(lines) + "\n")
    result = collate(project)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{data}:3: not valid JSON" in result.stderr


def test_row_without_run_request_is_offending(project):
    data = data_path(project, "example_session_state_mgmt")
    lines = data.read_text().splitlines()
    lines[1] = json.dumps({"initial_count": 1})
    data.write_text("\n".join(lines) + "\n")
    result = collate(project)
    assert result.returncode == 1
    assert f"{data}:2: 1 line(s) are not run requests" in result.stderr


def test_example_dataset_needs_exactly_five_rows(project):
    data = data_path(project, "example_single_tool_call")
    data.write_text("".join(data.read_text().splitlines(keepends=True)[:4]))
    result = collate(project)
    assert result.returncode == 1 and "exactly 5 rows, found 4" in result.stderr


def test_train_preparation_repeats_lines_through_the_legacy_alias(project):
    source = data_path(project, "example_single_tool_call", "weather.jsonl")
    shutil.copy(data_path(project, "example_single_tool_call"), source)
    (project / "train.yaml").write_text(
        "trainer_agent:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        "      resources_server: {type: resources_servers, name: example_single_tool_call}\n"
        "      model_server: {type: responses_api_models, name: policy_model}\n"
        f"      datasets:\n        - {{name: weather, type: train, license: MIT, num_repeats: 3, jsonl_fpath: {source}}}\n"
    )
    config_paths = CONFIG_PATHS + ",train.yaml]"
    result = run_cli(project, config_paths, "+output_dirpath=out", command=("ng_prepare_data",))
    assert result.returncode == 0, result.stderr
    rows = read_rows(source)
    merged = read_rows(project / "out" / "train.jsonl")
    assert [{k: v for k, v in row.items() if k not in ("agent_ref", "task_source")} for row in merged] == [
        row for row in rows for _ in range(3)
    ]
    assert {(row["agent_ref"]["name"], row["task_source"]) for row in merged} == {
        ("trainer_agent", "trainer_agent")
    }
    metrics = json.loads(data_path(project, "example_single_tool_call", "weather_metrics.json").read_text())
    assert metrics["num_repeats"] == 3 and metrics["Number of examples"] == 15
    assert metrics["Number of tools"] == expected_metrics(rows * 3)["Number of tools"]
    assert not (project / "out" / "example.jsonl").exists()


BASE_CONFIG_FLAGS = (
    "--config",
    "model.yaml",
    "--config",
    "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml",
)


def agent_config(agent: str, dataset: str) -> str:
    """An agent instance serving example_single_tool_call with one `datasets:` entry (a YAML flow map)."""
    return (
        f"{agent}:\n  responses_api_agents:\n    simple_agent:\n      entrypoint: app.py\n"
        "      resources_server: {type: resources_servers, name: example_single_tool_call}\n"
        "      model_server: {type: responses_api_models, name: policy_model}\n"
        f"      datasets:\n        - {dataset}\n"
    )


def test_text_and_list_fields_get_their_own_statistics(project):
    rows = read_rows(data_path(project, "example_single_tool_call"))
    labels = ["sun", "rain", "sun", "snow", "sun"]
    tags = [["a", "b"], ["b"], [], ["c", "a", "a"], ["d"]]
    scores = [[1, 2], [3], [], [4.5], [10, 0]]
    for row, label, tag_list, score_list in zip(rows, labels, tags, scores, strict=True):
        row.update(label=label, tags=tag_list, scores=score_list)
    source = project / "fields.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (project / "train.yaml").write_text(
        agent_config(
            "trainer", f"{{name: fields, type: train, license: MIT, num_repeats: 2, jsonl_fpath: {source}}}"
        )
    )
    result = run_cli(project, *BASE_CONFIG_FLAGS, "--config", "train.yaml", "--output-dir", "out")
    assert result.returncode == 0, result.stderr
    metrics = json.loads((project / "fields_metrics.json").read_text())
    flat_tags = [tag for tag_list in tags for tag in tag_list]
    assert metrics["label"] == {"unique_count": len(set(labels)), "total_count": 2 * len(labels)}
    assert metrics["tags"] == {"unique_count": len(set(flat_tags)), "total_count": 2 * len(flat_tags)}
    flat_scores = [score for score_list in scores for score in score_list]
    assert metrics["scores"] == pytest.approx(summary(flat_scores * 2))


def test_benchmark_prompt_config_builds_the_input_and_prepare_script_writes_missing_data(project):
    raw = [
        {"question": "What is 2+2?", "expected_answer": "4"},
        {"question": "Name a colour.", "expected_answer": "red"},
    ]
    (project / "prepare.py").write_text(
        "import json\nfrom pathlib import Path\n\n"
        "def prepare():\n"
        "    path = Path('bench/qa.jsonl')\n"
        "    path.parent.mkdir(exist_ok=True)\n"
        f"    rows = {raw!r}\n"
        "    path.write_text(''.join(json.dumps(row) + '\\n' for row in rows))\n"
        "    return str(path)\n"
    )
    (project / "prompt.yaml").write_text("system: Answer briefly.\nuser: 'Question: {question}'\n")
    (project / "bench.yaml").write_text(
        agent_config(
            "bench_agent",
            "{name: qa, type: benchmark, jsonl_fpath: bench/qa.jsonl, prepare_script: prepare.py, "
            "prompt_config: prompt.yaml}",
        )
    )
    args = (*BASE_CONFIG_FLAGS, "--config", "bench.yaml", "--output-dir", "out")
    without_download = run_cli(project, *args)
    assert without_download.returncode == 1 and "bench/qa.jsonl" in without_download.stderr

    result = run_cli(project, *args, "--download")
    assert result.returncode == 0, result.stderr
    merged = read_rows(project / "out" / "benchmark.jsonl")
    assert [row["responses_create_params"]["input"] for row in merged] == [
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": f"Question: {row['question']}"},
        ]
        for row in raw
    ]
    assert [row["expected_answer"] for row in merged] == ["4", "red"]
    assert {row["agent_ref"]["name"] for row in merged} == {"bench_agent"}


def test_a_missing_train_file_without_a_source_cannot_be_downloaded(project):
    (project / "train.yaml").write_text(
        agent_config("trainer", "{name: gone, type: train, license: MIT, jsonl_fpath: gone.jsonl}")
    )
    result = run_cli(
        project, *BASE_CONFIG_FLAGS, "--config", "train.yaml", "--output-dir", "out", "--download"
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "gone.jsonl is missing and the dataset has no `source`" in result.stderr


def test_a_resources_server_may_declare_datasets_and_its_rows_name_it_as_task_source(project):
    """NeMo Gym 0.7: `datasets:` on a resources server; its rows carry `task_source: <that server>` and,
    when one agent serves it, that agent's `agent_ref`."""
    env = "example_single_tool_call"
    config_path = project / "resources_servers" / env / "configs" / f"{env}.yaml"
    config = yaml.safe_load(config_path.read_text())
    agent_block = config[f"{env}_simple_agent"]["responses_api_agents"]["simple_agent"]
    config[env]["resources_servers"][env]["datasets"] = agent_block.pop("datasets")
    config_path.write_text(yaml.safe_dump(config))
    result = collate(project)
    assert result.returncode == 0, result.stderr
    merged = read_rows(project / "out" / "example.jsonl")
    from_server = [row for row in merged if row["task_source"] == env]
    assert len(from_server) == 5
    assert {row["agent_ref"]["name"] for row in from_server} == {f"{env}_simple_agent"}


def test_rows_are_checked_against_the_servers_task_data_model(project):
    """NeMo Gym 0.7's task_data_validation: `auto` is `error` in example_validation mode."""
    folder = project / "resources_servers" / "example_single_tool_call"
    (folder / "task_data.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n\n"
        "class TaskData(BaseModel):\n    model_config = ConfigDict(extra='allow')\n    difficulty: int\n"
    )
    refused = collate(project)
    assert refused.returncode == 1
    error = refused.stderr.strip().splitlines()[-1]
    assert (
        "example_single_tool_call/data/example.jsonl:1: not a TaskData row" in error and "difficulty" in error
    )
    warned = collate(project, "+task_data_validation=warn")
    assert warned.returncode == 0, warned.stderr
    assert "5 row(s) do not match TaskData" in warned.stderr
    assert collate(project, "+task_data_validation=off").returncode == 0
    (folder / "task_data.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n\n"
        "class TaskData(BaseModel):\n    model_config = ConfigDict(extra='allow')\n    responses_create_params: dict\n"
    )
    assert collate(project).returncode == 0


def test_a_taskset_dataset_is_written_as_materialized_tasks(project):
    """NeMo Gym 0.7: a dataset with `taskset` is collated into {task_id: {taskset, task_id}, task_input} rows,
    which environment servers run."""
    env = "example_single_tool_call"
    config_path = project / "resources_servers" / env / "configs" / f"{env}.yaml"
    config = yaml.safe_load(config_path.read_text())
    dataset = config[f"{env}_simple_agent"]["responses_api_agents"]["simple_agent"]["datasets"][0]
    dataset["taskset"] = "weather"
    config_path.write_text(yaml.safe_dump(config))
    result = collate(project)
    assert result.returncode == 0, result.stderr
    rows = read_rows(data_path(project, env))
    tasks = [row for row in read_rows(project / "out" / "example.jsonl") if "task_input" in row]
    assert [task["task_id"] for task in tasks] == [
        {"taskset": "weather", "task_id": str(i)} for i in range(5)
    ]
    assert [task["task_input"] for task in tasks] == rows
    assert not any("agent_ref" in task or "task_source" in task for task in tasks)
