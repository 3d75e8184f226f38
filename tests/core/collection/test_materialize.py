"""The materialized inputs (nemo_gym.collection.materialize) written from real files: repeats and their
indices, the agent each row runs on, overrides, seeds and prompt templates, and the rows refused."""

import logging
from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from nemo_gym.config_types import ConfigError
from nemo_gym.rollout_collection import (
    CollectionLedger,
    CollectionPaths,
    RolloutCollectionConfig,
    materialize,
)
from tests.collection_deployment import task


def write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


def read_lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


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
