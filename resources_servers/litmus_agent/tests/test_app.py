"""litmus_agent: extraction and reward rules in-process (cheap), everything else over HTTP against real
server processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    EMPTY_AGGREGATE_METRICS,
    StartedServer,
    check_environment_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.litmus_agent.grading import ANSWER_FORMATS, extract_value, parse_bool, score

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
GRADED_FIELDS = {"predicted_value", "correct", "resolved_answer_type", "resolved_reward_rule"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """The shipped deadline (5 s): far above any real extraction, even on a loaded machine."""
    workdir = tmp_path_factory.mktemp("litmus_agent")
    with run_resources_server("litmus_agent", workdir, domain="knowledge") as started:
        yield started


@pytest.fixture(scope="module")
def hurried_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """A short deadline, to see a runaway row regex stopped."""
    workdir = tmp_path_factory.mktemp("litmus_agent_hurried")
    with run_resources_server(
        "litmus_hurried",
        workdir,
        implementation="litmus_agent",
        domain="knowledge",
        grading_timeout_seconds=1.0,
    ) as started:
        yield started


@pytest.fixture(scope="module")
def loose_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """Config tolerances of 10% for isclose."""
    workdir = tmp_path_factory.mktemp("litmus_agent_loose")
    with run_resources_server(
        "litmus_loose", workdir, implementation="litmus_agent", domain="knowledge", float_rel_tol=0.1
    ) as started:
        yield started


def row(**fields: Any) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "How many?"}]},
        "expected_answer": "3",
        "answer_type": "float",
        **fields,
    }


async def verify(server: StartedServer, text: str, **fields: Any) -> dict:
    body = {**row(**fields), "response": response_with(message_item(text), **A_RESPONSE)}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 200, answer
    return answer


async def grade(server: StartedServer, text: str, **fields: Any) -> tuple[float, Any]:
    answer = await verify(server, text, **fields)
    return answer["reward"], answer["predicted_value"]


# ---- extraction (pure function) -------------------------------------------------------------------------


def test_there_are_the_31_named_formats():
    assert sorted(ANSWER_FORMATS) == [f"fmt_{index:02d}" for index in range(31)]


@pytest.mark.parametrize(
    ("text", "answer_format", "parse_as", "value"),
    [
        ("((2)) no wait ((3))", "fmt_00", "float", 3.0),  # the last match counts
        ("((about 3.5 g))", "fmt_00", "float", 3.5),  # the last number-like token
        ("\\boxed{1e-3}", "fmt_07", "float", 0.001),
        ("<final_answer> Yes </final_answer>", "fmt_15", "bool", 1.0),
        ("<final_answer>absent</final_answer>", "fmt_15", "bool", 0.0),
        ("<final_answer>2</final_answer>", "fmt_15", "bool", 1.0),  # a non-zero number is true
        ("<final_answer>maybe</final_answer>", "fmt_15", "bool", None),
        ("**Answer: Carboxylic  acid**", "fmt_18", "string", "Carboxylic  acid"),
        ("ANSWER IS 7\nbecause", "fmt_22", "float", 7.0),  # one-line formats stop at the line end
        ("Final Answer: x\nFinal Answer: 42", "fmt_30", "float", 42.0),
        ("((no number))", "fmt_00", "float", None),
        ("nothing wrapped", "fmt_00", "string", None),
    ],
)
def test_named_formats(text, answer_format, parse_as, value):
    assert extract_value(text, parse_as, None, answer_format) == value


def test_a_row_regex_wins_over_the_format():
    text = "((1)) Result = 5"
    assert extract_value(text, "float", r"Result\s*=\s*(\d+)", "fmt_00") == 5.0


@pytest.mark.parametrize(
    ("predicted", "expected", "rule", "params", "reward"),
    [
        (3.4, "3", "exact", {}, 1.0),  # rounded
        (3.6, "3", "exact", {}, 0.0),
        (3.0000001, "3", "isclose", {}, 1.0),
        (3.1, "3", "isclose", {}, 0.0),
        (101.5, 100, "abs_window", {"abs_tol": 2}, 1.0),
        (103, 100, "abs_window", {"abs_tol": 2}, 0.0),
        (18.1, "18.02", "rel_window", {"rel_tol": 0.01}, 1.0),
        (18.5, "18.02", "rel_window", {"rel_tol": 0.01}, 0.0),
        (1.0, "yes", "bool_eq", {}, 1.0),
        (0.0, "true", "bool_eq", {}, 0.0),
        ("  Carboxylic   ACID ", "carboxylic acid", "string_eq", {}, 1.0),
        ("ketone", "carboxylic acid", "string_eq", {}, 0.0),
        ("three", "3", "exact", {}, 0.0),  # text under a numeric rule that is no number
        (None, "3", "exact", {}, 0.0),
        (float("nan"), "3", "isclose", {}, 0.0),
        (float("inf"), "3", "exact", {}, 0.0),
    ],
)
def test_reward_rules(predicted, expected, rule, params, reward):
    assert score(predicted, expected, rule, params, rel_tol=1e-6, abs_tol=1e-6) == reward


def test_bool_tokens():
    assert [parse_bool(token) for token in ("Y", "present", "0.0", "N", "-1", "perhaps")] == [
        1.0,
        1.0,
        0.0,
        0.0,
        1.0,
        None,
    ]


# ---- /verify over HTTP ----------------------------------------------------------------------------------


async def test_verify_echoes_pass_through_fields_and_reports_the_policy(server):
    answer = await verify(
        server, "so ((3))", match={"rule": "exact"}, smiles="CCC", method="direct", correct="row's own"
    )
    assert set(answer) >= {*BASE_VERIFY_FIELDS, *GRADED_FIELDS, "smiles", "method", "expected_answer"}
    assert answer["smiles"] == "CCC" and answer["method"] == "direct"
    assert (answer["reward"], answer["correct"], answer["predicted_value"]) == (1.0, True, 3.0)
    assert (answer["resolved_answer_type"], answer["resolved_reward_rule"]) == ("float", "exact")


async def test_right_wrong_and_missing_answers(server):
    assert await grade(server, "((3))") == (1.0, 3.0)
    assert await grade(server, "((4))") == (0.0, 4.0)
    assert await grade(server, "I think 3") == (0.0, None)


async def test_the_format_falls_back_to_use_box_format(server):
    assert await grade(server, "\\boxed{3} ((4))", use_box_format=True) == (1.0, 3.0)
    assert await grade(server, "\\boxed{3} ((4))") == (0.0, 4.0)  # default: double parentheses


async def test_a_row_match_overrides_the_type_default(server):
    assert await grade(server, "((3.3))", match={"rule": "abs_window", "abs_tol": 0.5}) == (1.0, 3.3)
    assert await grade(server, "((3.3))") == (0.0, 3.3)


async def test_config_tolerances_feed_isclose(loose_server):
    assert await grade(loose_server, "((3.2))") == (1.0, 3.2)


async def test_string_and_bool_rows(server):
    fields = {"answer_type": "string", "expected_answer": "Iron", "output_regex": r"Element:\s*(\w+)"}
    assert await grade(server, "Element: iron", **fields) == (1.0, "iron")
    bool_row = {"answer_type": "bool", "expected_answer": "no", "answer_format": "fmt_15"}
    assert await grade(server, "<final_answer>False</final_answer>", **bool_row) == (1.0, 0.0)


async def test_legacy_property_types_read_numbers_and_round(server):
    legacy = {"answer_type": None, "property_type": "presence", "expected_answer": "1"}
    answer = await verify(server, "((2))", **legacy)
    # A legacy flag is read as a number and compared rounded: 2 is not taken for "present".
    assert (answer["reward"], answer["resolved_answer_type"], answer["resolved_reward_rule"]) == (
        0.0,
        "bool",
        "exact",
    )
    assert await grade(server, "((1.2))", answer_type=None, property_type="count", expected_answer=1) == (
        1.0,
        1.2,
    )


async def test_a_catastrophic_row_regex_masks_the_sample_instead_of_hanging(hurried_server):
    answer = await verify(hurried_server, "a" * 40 + "!", output_regex="^((?:a+)+)$")
    assert (answer["reward"], answer["predicted_value"]) == (0.0, None)
    assert answer["mask_sample"] is True and answer["failure_kind"] == "verifier_error"
    assert "extract_value exceeded" in answer["failure_reason"]
    assert await grade(hurried_server, "((3))") == (1.0, 3.0)  # still serving


async def test_a_graded_sample_is_not_masked(server):
    answer = await verify(server, "((3))")
    assert (answer["mask_sample"], answer["failure_kind"], answer["failure_reason"]) == (False, None, None)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"answer_type": "int"}, "answer_type"),
        ({"answer_type": None}, "answer_type"),  # no legacy property_type either
        ({"answer_type": None, "property_type": "smiles"}, "answer_type"),
        ({"answer_format": "fmt_99"}, "answer_format"),
        ({"output_regex": "([unclosed"}, "output_regex"),
        ({"output_regex": r"(\d)-(\d)"}, "output_regex"),  # two groups
        ({"match": {"abs_tol": 1}}, "match"),  # no rule
        ({"match": {"rule": "fuzzy"}}, "match"),
        ({"match": {"rule": "abs_window", "abs_tol": -1}}, "match"),
        ({"expected_answer": "three"}, "expected_answer"),  # isclose needs a number
        ({"expected_answer": "inf"}, "expected_answer"),
        ({"answer_type": "bool", "expected_answer": "perhaps"}, "expected_answer"),
        ({"expected_answer": None}, "expected_answer"),
        ({"response": None}, "response"),
    ],
)
async def test_unusable_rows_are_422_naming_the_field(server, change, field):
    body = {**row(), "response": response_with(message_item("((3))"), **A_RESPONSE), **change}
    status, answer = await post_json(server.url + "/verify", body)
    assert status == 422, answer
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"]), answer


# ---- recorded rollouts ----------------------------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(ROLLOUTS)))
async def test_recorded_rollouts_reproduce_their_reward(server, index):
    rollout = ROLLOUTS[index]
    task = ROWS[rollout["_ng_task_index"]]
    status, answer = await post_json(server.url + "/verify", {**task, "response": rollout["response"]})
    assert status == 200, answer
    assert {key: answer[key] for key in ("reward", *GRADED_FIELDS)} == {
        key: rollout[key] for key in ("reward", *GRADED_FIELDS)
    }


def test_recorded_rollouts_cover_every_type_and_a_wrong_answer():
    assert {rollout["resolved_answer_type"] for rollout in ROLLOUTS} == {"float", "bool", "string"}
    assert {rollout["reward"] for rollout in ROLLOUTS} == {0.0, 1.0}


# ---- aggregate metrics ----------------------------------------------------------------------------------


def scored(task: int, reward: float, method: str | None, answer_type: str) -> dict:
    return {
        "responses_create_params": ROWS[0]["responses_create_params"],
        "response": A_RESPONSE,
        "reward": reward,
        "correct": reward == 1.0,
        "resolved_answer_type": answer_type,
        "_ng_task_index": task,
        "_ng_rollout_index": 0,
        **({"method": method} if method else {}),
    }


async def test_aggregate_metrics_group_by_method_and_answer_type(server):
    rollouts = [
        scored(0, 1.0, "direct", "float"),
        scored(1, 0.0, "direct", "float"),
        scored(2, 1.0, "direct", "bool"),
        scored(3, 0.0, None, "string"),
    ]
    status, result = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, result
    metrics = result["agent_metrics"]
    assert metrics["direct"]["count"] == 3
    assert metrics["direct"]["accuracy"] == pytest.approx(2 / 3)
    assert metrics["direct"]["by_answer_type"]["float"] == {"count": 2, "accuracy": 0.5, "mean_reward": 0.5}
    assert metrics["unknown"] == {
        "count": 1,
        "accuracy": 0.0,
        "mean_reward": 0.0,
        "by_answer_type": {"string": {"count": 1, "accuracy": 0.0, "mean_reward": 0.0}},
    }
    assert result["key_metrics"] == {"mean/reward": 0.5, "mean/correct": 0.5}


async def test_aggregate_metrics_of_nothing_is_empty(server):
    assert await post_json(server.url + "/aggregate_metrics", {"verify_responses": []}) == (
        200,
        EMPTY_AGGREGATE_METRICS,
    )


def test_config_declares_the_environment_and_its_agent():
    _, resources, agent = check_environment_config(
        FOLDER, "litmus_agent", "knowledge", agent_instance="litmus_agent_agent"
    )
    assert resources.float_rel_tol == resources.float_abs_tol == 1e-6
    assert agent["max_steps"] == 10
