"""graphwalks: the answer-line parser and F1 in-process, everything else over HTTP against one real server."""

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    LINEAR_CPU_BUDGET_S,
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    cpu_time_of,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.graphwalks.grading import f1_score, parse_final_answer

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "graphwalks_resources_server"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
BFS_ROW = {**ROWS[0], "expected_answer": '["a1", "b2", "c3"]'}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("graphwalks")
    with run_resources_server(
        INSTANCE, workdir, implementation="graphwalks", domain="long_context"
    ) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = BFS_ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    assert body["f1"] == body["reward"]
    return body


# --- the answer line (in-process) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("Reasoning...\nFinal Answer: [a1, b2, c3]", ["a1", "b2", "c3"]),
        ("Final Answer: [a1,b2]\n\n  \n", ["a1", "b2"]),  # trailing blank lines are not the last line
        ("Final Answer: []", []),
        ("Final Answer: [ , ]", []),
        ("Final Answer:[a1]", ["a1"]),
        ("Final Answer:   [ a1 ,  b2 ]  thanks", ["a1", "b2"]),
        ("So: Final Answer: [a1, [b2]]", ["a1", "[b2]"]),  # up to the last ] of the line
        ("Final Answer: x Final Answer: [a1]", ["a1"]),
        ('Final Answer: ["a1", "b2"]', ['"a1"', '"b2"']),  # names are taken as written
        ("Final Answer: [a1, a1]", ["a1", "a1"]),
    ],
)
def test_the_nodes_are_read_from_the_last_non_empty_line(text, nodes):
    assert parse_final_answer(text) == nodes


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n",
        "Final Answer: [a1]\nThat is all.",  # an answer that is not on the last line
        "final answer: [a1]",
        "Final Answer: a1, b2",
        "Final Answer: [a1, b2",
        "Final Answer: ]a1[",
    ],
)
def test_a_last_line_without_a_bracketed_final_answer_is_a_parse_failure(text):
    assert parse_final_answer(text) is None


@pytest.mark.parametrize(
    ("predicted", "expected", "f1"),
    [
        ({"a"}, {"a"}, 1.0),
        (set(), set(), 1.0),
        (set(), {"a"}, 0.0),
        ({"a"}, set(), 0.0),
        ({"x"}, {"a"}, 0.0),
        ({"a", "b", "x"}, {"a", "b", "c", "d"}, 2 * 2 / 7),  # precision 2/3, recall 2/4
    ],
)
def test_f1_of_node_sets(predicted, expected, f1):
    assert f1_score(predicted, expected) == pytest.approx(f1)


def reference_parse(text: str) -> list[str] | None:
    """The rule as a plain backtracking pattern: fine for short texts, quadratic for long ones."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    match = re.search(r"Final Answer:\s*\[(.*)\]", lines[-1]) if lines else None
    if match is None:
        return None
    return [node for item in match.group(1).split(",") if (node := item.strip())]


def test_the_parser_agrees_with_the_plain_pattern_on_random_short_texts():
    rng = random.Random(17)
    pieces = ["Final Answer:", " ", "[", "]", ",", "a1", "\n", "\t", "x", "Final", "\u00a0"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        assert parse_final_answer(text) == reference_parse(text), repr(text)


def test_reading_the_answer_line_is_linear_in_the_text():
    """Thousands of unclosed markers on one line: a backtracking pattern would take hours here."""
    unclosed, first_s = cpu_time_of(parse_final_answer, "Final Answer: [" * 300_000)
    closed, second_s = cpu_time_of(parse_final_answer, "x\n" + "Final Answer: [a1, " * 300_000 + "]")
    assert unclosed is None and len(closed) == 300_000
    assert first_s + second_s < LINEAR_CPU_BUDGET_S, (first_s, second_s)


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_right_set_in_any_order_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item("Thinking.\nFinal Answer: [c3, a1, b2]"))
    assert body["reward"] == 1.0 and body["parse_failed"] is False
    assert body["predicted_nodes"] == ["c3", "a1", "b2"]
    row_fields = ("expected_answer", "problem_type", "n_tokens", "prompt_chars")
    assert {key: body[key] for key in row_fields} == {key: BFS_ROW[key] for key in row_fields}
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "f1",
        "parse_failed",
        "predicted_nodes",
        *row_fields,
    }


async def test_a_partly_right_set_earns_its_f1(server):
    body = await verify(server, message_item("Final Answer: [a1, b2, zz]"))
    assert body["reward"] == pytest.approx(2 / 3) and body["parse_failed"] is False


async def test_two_empty_sets_agree_and_an_empty_answer_to_a_non_empty_set_scores_0(server):
    empty_row = {**BFS_ROW, "expected_answer": "[]"}
    assert (await verify(server, message_item("Final Answer: []"), row=empty_row))["reward"] == 1.0
    missed = await verify(server, message_item("Final Answer: []"))
    assert missed["reward"] == 0.0 and missed["parse_failed"] is False


async def test_the_answer_is_the_output_text_of_every_message_joined(server):
    body = await verify(server, message_item("Final Answer: [a1, "), message_item("b2, c3]", id="msg_2"))
    assert body["reward"] == 1.0


@pytest.mark.parametrize(
    "items",
    [
        (message_item("Final Answer: [a1, b2, c3]\nI hope this helps."),),
        (message_item(""),),
        (),
        (function_call_item("search", {"node": "a1"}),),
    ],
    ids=["answer-not-last", "empty-text", "no-output", "function-call-only"],
)
async def test_an_unreadable_answer_is_a_parse_failure_worth_0(server, items):
    body = await verify(server, *items)
    assert body["reward"] == 0.0 and body["parse_failed"] is True and body["predicted_nodes"] == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": "not json"}, "expected_answer"),
        ({"expected_answer": '{"a1": 1}'}, "expected_answer"),
        ({"expected_answer": "[1, 2]"}, "expected_answer"),
        ({"expected_answer": "[" * 100_000 + "]" * 100_000}, "expected_answer"),
        ({"expected_answer": ["a1"]}, "expected_answer"),
        ({"problem_type": None}, "problem_type"),
        ({"n_tokens": "many"}, "n_tokens"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**BFS_ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


# --- metrics, recorded data, config -----------------------------------------------------------------


async def test_aggregate_metrics_give_pass_at_k_overall_and_per_problem_type(server):
    results = [
        await verify(server, message_item("Final Answer: [a1, b2, c3]")),
        await verify(server, message_item("Final Answer: [a1]")),
        await verify(server, message_item("Final Answer: []"), row={**BFS_ROW, "problem_type": "parents"}),
        await verify(server, message_item("no answer"), row={**BFS_ROW, "problem_type": "parents"}),
    ]
    tasks = [0, 0, 1, 1]
    rollouts = [
        {**result, "_ng_task_index": task, "_ng_rollout_index": i % 2}
        for i, (result, task) in enumerate(zip(results, tasks, strict=True))
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, body
    metrics = body["agent_metrics"]
    assert metrics["problem_type=bfs/pass@1[avg-of-2]/accuracy"] == pytest.approx(100 * (1 + 0.5) / 2)
    assert metrics["problem_type=bfs/pass@2/accuracy"] == pytest.approx(100.0)  # continuous: best of 2
    assert metrics["problem_type=parents/pass@1/accuracy"] == pytest.approx(0.0)
    assert metrics["pass@2/accuracy"] == pytest.approx(100 * (1.0 + 0.0) / 2)
    assert body["key_metrics"]["pass@2/accuracy"] == metrics["pass@2/accuracy"]
    assert "pass@1/accuracy" not in body["key_metrics"] and "mean/output_tokens" in body["key_metrics"]


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == rollout


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "long_context")
    assert {row["agent_ref"]["name"] for row in ROWS} == {"graphwalks_simple_agent"}
