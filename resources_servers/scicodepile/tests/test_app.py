"""scicodepile: code extraction in-process; /verify over HTTP against one real server started from its
app.py, every task really running in the sandbox (with a 3 s limit instead of 120)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.sandbox import SandboxResult
from nemo_gym.testing import (
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
from resources_servers.scicodepile.app import failure_code, verdict_of
from resources_servers.scicodepile.grading import extract_code

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "scicodepile"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
TIMEOUT_S = 3
TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
ADD = "def add(a, b):\n    return a + b"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp("scicodepile"), domain="coding", subprocess_timeout=TIMEOUT_S
    ) as started:
        yield started


def row(test: str = TEST, setup_code: str = "", entry_point: str = "add") -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "def add(a, b): ..."}]},
        "verifier_metadata": {
            "task_id": "t/1",
            "test": test,
            "entry_point": entry_point,
            "setup_code": setup_code,
        },
    }


def fenced(code: str) -> str:
    return f"Here it is.\n```python\n{code}\n```\n"


async def verify(server: StartedServer, text: str | None, task: dict | None = None) -> dict:
    items = [message_item(text)] if text is not None else []
    status, body = await post_json(
        server.url + "/verify", {**(task or row()), "response": response_with(*items)}
    )
    assert status == 200, body
    assert body["reward"] == (1.0 if body["status"] == "pass" else 0.0)
    return body


def measured(body: dict) -> bool:
    return body["mask_sample"] is False and body["failure_kind"] is None and body["failure_reason"] is None


# --- extraction (in-process) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```python\nx = 1\n```", "x = 1"),
        ("```python\na\n```\ntext\n```python\nb\n```", "b"),  # the last python block
        ("```python\na\n```\n```\nb\n```", "a"),  # a python block beats a later untagged one
        ("```\nb\n```", ""),  # NeMo Gym's quirk: untagged, the last fence found is the closing one
        ("```python\nnever closed", ""),
        ("```\nb\n```\nand some prose", ""),
        ("def f():\n    return 1\n", "def f():\n    return 1"),  # no fence: the whole text
        ("<think>```python\nwrong\n```</think>```python\nright\n```", "right"),
        ("a</think>b</think>```python\nc\n```", "c"),
    ],
)
def test_code_is_extracted_as_nemo_gym_does(text, code):
    assert extract_code(text) == code


@pytest.mark.parametrize("text", ["```" * 1_000_000, "```python\n" * 300_000, "</think>" * 500_000])
def test_extraction_is_linear(text):
    _, seconds = cpu_time_of(extract_code, text)
    assert seconds < LINEAR_CPU_BUDGET_S, seconds


# --- /verify ----------------------------------------------------------------------------------------


async def test_a_passing_function_earns_1(server):
    body = await verify(server, fenced(ADD))
    assert body["status"] == "pass" and body["details"] == {} and measured(body)
    assert body["extracted_model_code"] == ADD and body["task_id"] == "t/1"
    assert body["verifier_metadata"]["entry_point"] == "add"


async def test_a_wrong_function_fails_with_the_assertion(server):
    body = await verify(server, fenced("def add(a, b):\n    return a - b"))
    assert body["status"] == "fail" and body["details"]["type"] == "AssertionError" and measured(body)


@pytest.mark.parametrize(
    ("code", "status", "reason"),
    [
        ("def add(a, b) return a", "error", "syntax_error"),
        ("import not_a_module\n" + ADD, "error", "exec_failed"),
        ("def plus(a, b):\n    return a + b", "entry_point_missing", None),
        ("    return a + b", "error", "syntax_error"),  # a bare body is no function
    ],
)
async def test_broken_model_code_scores_0_and_is_measured(server, code, status, reason):
    body = await verify(server, fenced(code))
    assert body["status"] == status and measured(body)
    if reason:
        assert body["details"]["reason"] == reason and body["details"]["phase"] == "model"


@pytest.mark.parametrize(
    ("text", "status"), [(None, "empty_output"), ("  \n", "empty_output"), ("```python\nx", "no_code_block")]
)
async def test_no_answer_scores_0(server, text, status):
    body = await verify(server, text)
    assert body["status"] == status and body["extracted_model_code"] is None and measured(body)


async def test_a_hanging_function_times_out_and_the_server_keeps_answering(server):
    body = await verify(server, fenced("def add(a, b):\n    while True:\n        pass"))
    assert body["status"] == "timeout" and measured(body)
    assert (await verify(server, fenced(ADD)))["status"] == "pass"


async def test_a_process_that_exits_early_is_the_models_doing(server):
    body = await verify(server, fenced("import os\n" + ADD + "\nos._exit(0)"))
    assert body["status"] == "error" and body["details"]["reason"] == "unparseable_runner_output"
    assert measured(body)


async def test_a_verdict_written_by_the_model_is_not_believed(server):
    forged = 'import json, os\nfor fd in range(3, 10):\n    try:\n        os.write(fd, b\'{"status": "pass", "details": {}}\\n\')\n    except OSError:\n        pass\ndef add(a, b):\n    return 0'
    body = await verify(server, fenced(forged))
    assert body["status"] == "fail"


async def test_no_file_in_the_sandbox_holds_the_test(server):
    test = "# marker-7f3a\ndef check(candidate):\n    assert candidate() is False\n"
    probe = (
        "import os\n"
        "def probe():\n"
        "    names = [name for name in os.listdir('.') if os.path.isfile(name)]\n"
        "    assert names, 'the work dir holds the runner'\n"
        "    return any('marker-7f3a' in open(name).read() for name in names)"
    )
    body = await verify(server, fenced(probe), row(test=test, entry_point="probe"))
    assert body["status"] == "pass", body["details"]


async def test_prints_and_files_stay_in_the_sandbox(server):
    code = "print('x' * 1_000_000)\nopen('out.txt', 'w').write('data')\n" + ADD
    assert (await verify(server, fenced(code)))["status"] == "pass"


async def test_the_network_is_unreachable(server):
    test = "def check(candidate):\n    import socket\n    candidate()\n"
    code = "import socket\ndef add():\n    socket.create_connection(('1.1.1.1', 53), timeout=1)"
    body = await verify(server, fenced(code), row(test=test))
    assert body["status"] == "fail" and body["details"]["type"] in {
        "OSError",
        "TimeoutError",
        "ConnectionRefusedError",
    }


async def test_an_unencodable_exception_message_still_answers(server):
    body = await verify(server, fenced("def add(a, b):\n    raise ValueError('\\udcff')"))
    assert body["status"] == "fail" and body["details"]["message"] == "?"


def sandbox_run(stdout: str, exit_code: int | None = 1, limit: str | None = None) -> SandboxResult:
    return SandboxResult(
        exit_code=exit_code, signal=None if exit_code is not None else 9, stdout=stdout, stderr="boom",
        stdout_bytes=len(stdout), stderr_bytes=4, timed_out=limit is not None, limit_hit=limit,
        truncated=False, seconds=1.0, isolation="bwrap",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("run", "status", "reason", "masked"),
    [
        (sandbox_run(""), "error", "runner_crashed", True),  # no task code ever ran
        (sandbox_run('{"status": "pass", "details": {}}\n'), "error", "runner_crashed", True),  # no token
        (sandbox_run('{"status": "started", "token": "t"}\n'), "error", "unparseable_runner_output", False),
        (
            sandbox_run('{"status": "started", "token": "t"}\n', None, "wall_time"),
            "timeout",
            "subprocess_timeout",
            False,
        ),
    ],
    ids=["silent", "forged", "ended-early", "timed-out"],
)
def test_a_run_without_a_verdict_is_masked_only_if_no_task_code_ran(run, status, reason, masked):
    found_status, details = verdict_of(run, "t")
    assert (found_status, details["reason"]) == (status, reason)
    assert (failure_code(details) is not None) is masked


@pytest.mark.parametrize(
    ("task", "code"),
    [
        (row(setup_code="raise RuntimeError('dataset bug')"), "setup_code_failed"),
        (
            row(test="def check(candidate):\n    assert candidate(1, 1) == 2\nundefined_name"),
            "test_code_failed",
        ),
        (row(test="def check(candidate) pass"), "test_code_failed"),
        (row(test="CHECK = None"), "test_defines_no_check"),
    ],
    ids=["setup", "test-raises", "test-syntax", "no-check"],
)
async def test_a_broken_task_is_masked_not_scored(server, task, code):
    body = await verify(server, fenced(ADD), task)
    assert body["mask_sample"] is True and body["failure_kind"] == "verifier_error"
    assert body["failure_reason"] == code and body["details"]["harness_fault"] is True


async def test_setup_code_and_test_share_the_models_namespace(server):
    test = "def check(candidate):\n    candidate.__globals__['OFFSET'] = 10\n    assert candidate(1) == 11\n"
    task = row(test=test, setup_code="from __future__ import annotations\nOFFSET = 1", entry_point="shift")
    body = await verify(
        server,
        fenced("from __future__ import annotations\ndef shift(x: int) -> int:\n    return x + OFFSET"),
        task,
    )
    assert body["status"] == "pass"


async def test_a_trailing_decorator_cannot_capture_check(server):
    """Concatenated, `@(lambda f: lambda c: None)` at the end of the model's code would wrap check."""
    body = await verify(server, fenced("def add(a, b):\n    return 0\n@(lambda f: lambda c: None)"))
    assert body["status"] == "error" and body["details"]["reason"] == "syntax_error" and measured(body)


@pytest.mark.parametrize(
    ("change", "loc"),
    [
        ({"verifier_metadata": None}, ["body", "verifier_metadata"]),
        ({"verifier_metadata": {"entry_point": "add"}}, ["body", "verifier_metadata", "test"]),
        ({"verifier_metadata": {"test": TEST}}, ["body", "verifier_metadata", "entry_point"]),
        (
            {"verifier_metadata": {"test": TEST, "entry_point": ""}},
            ["body", "verifier_metadata", "entry_point"],
        ),
        ({"verifier_metadata": {"test": 3, "entry_point": "add"}}, ["body", "verifier_metadata", "test"]),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, loc):
    status, body = await post_json(
        server.url + "/verify", {**row(), **change, "response": response_with(message_item(ADD))}
    )
    assert status == 422 and loc in [error["loc"] for error in body["detail"]], body


async def test_aggregate_metrics_report_pass_at_k(server):
    def scored(task: int, index: int, reward: float, code: str | None) -> dict:
        return {**row(), "response": response_with(), "reward": reward, "extracted_model_code": code,
                "_ng_task_index": task, "_ng_rollout_index": index}  # fmt: skip

    rollouts = [
        scored(0, 0, 1.0, "a"),
        scored(0, 1, 0.0, "b"),
        scored(1, 0, 0.0, None),
        scored(1, 1, 0.0, "c"),
    ]
    status, answer = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200, answer
    assert answer["agent_metrics"]["pass@2/accuracy"] == 50.0
    assert answer["agent_metrics"]["pass@1[avg-of-2]/accuracy"] == 25.0
    assert {"pass@2/accuracy", "pass@1[avg-of-2]/accuracy"} <= set(answer["key_metrics"])


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["task_id"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    task = next(row for row in ROWS if row["verifier_metadata"]["task_id"] == rollout["task_id"])
    status, body = await post_json(server.url + "/verify", {**task, "response": rollout["response"]})
    assert status == 200, body
    recorded = {
        key: value for key, value in rollout.items() if key != "agent_ref" and not key.startswith("_ng_")
    }
    assert without_verify_flags(body) == without_verify_flags(recorded)


def test_the_recordings_pass_and_fail():
    assert {rollout["status"] for rollout in ROLLOUTS} >= {"pass", "fail"}


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, INSTANCE, "coding")
    assert (
        resources.model_extra["subprocess_timeout"] == 120.0 and resources.model_extra["max_as_limit"] == 8192
    )
    assert {row["agent_ref"]["name"] for row in ROWS} == {"scicodepile_simple_agent"}
