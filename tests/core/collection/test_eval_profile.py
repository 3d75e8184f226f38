import json
import math
from pathlib import Path

import pytest

from nemo_gym.collection import eval_profile
from nemo_gym.collection.eval_profile import run_profile
from nemo_gym.config_types import ConfigError, ConfigPathNotFoundError
from nemo_gym.global_config import install_root


def input_row(task: int, rollout: int, agent: str = "math") -> dict:
    return {
        "responses_create_params": {"input": f"question {task}"},
        "expected_answer": str(task),
        "agent_ref": {"name": agent},
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
    }


def result(
    task: int, rollout: int, reward: float, output_tokens: int | None = None, agent: str = "math"
) -> dict:
    """A results line as collection writes it: the whole `/run` answer plus the stamped indices."""
    usage = {"output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0}}
    return {
        "responses_create_params": {"input": f"question {task}"},
        "response": {
            "output": [{"type": "message", "content": "..."}],
            "usage": usage if output_tokens else None,
        },
        "reward": reward,
        "extracted_answer": "4",
        "_ng_task_index": task,
        "_ng_rollout_index": rollout,
        "agent_ref": {"name": agent},
    }


def failure(task: int, rollout: int, failure_class: str) -> dict:
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, "_ng_failure_class": failure_class}


INPUTS = [
    input_row(0, 0),
    input_row(0, 1),
    input_row(1, 0),
    input_row(1, 1),
    input_row(2, 0, agent="weather"),
]
RESULTS = [  # completion order
    result(1, 1, 0.0, 5),
    result(0, 0, 1.0, 10),
    result(2, 0, 0.5, agent="weather"),
    failure(1, 0, "http_500"),
    result(0, 1, 0.0, 20),
]


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no env.yaml of the developer's checkout leaks into the config
    return tmp_path


def profile(inputs: Path, rollouts: Path, *extra: str) -> int:
    return run_profile([f"+inputs_jsonl_fpath={inputs}", f"+rollouts_jsonl_fpath={rollouts}", *extra])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_profile_groups_per_task_and_agent_with_exact_numbers(run_dir: Path, capsys):
    inputs = write_jsonl(run_dir / "r_materialized_inputs.jsonl", INPUTS)
    rollouts = write_jsonl(run_dir / "r.jsonl", RESULTS)
    assert profile(inputs, rollouts) == 0

    groups = read_jsonl(run_dir / "r_reward_profiling.jsonl")
    assert [(group["agent_ref"]["name"], group["_ng_task_index"]) for group in groups] == [
        ("math", 0),
        ("math", 1),
        ("weather", 2),
    ]
    task0, task1, task2 = groups
    assert task0["sample"] == INPUTS[0]
    assert task1["sample"] == INPUTS[2]
    assert (task0["mean/reward"], task0["median/reward"]) == (0.5, 0.5)
    assert math.isclose(task0["std/reward"], math.sqrt(0.5))
    assert (task0["mean/output_tokens"], task0["max/output_tokens"]) == (15.0, 20.0)
    assert task0["rollout_infos"] == [
        {
            "rollout_id": "0:0",
            "_ng_task_index": 0,
            "_ng_rollout_index": 0,
            "reward": 1.0,
            "output_tokens": 10,
        },
        {
            "rollout_id": "0:1",
            "_ng_task_index": 0,
            "_ng_rollout_index": 1,
            "reward": 0.0,
            "output_tokens": 20,
        },
    ]
    assert (task0["num_rollouts"], task0["expected_num_rollouts"], task0["missing_num_rollouts"]) == (2, 2, 0)
    assert (task0["reward_profile_completion_pct"], task0["num_failed_rollouts"]) == (100.0, 0)
    assert (task1["num_rollouts"], task1["missing_num_rollouts"], task1["num_failed_rollouts"]) == (1, 1, 1)
    assert (task1["reward_profile_completion_pct"], task1["std/reward"]) == (50.0, 0.0)
    assert task2["mean/reward"] == 0.5
    assert "mean/output_tokens" not in task2

    math_agent, weather_agent = json.loads((run_dir / "r_agent_metrics.json").read_text())
    assert math_agent["agent_ref"] == {"name": "math"}
    assert (math_agent["num_tasks"], math_agent["num_rollouts"], math_agent["expected_num_rollouts"]) == (
        2,
        3,
        4,
    )
    assert (math_agent["missing_num_rollouts"], math_agent["reward_profile_completion_pct"]) == (1, 75.0)
    metrics = math_agent["agent_metrics"]
    assert math.isclose(metrics["mean/reward"], 1 / 3)
    assert metrics["mean/output_tokens"] == pytest.approx(35 / 3)
    assert (metrics["num_failed_rollouts"], metrics["num_failed_rollouts/http_500"]) == (1, 1)
    assert not any(key.endswith(("_ng_task_index", "_ng_rollout_index")) for key in metrics)
    assert math_agent["key_metrics"] == {
        key: value for key, value in metrics.items() if key.startswith("mean/")
    }
    assert weather_agent["agent_metrics"]["std/reward"] == 0.0
    assert weather_agent["agent_metrics"]["num_failed_rollouts"] == 0

    printed = capsys.readouterr().out
    assert "math: 3/4 rollouts profiled (75.0%), 1 failed, mean/reward 0.3333" in printed
    assert "weather: 1/1 rollouts profiled (100.0%), 0 failed" in printed
    assert str(run_dir / "r_reward_profiling.jsonl") in printed
    assert sorted(path.name for path in run_dir.iterdir()) == [
        "r.jsonl",
        "r_agent_metrics.json",
        "r_materialized_inputs.jsonl",
        "r_reward_profiling.jsonl",
    ]


def test_relative_paths_resolve_against_the_current_directory_and_outputs_are_replaced(run_dir: Path):
    write_jsonl(run_dir / "in.jsonl", INPUTS)
    write_jsonl(run_dir / "out.jsonl", RESULTS)
    (run_dir / "out_reward_profiling.jsonl").write_text("stale\n")
    assert profile(Path("in.jsonl"), Path("out.jsonl")) == 0
    assert len(read_jsonl(run_dir / "out_reward_profiling.jsonl")) == 3


def test_missing_results_are_an_error_unless_partial_rollouts_are_allowed(run_dir: Path):
    inputs = write_jsonl(run_dir / "in.jsonl", INPUTS)
    rollouts = write_jsonl(run_dir / "out.jsonl", RESULTS[:3])  # task 1 rollout 0 and task 0 rollout 1 absent
    with pytest.raises(ConfigError) as raised:
        profile(inputs, rollouts)
    assert str(raised.value) == (
        f"{rollouts}: 2 of 5 rollouts have no result (first: {inputs}:2); "
        "finish the run (resume_from_cache=true) or pass +allow_partial_rollouts=true"
    )
    assert not (run_dir / "out_reward_profiling.jsonl").exists()

    assert profile(inputs, rollouts, "+allow_partial_rollouts=true") == 0
    task0, task1, _ = read_jsonl(run_dir / "out_reward_profiling.jsonl")
    assert (task0["num_rollouts"], task0["missing_num_rollouts"], task0["num_failed_rollouts"]) == (1, 1, 0)
    assert (task1["num_rollouts"], task1["missing_num_rollouts"]) == (1, 1)


def test_a_task_without_any_result_still_gets_its_line(run_dir: Path):
    inputs = write_jsonl(run_dir / "in.jsonl", INPUTS)
    rollouts = write_jsonl(run_dir / "out.jsonl", [result(2, 0, 1.0, agent="weather")])
    assert profile(inputs, rollouts, "+allow_partial_rollouts=true") == 0
    task0 = read_jsonl(run_dir / "out_reward_profiling.jsonl")[0]
    assert (task0["num_rollouts"], task0["reward_profile_completion_pct"], task0["rollout_infos"]) == (
        0,
        0.0,
        [],
    )
    assert not any(key.startswith("mean/") for key in task0)


@pytest.mark.parametrize(
    "inputs, results, message",
    [
        (
            [*INPUTS, input_row(0, 0)],
            RESULTS,
            "{inputs}:6: task 0 rollout 0 is listed again (first at line 1); "
            "re-materialize the inputs or delete the repeated line",
        ),
        (
            INPUTS,
            [*RESULTS, result(9, 0, 1.0)],
            "{rollouts}:6: task 9 rollout 0 has no row in {inputs}; pass the materialized inputs of the same run",
        ),
        (
            INPUTS,
            [*RESULTS, result(0, 0, 0.0)],
            "{rollouts}:6: second result for task 0 rollout 0 (first at line 2); delete one of the two lines",
        ),
        (
            INPUTS,
            [RESULTS[0], "{not json"],
            "{rollouts}:2: not valid JSON (unexpected character, expected a string key: line 1 column 2 "
            "(char 1)); fix or remove the line",
        ),
        (
            INPUTS,
            ["", "[1, 2]"],
            "{rollouts}:2: each line must be a JSON object, got list",
        ),
        (
            INPUTS,
            [{**RESULTS[0], "_ng_rollout_index": "1"}],
            "{rollouts}:1: _ng_rollout_index must be an integer, got '1'; "
            "use files written by rollout collection, which stamp both indices",
        ),
        (
            [INPUTS[0], {**INPUTS[1], "_ng_task_index": None}],
            RESULTS,
            "{inputs}:2: _ng_task_index must be an integer, got None; "
            "use files written by rollout collection, which stamp both indices",
        ),
        (
            [{key: value for key, value in INPUTS[0].items() if key != "agent_ref"}],
            RESULTS,
            "{inputs}:1: no agent_ref.name; pass the materialized inputs file "
            "(<output stem>_materialized_inputs.jsonl), where every row has one",
        ),
    ],
    ids=[
        "duplicate-input",
        "result-without-input",
        "duplicate-result",
        "bad-json",
        "not-object",
        "bad-index",
        "bad-input-index",
        "no-agent",
    ],
)
def test_each_data_error_names_file_line_and_fix(run_dir: Path, inputs, results, message):
    inputs_path = write_jsonl(run_dir / "in.jsonl", inputs)
    rollouts_path = write_jsonl(run_dir / "out.jsonl", results)
    with pytest.raises(ConfigError) as raised:
        profile(inputs_path, rollouts_path)
    assert str(raised.value) == message.format(inputs=inputs_path, rollouts=rollouts_path)
    assert "\n" not in str(raised.value)
    assert sorted(path.name for path in run_dir.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_failure_records_may_repeat_and_do_not_count_as_results(run_dir: Path):
    inputs = write_jsonl(run_dir / "in.jsonl", INPUTS)
    rollouts = write_jsonl(
        run_dir / "out.jsonl", [*RESULTS, failure(1, 0, "timeout"), failure(0, 0, "timeout")]
    )  # a failed attempt before (0, 0) succeeded is still counted
    assert profile(inputs, rollouts) == 0
    metrics = json.loads((run_dir / "out_agent_metrics.json").read_text())[0]["agent_metrics"]
    failures = {key: value for key, value in metrics.items() if key.startswith("num_failed")}
    assert failures == {
        "num_failed_rollouts": 3,
        "num_failed_rollouts/http_500": 1,
        "num_failed_rollouts/timeout": 2,
    }
    assert math.isclose(metrics["mean/reward"], 1 / 3)


def test_settings_errors(run_dir: Path):
    rollouts = write_jsonl(run_dir / "out.jsonl", RESULTS)
    with pytest.raises(ConfigError) as raised:
        run_profile([f"+rollouts_jsonl_fpath={rollouts}"])
    assert str(raised.value) == (
        "Top-level key 'inputs_jsonl_fpath': Field required; set it with ++inputs_jsonl_fpath=<value>"
    )
    with pytest.raises(ConfigError) as raised:
        profile(rollouts, rollouts, "+allow_partial_rollouts=maybe")
    assert str(raised.value).startswith(
        "Top-level key 'allow_partial_rollouts': Input should be a valid boolean"
    )
    with pytest.raises(ConfigPathNotFoundError) as raised:
        profile(Path("nowhere.jsonl"), rollouts)
    assert str(raised.value).startswith(
        f"inputs_jsonl_fpath: file 'nowhere.jsonl' not found; tried {run_dir / 'nowhere.jsonl'} "
        f"and {install_root() / 'nowhere.jsonl'}"
    )  # and the nearest file there, if any


def test_help_lists_the_settings(run_dir: Path, capsys):
    with pytest.raises(SystemExit) as raised:
        run_profile(["+h=true"])
    assert raised.value.code == 0
    printed = capsys.readouterr().out
    assert "inputs_jsonl_fpath (Path, required)" in printed
    assert "allow_partial_rollouts (bool, default: False)" in printed


def test_an_input_changed_before_its_sample_is_read_back_is_named_and_old_outputs_stay(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    inputs = write_jsonl(run_dir / "in.jsonl", INPUTS)
    rollouts = write_jsonl(run_dir / "out.jsonl", RESULTS)
    (run_dir / "out_reward_profiling.jsonl").write_text("old\n")
    read_results = eval_profile.read_results

    def read_results_then_overwrite_inputs(*args) -> None:
        read_results(*args)
        inputs.write_text("x" * inputs.stat().st_size)  # another process rewrote the file meanwhile

    monkeypatch.setattr(eval_profile, "read_results", read_results_then_overwrite_inputs)
    with pytest.raises(ConfigError) as raised:
        profile(inputs, rollouts)
    assert str(raised.value) == (
        f"{inputs}:1: not valid JSON (unexpected character, expected a JSON value: line 1 column 1 (char 0)); "
        "fix or remove the line"
    )
    assert (run_dir / "out_reward_profiling.jsonl").read_text() == "old\n"
    assert sorted(path.name for path in run_dir.iterdir()) == [
        "in.jsonl",
        "out.jsonl",
        "out_reward_profiling.jsonl",
    ]
