"""arc_agi: grid extraction in-process, everything else over HTTP against one real server (with a short
grading deadline) started from its own app.py."""

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

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
from resources_servers.arc_agi.app import ArcAgiConfig
from resources_servers.arc_agi.grading import extract_grid

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "arc_agi_resources_server"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {**ROWS[0], "expected_output": [[1, 2], [3, 4]]}
DEADLINE_S = 0.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("arc_agi")
    with run_resources_server(
        INSTANCE, workdir, implementation="arc_agi", domain="knowledge", grading_timeout_s=DEADLINE_S
    ) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    assert body["extraction_successful"] is (body["predicted_output"] is not None)
    return body


# --- extraction (in-process) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "grid"),
    [
        ("The answer is \\boxed{[[1, 2], [3, 4]]}.", [[1, 2], [3, 4]]),
        ("\\boxed{[[1,2],\n [3,4]]}", [[1, 2], [3, 4]]),
        ("Input [[9]] maps to \\boxed{[[1]]}", [[1]]),  # a boxed grid beats an earlier bare one
        ("\\boxed{[[7]]} or \\boxed{[[8]]}", [[7]]),
        ("\\boxed{[[01]]} then \\boxed{[[8]]}", [[8]]),  # the first boxed grid that parses
        ("Output:\n[[5, 0],\n [0, 5]]", [[5, 0], [0, 5]]),  # no boxed grid: the first bare one
        ("[[1 2]]", [[12]]),  # whitespace is dropped before reading, as in NeMo Gym
        ("[[1], []]", [[1], []]),  # later rows may be empty, ragged rows are kept
        ("x[[3]]y[[4]]", [[3]]),
        ("\\boxed{[[1, 2]] }", [[1, 2]]),  # not boxed (space before the brace): read as bare
        ("\\boxed{[[]]} [[5]]", [[5]]),  # an empty box is no boxed candidate
    ],
)
def test_the_first_readable_grid_is_extracted(text, grid):
    assert extract_grid(text) == grid


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no grid here",
        "[1, 2, 3]",
        "[[]]",
        "[[-1]]",
        "[[1.5]]",
        "[[[1]]]",
        "[[01]]",
        "\\boxed{[[01]]} but [[1]] later",  # boxed candidates exist, so bare ones are not tried
        "[[1, 2]",
        "[[١]]",  # a digit json does not read
        "[[" + "9" * 5000 + "]]",  # longer than Python turns into an int
    ],
)
def test_text_without_a_readable_grid_gives_none(text):
    assert extract_grid(text) is None


def reference_extract(text: str) -> list[list[int]] | None:
    """The rule as plain backtracking patterns: fine for short texts, quadratic on long bracket runs."""
    found = re.findall(r"\\boxed\{(\[\s*\[[\d\s,\[\]]+\]\s*\])\}", text) or re.findall(
        r"\[\s*\[[\d\s,\[\]]+\]\s*\]", text
    )
    for candidate in found:
        try:
            grid = json.loads(re.sub(r"\s+", "", candidate))
        except ValueError:
            continue
        rows_ok = isinstance(grid, list) and all(
            isinstance(row, list) and all(type(cell) is int for cell in row) for row in grid
        )
        if rows_ok and grid and grid[0]:
            return grid
    return None


def test_extraction_agrees_with_the_plain_patterns_on_random_short_texts():
    rng = random.Random(17)
    pieces = ["[", "]", "[[", "]]", "0", "1", "12", "01", ",", " ", "\n", "a", "\\boxed{", "}", "١", "\u2003"]
    for _ in range(30_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(16)))
        assert extract_grid(text) == reference_extract(text), repr(text)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 2_000_000,
        "[" * 1_000_000 + "]" * 1_000_000,
        "\\boxed{[[" + "1" * 2_000_000 + "]]}",
        "[[1," * 500_000,
        "[ [" + " " * 2_000_000,
    ],
    ids=["unclosed", "deep", "long-number", "open-rows", "spaces"],
)
def test_extraction_is_linear_on_pathological_bracket_runs(text):
    """Each of these keeps a backtracking pattern busy for hours."""
    grid, seconds = cpu_time_of(extract_grid, text)
    assert grid is None and seconds < LINEAR_CPU_BUDGET_S, seconds


# --- /verify ----------------------------------------------------------------------------------------


async def test_the_expected_grid_earns_1_and_the_answer_names_the_task(server):
    body = await verify(server, message_item("Mirror it: \\boxed{[[1, 2], [3, 4]]}"))
    assert body["reward"] == 1.0 and body["predicted_output"] == [[1, 2], [3, 4]]
    assert body["expected_output"] == ROW["expected_output"] and body["task_id"] == ROW["task_id"]
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "expected_output",
        "predicted_output",
        "extraction_successful",
        "task_id",
    }


async def test_another_grid_scores_0_but_counts_as_extracted(server):
    body = await verify(server, message_item("\\boxed{[[1, 2], [3, 5]]}"))
    assert body["reward"] == 0.0 and body["extraction_successful"] is True


async def test_assistant_texts_are_joined_by_newlines(server):
    """As in NeMo Gym: a grid may span two messages, but a brace opening the next one does not close a
    `\\boxed{` of the previous one (a newline comes between), so the earlier bare grid is the answer."""
    spanning = await verify(server, message_item("\\boxed{[[1, 2],"), message_item("[3, 4]]}", id="msg_2"))
    assert spanning["reward"] == 1.0
    body = await verify(
        server, message_item("[[9]] becomes \\boxed{[[1, 2], [3, 4]]"), message_item("}", id="m2")
    )
    assert body["predicted_output"] == [[9]]


@pytest.mark.parametrize(
    "items",
    [(), (function_call_item("paint", {"x": 1}),), (message_item("I am not sure."),)],
    ids=["none", "call", "no-grid"],
)
async def test_no_grid_scores_0_and_is_not_extracted(server, items):
    body = await verify(server, *items)
    assert body["reward"] == 0.0 and body["extraction_successful"] is False


async def test_an_extraction_past_its_deadline_scores_0_and_the_server_keeps_answering(server):
    """20 MB of short unreadable candidates: seconds of work, the deadline is 0.5 s."""
    body = await verify(server, message_item("[[01]]a" * 3_000_000))
    assert body["reward"] == 0.0 and body["extraction_successful"] is False
    assert "exceeded" in server.log()
    assert (await verify(server, message_item("\\boxed{[[1, 2], [3, 4]]}")))["reward"] == 1.0


async def test_only_expected_output_is_required(server):
    row = {"responses_create_params": ROW["responses_create_params"], "expected_output": [[1]]}
    body = await verify(server, message_item("\\boxed{[[1]]}"), row=row)
    assert body["reward"] == 1.0 and body["task_id"] is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_output": None}, "expected_output"),
        ({"expected_output": [[1, "x"]]}, "expected_output"),
        ({"expected_output": [1, 2]}, "expected_output"),
        ({"test_input": "grid"}, "test_input"),
        ({"train": [1]}, "train"),
        ({"task_id": 3}, "task_id"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await post_json(server.url + "/verify", {**ROW, **change, "response": A_RESPONSE})
    assert status == 422 and ["body", field] in [error["loc"][:2] for error in body["detail"]]


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = next(row for row in ROWS if row["task_id"] == rollout["task_id"])
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    assert without_verify_flags(body) == rollout


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert resources.model_extra["grading_timeout_s"] == 10
    assert {row["agent_ref"]["name"] for row in ROWS} == {"arc_agi_simple_agent"}


@pytest.mark.parametrize("deadline", [0, -1])
def test_a_non_positive_grading_deadline_is_refused(deadline):
    with pytest.raises(ValidationError, match="grading_timeout_s"):
        ArcAgiConfig(host="127.0.0.1", port=0, entrypoint="app.py", name="x", grading_timeout_s=deadline)
