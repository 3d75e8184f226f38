"""lc_niah: the answer line, F1 and overlaps in-process; over HTTP one server scoring with the lcs overlap
(short deadline) and one configured as shipped (seq_match) for the recorded rollouts."""

import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    LINEAR_CPU_BUDGET_S,
    StartedServer,
    check_environment_config,
    cpu_time_of,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
    without_verify_flags,
)
from resources_servers.lc_niah.grading import (
    combined_reward,
    node_f1,
    overlap_lcs,
    overlap_ngram,
    overlap_seq_match,
    parse_node_list,
)

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "lc_niah"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
PROMPT = "Edges:\nq1 -> q2\nq2 -> q3\nq3 -> q4\nOperation: BFS from q1 with depth 2."
ROW = {
    **ROWS[0],
    "responses_create_params": {"input": [{"role": "user", "content": PROMPT}]},
    "expected_answer": '["q3"]',
}
DEADLINE_S = 3.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("lc_niah")
    with run_resources_server(
        INSTANCE,
        workdir,
        domain="knowledge",
        overlap_metric_rule="lcs",
        overlap_grading_rule="multiply",
        grading_timeout_s=DEADLINE_S,
    ) as started:
        yield started


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("lc_niah_shipped")
    with run_resources_server(
        INSTANCE,
        workdir,
        domain="knowledge",
        overlap_metric_rule="seq_match",
        overlap_grading_rule="multiply",
    ) as started:
        yield started


def reasoning_item(text: str) -> dict:
    return {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": text}]}


async def verify(server: StartedServer, *items: dict, row: dict = ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


# --- the answer line, F1 and overlaps (in-process) --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("Thinking\nFinal Answer: [a1, b2]", ["a1", "b2"]),
        ("Final Answer: [\"a1\", 'b2']", ["a1", "b2"]),  # quotes are stripped
        ("Final Answer:   [ ]\n\n", []),
        ("x Final Answer: y Final Answer: [a1] z]", ["a1] z"]),  # the first marker with a list, to the last ]
        ("Final Answer: [a1, , a1]", ["a1", "a1"]),
    ],
)
def test_the_node_list_is_read_from_the_last_non_empty_line(text, nodes):
    assert parse_node_list(text) == nodes


@pytest.mark.parametrize(
    "text", ["", "Final Answer: [a1]\nDone.", "Final Answer: a1", "Final Answer: [a1", "final answer: [a1]"]
)
def test_a_last_line_without_a_closed_list_is_no_answer(text):
    assert parse_node_list(text) is None


def reference_parse(text: str) -> list[str] | None:
    """The rule as a backtracking pattern: fine for short texts, quadratic on long ones."""
    lines = [line for line in text.strip().split("\n") if line.strip()]
    match = re.search(r"Final Answer:\s*\[(.*)\]", lines[-1]) if lines else None
    if match is None:
        return None
    return [node for raw in match.group(1).split(",") if (node := raw.strip().strip("\"'").strip())]


def test_the_parser_agrees_with_the_pattern_on_random_short_texts():
    rng = random.Random(29)
    pieces = ["Final Answer:", " ", "[", "]", ",", "a1", "\n", '"', "x", "\t"]
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        assert parse_node_list(text) == reference_parse(text), repr(text)


def test_reading_the_answer_line_is_linear_in_the_text():
    nodes, seconds = cpu_time_of(parse_node_list, "Final Answer: [" * 300_000)
    assert nodes is None and seconds < LINEAR_CPU_BUDGET_S


@pytest.mark.parametrize(
    ("predicted", "expected", "f1"),
    [({"a"}, {"a"}, 1.0), (set(), set(), 1.0), (set(), {"a"}, 0.0), ({"a", "x"}, {"a", "b", "c"}, 0.4)],
)
def test_node_f1(predicted, expected, f1):
    assert node_f1(predicted, expected) == pytest.approx(f1)


def test_the_overlaps_grow_with_copying_and_are_0_without_reasoning():
    source = " ".join(f"w{i}" for i in range(40))
    copied, own = source[:120], "an entirely different line of thought about the graph"
    assert overlap_lcs(copied, source) == 1.0 and overlap_lcs(own, source) < 0.2
    assert overlap_ngram(" ".join(f"w{i}" for i in range(20)), source) == 1.0
    assert overlap_ngram("short reasoning", source) == 0.0  # fewer than 16 words
    assert overlap_seq_match(copied, source) > overlap_seq_match(own, source)
    assert overlap_lcs("", source) == overlap_ngram("", source) == overlap_seq_match("  ", source) == 0.0
    assert overlap_lcs("A  B", "xx a b") == 1.0  # case and whitespace runs are normalized


@pytest.mark.parametrize(
    ("rule", "reward"),
    [("base", 0.8), ("multiply", pytest.approx(0.8 * 0.75)), ("minus", pytest.approx(0.55))],
)
def test_the_grading_rules(rule, reward):
    assert combined_reward(rule, 0.8, 0.25) == reward


# --- /verify ----------------------------------------------------------------------------------------


async def test_a_right_answer_without_reasoning_earns_1_and_the_answer_echoes_the_row(server):
    body = await verify(server, message_item("Final Answer: [q3]"))
    assert body["reward"] == 1.0 and body["answer_score"] == 1.0 and body["reasoning_overlap"] == 0.0
    row_fields = ("expected_answer", "n_tokens", "problem_type", "question", "source")
    assert {key: body[key] for key in row_fields} == {key: ROW[key] for key in row_fields}
    assert set(body) == {*BASE_VERIFY_FIELDS, *row_fields, "answer_score", "reasoning_overlap", "agent_ref"}


async def test_copying_the_prompt_into_the_reasoning_costs_its_share(server):
    own = await verify(server, reasoning_item("two hops from the start"), message_item("Final Answer: [q3]"))
    assert 0.0 < own["reasoning_overlap"] < 0.5 and own["reward"] == pytest.approx(
        1 - own["reasoning_overlap"]
    )
    copy = await verify(server, reasoning_item("q2 -> q3\nq3 -> q4"), message_item("Final Answer: [q3]"))
    assert copy["reasoning_overlap"] == 1.0 and copy["reward"] == 0.0 and copy["answer_score"] == 1.0


async def test_the_input_text_joins_string_and_part_contents(server):
    parts = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "alpha beta"}]}]}
    row = {**ROW, "responses_create_params": parts}
    body = await verify(server, reasoning_item("beta"), message_item("Final Answer: [q3]"), row=row)
    assert body["reasoning_overlap"] == 1.0
    plain = {**ROW, "responses_create_params": {"input": "gamma delta"}}
    assert (await verify(server, reasoning_item("delta"), message_item("Final Answer: [q3]"), row=plain))[
        "reasoning_overlap"
    ] == 1.0


async def test_a_wrong_or_unreadable_answer_scores_0(server):
    assert (await verify(server, message_item("Final Answer: [q4]")))["reward"] == 0.0
    unread = await verify(server, message_item("Final Answer: [q3]\nThat is all."))
    assert unread["reward"] == 0.0 and unread["answer_score"] == 0.0


async def test_an_overlap_past_its_deadline_is_masked_and_the_server_keeps_answering(server):
    row = {**ROW, "responses_create_params": {"input": "ba" * 40_000}}
    body = await verify(server, reasoning_item("ab" * 10_000), message_item("Final Answer: [q3]"), row=row)
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error" and body["reward"] == 0.0
    assert (await verify(server, message_item("Final Answer: [q3]")))["reward"] == 1.0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_answer": "q3"}, "expected_answer"),
        ({"expected_answer": "[1]"}, "expected_answer"),
        ({"expected_answer": ["q3"]}, "expected_answer"),
        ({"n_tokens": "many"}, "n_tokens"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"] for error in body["detail"]]


# --- recorded data, config ----------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["question"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(shipped, rollout):
    status, body = await post_json(shipped.url + "/verify", rollout)
    assert status == 200, body
    assert without_verify_flags(body) == without_verify_flags({key: rollout[key] for key in body})


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert (resources.overlap_metric_rule, resources.overlap_grading_rule) == ("seq_match", "multiply")
    assert {row["agent_ref"]["name"] for row in ROWS} == {"lc_niah_simple_agent"}
