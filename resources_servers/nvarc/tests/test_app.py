"""nvarc: answer reading in-process; /verify over HTTP against one real server started from its app.py,
whose inductive programs really run in the sandbox (with a 2 s limit instead of 30)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.sandbox import SandboxResult
from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    LINEAR_CPU_BUDGET_S,
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
from resources_servers.nvarc.app import run_outcome
from resources_servers.nvarc.grading import extract_code, parse_grid

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "nvarc_resources_server"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
TRANSDUCTIVE = {**ROWS[0], "expected_output": [[1, 2], [3, 4]]}
INDUCTIVE = {**ROWS[3], "test_input": [[1, 2], [3, 4]], "expected_output": [[1, 3], [2, 4]]}
TIMEOUT_S = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE,
        tmp_path_factory.mktemp("nvarc"),
        implementation="nvarc",
        domain="knowledge",
        python_timeout_seconds=TIMEOUT_S,
    ) as started:
        yield started


async def verify(server: StartedServer, text: str | None, row: dict = TRANSDUCTIVE) -> dict:
    items = [message_item(text)] if text is not None else [function_call_item("paint", {"x": 1})]
    status, body = await post_json(server.url + "/verify", {**row, "response": response_with(*items)})
    assert status == 200, body
    assert body["extraction_successful"] is (body["predicted_output"] is not None)
    return body


def program(body: str) -> str:
    return f"Here is the rule.\n```python\ndef transform(grid):\n{body}\n```\n"


TRANSPOSE = program("    return [list(row) for row in zip(*grid)]")

# --- answer reading (in-process) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "grid"),
    [
        ("So: \\boxed{1 2\n3 4}", [[1, 2], [3, 4]]),
        ("\\boxed{12\n34}", [[1, 2], [3, 4]]),  # rows written as the prompt writes them
        ("\\boxed{[[1, 2], [3, 4]]}", [[1, 2], [3, 4]]),
        ("\\boxed{9} first, then \\boxed{1 2\n3 4}", [[1, 2], [3, 4]]),  # the last box
        ("The grid:\n1 2\n3 4\nThat is all.", [[1, 2], [3, 4]]),  # unboxed: the last block of rows
        ("7 7\n\nNow:\n[[1, 2],\n [3, 4]]", [[1, 2], [3, 4]]),
        ("Answer: [[1, 2], [3, 4]]\n", None),  # a sentence around a grid is no row
        ("Answer:\n[[1, 2], [3, 4]]", [[1, 2], [3, 4]]),
        ("<think>\\boxed{5}</think>\\boxed{1,2\n3,4}", [[1, 2], [3, 4]]),  # reasoning is not the answer
    ],
)
def test_the_answer_grid_is_read(text, grid):
    assert parse_grid(text) == grid


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no grid",
        "\\boxed{12 3}",
        "\\boxed{1 2\n3}",
        "\\boxed{}",
        "\\boxed{[[10]]}",
        "\\boxed{[[1],[2,3]]}",
    ],
    ids=["empty", "prose", "two-digit", "ragged", "empty-box", "colour-10", "ragged-json"],
)
def test_no_grid_or_an_invalid_one_reads_as_none(text):
    assert parse_grid(text) is None


def test_grids_over_30_cells_a_side_are_refused():
    assert parse_grid("\\boxed{" + "1" * 30 + "}") == [[1] * 30]
    assert parse_grid("\\boxed{" + "1" * 31 + "}") is None
    assert parse_grid("\\boxed{" + "1\n" * 31 + "}") is None


@pytest.mark.parametrize(
    "text",
    ["\\boxed{" * 1_000_000, "```python\n" * 300_000, "[[" * 2_000_000, "1 " * 2_000_000, "1\n" * 2_000_000],
    ids=["boxes", "fences", "brackets", "long-row", "many-rows"],
)
def test_reading_is_linear_on_pathological_texts(text):
    (grid, code), seconds = cpu_time_of(lambda t: (parse_grid(t), extract_code(t)), text)
    assert grid is None and seconds < LINEAR_CPU_BUDGET_S, seconds


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```\nx = 1\n```\n```python\ny = 2\n```\n```\nz = 3\n```", "y = 2"),  # the last python block
        ("```\nx = 1\n```\n```text\nz = 3\n```", "z = 3"),  # else the last block
        ("def transform(g):\n    return g", "def transform(g):\n    return g"),  # else the whole text
        ("no program", None),
        ("<think>```python\nbad\n```</think>\n```python\ngood\n```", "good"),
    ],
)
def test_the_program_is_extracted(text, code):
    assert extract_code(text) == code


# --- /verify: transductive --------------------------------------------------------------------------


async def test_the_expected_grid_earns_1(server):
    body = await verify(server, "Swap them: \\boxed{1 2\n3 4}")
    assert body["reward"] == 1.0 and body["exact_match"] is True and body["agent_mode"] == "transductive"
    assert body["task_id"] == TRANSDUCTIVE["task_id"] and body["test_input"] == TRANSDUCTIVE["test_input"]
    assert set(body) == {
        *BASE_VERIFY_FIELDS,
        "train",
        "test_input",
        "task_id",
        "expected_output",
        "predicted_output",
        "extraction_successful",
        "exact_match",
        "agent_mode",
        "execution_error",
    }


async def test_another_grid_scores_0_but_counts_as_extracted(server):
    body = await verify(server, "\\boxed{1 2\n3 5}")
    assert body["reward"] == 0.0 and body["extraction_successful"] is True and body["exact_match"] is False


@pytest.mark.parametrize("text", [None, "I cannot tell."], ids=["tool-call", "prose"])
async def test_no_grid_scores_0_unextracted_and_measured(server, text):
    body = await verify(server, text)
    assert body["reward"] == 0.0 and body["extraction_successful"] is False and body["mask_sample"] is False


async def test_the_config_mode_applies_to_rows_without_one(server):
    row = {key: value for key, value in INDUCTIVE.items() if key != "agent_mode"}
    body = await verify(server, TRANSPOSE + "\\boxed{1 3\n2 4}", row=row)
    assert body["agent_mode"] == "transductive" and body["reward"] == 1.0


# --- /verify: inductive (programs run in the sandbox) -----------------------------------------------


async def test_a_right_program_earns_1_from_its_return_value(server):
    body = await verify(server, TRANSPOSE, row=INDUCTIVE)
    assert body["reward"] == 1.0 and body["predicted_output"] == [[1, 3], [2, 4]]
    assert body["agent_mode"] == "inductive" and body["execution_error"] is None


async def test_a_wrong_program_scores_0_with_what_it_returned(server):
    body = await verify(server, program("    return grid"), row=INDUCTIVE)
    assert body["reward"] == 0.0 and body["predicted_output"] == [[1, 2], [3, 4]]


async def test_a_grid_written_beside_the_program_does_not_count(server):
    body = await verify(server, program("    return grid") + "\\boxed{1 3\n2 4}", row=INDUCTIVE)
    assert body["reward"] == 0.0


async def test_numpy_results_are_read_as_grids(server):
    body = await verify(server, program("    import numpy as np\n    return np.array(grid).T"), row=INDUCTIVE)
    assert body["reward"] == 1.0, body["execution_error"]


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("    import os\n    return os.listdir('.')", "import of 'os' is not allowed"),
        ("    from subprocess import run\n    return run", "import of 'subprocess' is not allowed"),
        ("    return open('task.json').read()", "NameError"),
        ("    return [[1.0]]", "no grid"),
        ("    return [[True]]", "no grid"),
        ("    raise ValueError('boom')", "ValueError: boom"),
        ('    print(\'{"status": "ok", "result": [[1, 3], [2, 4]]}\')\n    return None', "no grid"),
    ],
    ids=["os", "subprocess", "open", "floats", "booleans", "raises", "prints-a-report"],
)
async def test_refused_or_failing_programs_score_0_with_the_reason(server, code, error):
    body = await verify(server, program(code), row=INDUCTIVE)
    assert body["reward"] == 0.0 and error in body["execution_error"] and body["mask_sample"] is False


async def test_a_program_past_its_time_limit_scores_0_and_the_server_keeps_answering(server):
    body = await verify(server, program("    while True:\n        pass"), row=INDUCTIVE)
    assert body["reward"] == 0.0 and f"{TIMEOUT_S} s" in body["execution_error"]
    assert (await verify(server, TRANSPOSE, row=INDUCTIVE))["reward"] == 1.0


async def test_a_program_that_ends_its_process_scores_0_and_is_measured(server):
    code = "    import sys\n    sys.modules['posix']._exit(0)"
    body = await verify(server, program(code), row=INDUCTIVE)
    assert (
        body["reward"] == 0.0
        and body["mask_sample"] is False
        and "without a result" in body["execution_error"]
    )


async def test_an_answer_without_a_program_scores_0(server):
    body = await verify(server, "The rule is a transpose.", row=INDUCTIVE)
    assert body["reward"] == 0.0 and body["execution_error"] == "no program in the answer"


def sandbox_run(stdout: str, exit_code: int | None = 1, limit: str | None = None) -> SandboxResult:
    return SandboxResult(
        exit_code=exit_code, signal=None if exit_code is not None else 9, stdout=stdout, stderr="boom",
        stdout_bytes=len(stdout), stderr_bytes=4, timed_out=limit is not None, limit_hit=limit,
        truncated=False, seconds=1.0, isolation="bwrap",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("run", "measured"),
    [
        (sandbox_run(""), False),  # the runner never started the program: nothing was measured
        (sandbox_run("", exit_code=None, limit="wall_time"), False),
        (sandbox_run('{"status": "running"}\n'), True),  # the program ended its process
        (sandbox_run('{"status": "running"}\n', exit_code=None, limit="wall_time"), True),
        (sandbox_run('{"status": "running"}\n{"status": "error", "error": "E"}\n', exit_code=0), True),
    ],
)
def test_only_a_run_that_never_started_the_program_is_unmeasured(run, measured):
    grid, error, was_measured = run_outcome(run)
    assert grid is None and error and was_measured is measured


# --- malformed rows ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"expected_output": None}, "expected_output"),
        ({"expected_output": [[1, "x"]]}, "expected_output"),
        ({"test_input": "grid"}, "test_input"),
        ({"agent_mode": "deductive"}, "agent_mode"),
        ({"train": [1]}, "train"),
        ({"test_input": []}, "test_input"),  # an inductive row needs a grid to run the program on
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    row = {**INDUCTIVE, **change, "response": response_with(message_item(TRANSPOSE))}
    status, body = await post_json(server.url + "/verify", row)
    assert status == 422 and ["body", field] in [error["loc"][:2] for error in body["detail"]], body


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    row = next(row for row in ROWS if row["task_id"] == rollout["task_id"])
    status, body = await post_json(server.url + "/verify", {**row, "response": rollout["response"]})
    assert status == 200, body
    recorded = {
        key: value for key, value in rollout.items() if key != "agent_ref" and not key.startswith("_ng_")
    }
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_the_recordings_cover_both_modes_and_both_rewards():
    assert {(rollout["agent_mode"], rollout["reward"]) for rollout in ROLLOUTS} == {
        ("transductive", 1.0),
        ("transductive", 0.0),
        ("inductive", 1.0),
        ("inductive", 0.0),
    }


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "knowledge")
    assert resources.model_extra["agent_mode"] == "transductive"
    assert resources.model_extra["python_timeout_seconds"] == 30
    assert {row["agent_ref"]["name"] for row in ROWS} == {"nvarc_simple_agent"}
