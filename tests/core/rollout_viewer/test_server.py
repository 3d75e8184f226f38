"""`gym view` from the outside: a real `gym view <file> --port 0` process per results file, asked over HTTP
(summary, paging, sorting, filters, search, one rollout, tasks, bad input, a short schemathesis run), the
page and its assets, `--static` (and the legacy `ng_viewer`), and how the server starts and stops.

Two results files: a run collected for real by `gym eval run` (mcqa with replay_model; one question was
never recorded, so that rollout failed for good with HTTP 404), and a richer file written from recorded
rollouts (tool calls, reasoning, token ids, model text that looks like HTML, an unreadable line in the
middle and an unfinished last line)."""

from __future__ import annotations

import copy
import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup

from tests.helpers import (
    REPO_ROOT,
    STARTUP_DEADLINE_S,
    OutputReader,
    gym_command,
    one_line_error,
    process_alive,
    running_deployment,
    socket_inodes,
    stop_process,
    wait_until_gone,
    worker_pids,
)

DATA = REPO_ROOT / "resources_servers"
AGENT = "mcqa_simple_agent"
UNRECORDED_QUESTION = "Which letter answers the unrecorded quokka question? Think it over."
SCRIPT_TEXT = "<img src=x onerror=alert(1)></script>"
QUOTED_TEXT = 'She said "hello Zebra" and then\nsecond Line of the Quokkaword answer'
UNREADABLE_WORD = "Wombatword"  # only in the unreadable line
TAIL_WORD = "Tailword"  # only in the unfinished last line
REQUEST_TIMEOUT_S = 10
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


# ---- the two results files ----------------------------------------------------------------------------------


def collect_run(folder: Path) -> Path:
    """mcqa's example rows and one row whose question was never recorded, collected from a deployment
    playing mcqa's recordings (replay_model): five results, one terminal http_404 failure, the
    materialized inputs, the aggregate metrics. (`gym eval run` would refuse the unrecorded row up
    front; `gym collect` sends what it is given.)"""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (DATA / "mcqa/data/example.jsonl").read_text().splitlines()]
    unrecorded = copy.deepcopy(rows[0])
    unrecorded["responses_create_params"]["input"][-1]["content"] = UNRECORDED_QUESTION
    (folder / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in [*rows, unrecorded]))
    config_paths = "+config_paths=[resources_servers/mcqa/configs/mcqa.yaml,responses_api_models/replay_model/configs/replay_model.yaml]"
    recordings = "++policy_model.responses_api_models.replay_model.rollouts_jsonl_fpath=[resources_servers/mcqa/data/example_rollouts.jsonl]"
    with running_deployment([config_paths, recordings], REPO_ROOT) as running:
        result = subprocess.run(
            gym_command(
                "collect", f"++head_server.port={running.head_url.rsplit(':', 1)[1]}", "--input", "rows.jsonl",
                "-o", "out/rollouts.jsonl", f"+agent_name={AGENT}",
            ),
            cwd=folder, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    output = result.stdout + result.stderr
    assert "5 succeeded, 1 failed" in output, output
    return folder / "out/rollouts.jsonl"


def recorded(environment: str) -> list[dict[str, Any]]:
    path = DATA / environment / "data/example_rollouts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def stamped(record: dict[str, Any], task: int, rollout: int, agent: str) -> dict[str, Any]:
    return {**record, "_ng_task_index": task, "_ng_rollout_index": rollout, "agent_ref": {"name": agent}}


def answered(record: dict[str, Any], text: str) -> dict[str, Any]:
    """`record` with `text` as its final assistant message."""
    record = copy.deepcopy(record)
    message = [item for item in record["response"]["output"] if item.get("type") == "message"][-1]
    message["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    return record


@dataclass
class RichRun:
    path: Path
    records: list[dict[str, Any]]  # by row id (the unreadable and the unfinished lines are not rows)
    lines: list[str]  # the JSON line of each row, as written

    def rows_with(self, text: str) -> set[int]:
        return {row_id for row_id, line in enumerate(self.lines) if text.lower() in line.lower()}


def write_rich_run(folder: Path) -> RichRun:
    """Rows 0-4: tool-call environment (tasks 0-1, rows 2-4 call a tool); an unreadable line; rows 5-9:
    reasoning (tasks 2-3, reward written after the other verify fields); row 10 carries token ids on its
    answer; row 11 answers with HTML; row 12 has no reward and a quoted, two-line answer; then an
    unfinished line."""
    folder.mkdir(parents=True, exist_ok=True)
    tools, reasoning = recorded("example_single_tool_call"), recorded("reasoning_gym")
    assert all(item["type"] == "reasoning" for row in reasoning for item in row["response"]["output"][:1])
    records = [stamped(row, 0, index, "weather_agent") for index, row in enumerate(tools[:2])]
    records += [stamped(row, 1, index, "weather_agent") for index, row in enumerate(tools[2:])]
    reward_last = [
        {key: value for key, value in row.items() if key != "reward"} | {"reward": row["reward"]}
        for row in reasoning
    ]
    records += [stamped(row, 2, index, "logic_agent") for index, row in enumerate(reward_last[:3])]
    records += [stamped(row, 3, index, "logic_agent") for index, row in enumerate(reward_last[3:])]
    with_tokens = copy.deepcopy(tools[2]) | {"reward": 0.5}
    with_tokens["response"]["output"][-1] |= {
        "prompt_token_ids": [151644, 872, 198],
        "generation_token_ids": [785, 9104, 151645],
        "generation_log_probs": [-0.125, -2.5, -0.0625],
    }
    records.append(stamped(with_tokens, 4, 0, "weather_agent"))
    html_answer = answered(tools[0], f"Careful: {SCRIPT_TEXT} done") | {"reward": 0.25}
    records.append(stamped(html_answer, 4, 1, "weather_agent"))
    no_reward = answered(tools[1], QUOTED_TEXT)
    del no_reward["reward"]
    records.append(stamped(no_reward, 5, 0, "weather_agent"))
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    written = [*lines[:5], f'{{"reward": 1.0, "_ng_task_index": 0, "{UNREADABLE_WORD} broken', *lines[5:]]
    unfinished = json.dumps(stamped({"reward": 1.0, "note": TAIL_WORD}, 9, 0, "weather_agent"))[:-1]
    path = folder / "rich.jsonl"
    path.write_text("\n".join(written) + "\n" + unfinished)
    return RichRun(path, records, lines)


# ---- a `gym view` process ---------------------------------------------------------------------------------


@dataclass
class Viewer:
    process: subprocess.Popen
    url: str
    output: OutputReader
    stderr_path: Path


@contextmanager
def viewing(path: Path, *args: str, workdir: Path | None = None) -> Iterator[Viewer]:
    """`gym view <path> --port 0 <args>` until the block ends; the URL is read from its first stdout line."""
    workdir = workdir or path.parent
    stderr_path = workdir / f"view-{time.monotonic_ns()}.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            gym_command("view", str(path), "--port", "0", *args),
            cwd=workdir,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        output = OutputReader(process)
        first = output.wait_for("", STARTUP_DEADLINE_S)
        found = re.fullmatch(r"Viewing (.+) at (http://\S+)/  \(Ctrl-C stops\)", first)
        assert found and found[1] == str(path), (first, stderr_path.read_text())
        yield Viewer(process, found[2], output, stderr_path)
    finally:
        stop_process(process)


def answer(viewer: Viewer, path: str, **params: Any) -> requests.Response:
    """GET `path` of the viewer; never a 5xx."""
    response = requests.get(viewer.url + path, params=params, timeout=REQUEST_TIMEOUT_S)
    assert response.status_code < 500, response.text
    return response


def api(viewer: Viewer, path: str, **params: Any) -> Any:
    response = answer(viewer, path, **params)
    assert response.status_code == 200, response.text
    return response.json()


def complete(viewer: Viewer, timeout_s: float = 20.0) -> dict[str, Any]:
    """The summary, once the index has read every line (polled until a deadline)."""
    deadline = time.monotonic() + timeout_s
    while not (summary := api(viewer, "/api/summary"))["complete"]:
        assert time.monotonic() < deadline, summary
        time.sleep(0.05)
    return summary


def listed(viewer: Viewer, **params: Any) -> list[dict[str, Any]]:
    page = api(viewer, "/api/rollouts", limit=1000, **params)
    assert page["total"] == len(page["rows"]) and page["complete"]
    return page["rows"]


def ids(viewer: Viewer, **params: Any) -> list[int]:
    return [row["id"] for row in listed(viewer, **params)]


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return collect_run(tmp_path_factory.mktemp("collected"))


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> RichRun:
    return write_rich_run(tmp_path_factory.mktemp("rich"))


@pytest.fixture(scope="module")
def collected_viewer(collected: Path) -> Iterator[Viewer]:
    with viewing(collected) as viewer:
        complete(viewer)
        yield viewer


@pytest.fixture(scope="module")
def rich_viewer(rich: RichRun) -> Iterator[Viewer]:
    with viewing(rich.path) as viewer:
        complete(viewer)
        yield viewer


def results_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---- the API ----------------------------------------------------------------------------------------------


def test_summary_of_a_collected_run(collected: Path, collected_viewer: Viewer) -> None:
    summary = complete(collected_viewer)
    rewards = [row["reward"] for row in results_of(collected)]
    assert len(rewards) == 5
    assert {key: summary[key] for key in ("rollouts", "results", "failed", "failed_attempts", "tasks")} == {
        "rollouts": 6,
        "results": 5,
        "failed": 1,
        "failed_attempts": 1,
        "tasks": 6,
    }
    assert summary["failure_classes"] == {"http_404": 1}
    assert summary["mean_reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert summary["agents"] == [AGENT]
    assert summary["unreadable_lines"] == {"count": 0, "examples": []}
    metrics = json.loads(collected.with_name("rollouts_aggregate_metrics.json").read_text())
    assert summary["aggregate_metrics"] == metrics and summary["aggregate_metrics_error"] is None
    sidecars = ("_failures.jsonl", "_materialized_inputs.jsonl", "_aggregate_metrics.json")
    expected_files = {collected, *(collected.with_name(collected.stem + suffix) for suffix in sidecars)}
    assert {Path(path) for path in summary["files"].values()} == expected_files


def test_summary_counts_an_unreadable_line_and_leaves_out_the_unfinished_one(
    rich: RichRun, rich_viewer: Viewer
) -> None:
    summary = complete(rich_viewer)
    rewards = [record["reward"] for record in rich.records if "reward" in record]
    assert (summary["rollouts"], summary["results"], summary["failed"]) == (13, 13, 0)
    assert summary["mean_reward"] == pytest.approx(sum(rewards) / len(rewards))
    assert summary["tasks"] == 6 and summary["agents"] == ["logic_agent", "weather_agent"]
    unreadable = summary["unreadable_lines"]
    assert unreadable["count"] == 1, unreadable
    assert unreadable["examples"][0].startswith("rich.jsonl:6: not valid JSON"), unreadable
    assert summary["aggregate_metrics"] is None and summary["aggregate_metrics_error"] is None


def test_pages_are_disjoint_and_cover_every_row(rich_viewer: Viewer) -> None:
    seen: list[int] = []
    for offset in range(0, 16, 4):
        page = api(rich_viewer, "/api/rollouts", offset=offset, limit=4)
        assert page["total"] == 13 and page["complete"]
        assert len(page["rows"]) == min(4, 13 - offset)
        seen += [row["id"] for row in page["rows"]]
    assert seen == list(range(13))
    weather = [
        api(rich_viewer, "/api/rollouts", agent="weather_agent", offset=offset, limit=3)
        for offset in (0, 3, 6)
    ]
    assert {page["total"] for page in weather} == {8}
    assert [row["id"] for page in weather for row in page["rows"]] == [0, 1, 2, 3, 4, 10, 11, 12]
    assert api(rich_viewer, "/api/rollouts", offset=50)["rows"] == []


def test_sort_by_reward_and_by_task(rich: RichRun, rich_viewer: Viewer) -> None:
    by_reward = listed(rich_viewer, sort="reward", order="desc")
    rewards = [row["reward"] for row in by_reward]
    assert rewards[-1] is None and None not in rewards[:-1], "a missing reward comes last"
    assert rewards[:-1] == sorted(rewards[:-1], reverse=True) and rewards[0] == 1.0
    assert [row["id"] for row in by_reward][-1] == 12
    assert sorted(row["id"] for row in by_reward) == list(range(13))
    ascending = [row["reward"] for row in listed(rich_viewer, sort="reward")]
    assert ascending[:-1] == sorted(rewards[:-1]) and ascending[-1] is None
    by_task = [(row["task"], row["rollout"]) for row in listed(rich_viewer, sort="task", order="desc")]
    expected = sorted(
        ((record["_ng_task_index"], record["_ng_rollout_index"]) for record in rich.records), reverse=True
    )
    assert by_task == expected
    assert [row["id"] for row in listed(rich_viewer, order="desc")] == list(range(12, -1, -1))


def test_filters(rich_viewer: Viewer, collected_viewer: Viewer) -> None:
    assert ids(rich_viewer, reward_min=0.2, reward_max=0.6) == [10, 11]
    assert ids(rich_viewer, reward_max=0.0) == [7, 8, 9]
    assert ids(rich_viewer, reward_min=1) == [0, 1, 2, 3, 4, 5, 6]
    assert ids(rich_viewer, task=1) == [2, 3, 4]
    assert ids(rich_viewer, task=7) == []
    assert ids(rich_viewer, agent="logic_agent") == [5, 6, 7, 8, 9]
    assert ids(rich_viewer, agent="logic_agent", reward_min=0.5) == [5, 6]
    assert ids(rich_viewer, failed="true") == []
    assert len(ids(rich_viewer, failed="false")) == 13
    failed = listed(collected_viewer, failed="true")
    assert [(row["source"], row["task"], row["failure"]) for row in failed] == [("failure", 5, "http_404")]
    not_failed = listed(collected_viewer, failed="false")
    assert sorted(row["task"] for row in not_failed) == [0, 1, 2, 3, 4]
    assert {row["source"] for row in not_failed} == {"result"}


def test_search(rich: RichRun, rich_viewer: Viewer) -> None:
    assert ids(rich_viewer, q="quokkaword") == [12]
    assert ids(rich_viewer, q="QUOKKAWORD") == [12], "search ignores case"
    assert ids(rich_viewer, q='said "hello zebra" and') == [12], (
        "a double quote is looked for as JSON writes it"
    )
    assert ids(rich_viewer, q="and then\nsecond line") == [12], "so is a line break"
    assert ids(rich_viewer, q="onerror=alert(1)") == [11]
    assert ids(rich_viewer, q="generation_log_probs") == [10]
    assert ids(rich_viewer, q="San Francisco") == sorted(rich.rows_with("San Francisco"))
    assert len(rich.rows_with("San Francisco")) >= 4
    assert ids(rich_viewer, q="knights_knaves") == sorted(rich.rows_with("knights_knaves"))
    assert ids(rich_viewer, q=UNREADABLE_WORD) == [], "text of an unreadable line belongs to no rollout"
    assert ids(rich_viewer, q=TAIL_WORD) == [], "nor does text of the unfinished last line"
    assert ids(rich_viewer, q="San Francisco", task=1) == [2, 3, 4]


def test_search_reaches_a_failed_rollout(collected_viewer: Viewer) -> None:
    rows = listed(collected_viewer, q="unknown task: no recording")
    assert [(row["source"], row["task"]) for row in rows] == [("failure", 5)]


def test_a_rollout_with_a_tool_call(rich: RichRun, rich_viewer: Viewer) -> None:
    shown = api(rich_viewer, "/api/rollouts/2")
    assert (shown["id"], shown["source"], shown["line"]) == (2, "result", 3)
    assert shown["summary"]["task"] == 1 and shown["summary"]["tool_calls"] == 1
    steps = shown["conversation"]
    assert [(step["source"], step["kind"]) for step in steps] == [
        ("input", "message"),
        ("input", "message"),
        ("output", "tool_call"),
        ("output", "tool_output"),
        ("output", "message"),
    ]
    recorded_call, recorded_output, recorded_answer = rich.records[2]["response"]["output"]
    call, output, final = steps[2:]
    assert (call["name"], call["arguments"]) == ("get_weather", recorded_call["arguments"])
    assert output["call_id"] == call["call_id"] == recorded_call["call_id"]
    assert output["text"] == recorded_output["output"]
    assert final["role"] == "assistant" and final["final"] is True
    assert final["text"] == recorded_answer["content"][0]["text"]
    assert [step for step in steps if step.get("final")] == [final]
    assert steps[1]["role"] == "user" and steps[1]["text"] == "humidity in sf"
    assert shown["verify"] == {"reward": 1.0}
    assert shown["failure"] is None and shown["failed_attempts"] == []
    assert shown["raw"] == rich.records[2]


def test_a_rollout_with_reasoning_shows_verify_fields_reward_first(
    rich: RichRun, rich_viewer: Viewer
) -> None:
    shown = api(rich_viewer, "/api/rollouts/5")
    kinds = [step["kind"] for step in shown["conversation"]]
    assert kinds == ["message", "reasoning", "message"]
    reasoning = rich.records[5]["response"]["output"][0]
    assert shown["conversation"][1]["text"].startswith(reasoning["summary"][0]["text"][:200])
    written = [
        key for key in rich.records[5] if key not in ("responses_create_params", "response", "agent_ref")
    ]
    assert written[-3:] == ["reward", "_ng_task_index", "_ng_rollout_index"], "reward is written last"
    assert list(shown["verify"]) == [
        "reward",
        *(key for key in written if not key.startswith(("_ng_", "reward"))),
    ]
    assert shown["verify"]["reward"] == rich.records[5]["reward"]


def test_token_data_is_shown_on_the_step_that_carries_it(rich_viewer: Viewer) -> None:
    steps = api(rich_viewer, "/api/rollouts/10")["conversation"]
    assert [step["kind"] for step in steps if "tokens" in step] == ["message"]
    final = steps[-1]
    assert final["final"] is True
    assert final["tokens"] == {
        "prompt_token_ids": [151644, 872, 198],
        "generation_token_ids": [785, 9104, 151645],
        "generation_log_probs": [-0.125, -2.5, -0.0625],
    }


def test_model_text_comes_back_as_data(rich_viewer: Viewer) -> None:
    rows = listed(rich_viewer, task=4, sort="task")
    assert rows[1]["preview"] == f"Careful: {SCRIPT_TEXT} done"
    assert api(rich_viewer, "/api/rollouts/11")["conversation"][-1]["text"] == f"Careful: {SCRIPT_TEXT} done"


def test_a_failed_rollout_shows_its_failure_and_what_was_asked(collected_viewer: Viewer) -> None:
    (row,) = listed(collected_viewer, failed="true")
    shown = api(collected_viewer, f"/api/rollouts/{row['id']}")
    failure = shown["failure"]
    assert (failure["class"], failure["attempt"], failure["terminal"], failure["status"]) == (
        "http_404",
        1,
        True,
        404,
    )
    assert UNRECORDED_QUESTION in failure["message"]
    assert shown["conversation"] == [
        {"source": "input", "kind": "message", "role": "user", "text": UNRECORDED_QUESTION}
    ]
    assert shown["verify"] == {}
    assert (shown["summary"]["failure"], shown["summary"]["reward"]) == ("http_404", None)
    assert shown["source"] == "failure"


def test_task_pass_rates_and_histogram(
    rich: RichRun, rich_viewer: Viewer, collected: Path, collected_viewer: Viewer
) -> None:
    tasks = api(rich_viewer, "/api/tasks")
    per_task: dict[int, list[float | None]] = {}
    for record in rich.records:
        per_task.setdefault(record["_ng_task_index"], []).append(record.get("reward"))
    expected = []
    for task, rewards in sorted(per_task.items()):
        passed = sum(1 for reward in rewards if reward is not None and reward >= 1.0)
        expected.append(
            {
                "task": task,
                "rollouts": len(rewards),
                "passed": passed,
                "pass_rate": pytest.approx(passed / len(rewards)),
                "mean_reward": pytest.approx(sum(given) / len(given))
                if (given := [r for r in rewards if r is not None])
                else None,
                "failed": 0,
            }
        )
    assert tasks["rows"] == expected and tasks["total"] == 6 and tasks["complete"]
    # pass rates 1, 1, 2/3, 0, 0, 0: three tasks at 0 %, one at 70 % (2/3 rounded), two at 100 %.
    assert tasks["histogram"] == [3, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2]
    by_rate = api(rich_viewer, "/api/tasks", sort="pass_rate", order="desc", limit=2)
    assert [row["task"] for row in by_rate["rows"]] == [1, 0] and by_rate["total"] == 6

    collected_tasks = api(collected_viewer, "/api/tasks")
    rewards = {row["_ng_task_index"]: row["reward"] for row in results_of(collected)}
    assert [(row["task"], row["passed"], row["failed"]) for row in collected_tasks["rows"]] == [
        *((task, int(rewards[task] >= 1.0), 0) for task in range(5)),
        (5, 0, 1),
    ]
    passed = sum(1 for reward in rewards.values() if reward >= 1.0)
    assert collected_tasks["histogram"] == [6 - passed, *[0] * 9, passed]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/api/rollouts", {"limit": 0}, "limit"),
        ("/api/rollouts", {"limit": "abc"}, "limit"),
        ("/api/rollouts", {"limit": 1001}, "limit"),
        ("/api/rollouts", {"sort": "bogus"}, "sort"),
        ("/api/rollouts", {"reward_min": "nan"}, "reward_min"),
        ("/api/rollouts", {"reward_max": "inf"}, "reward_max"),
        ("/api/rollouts", {"failed": "maybe"}, "failed"),
        ("/api/rollouts", {"bogus": "1"}, "bogus"),
        ("/api/rollouts", {"offset": -1}, "offset"),
        ("/api/rollouts", {"q": "x" * 501}, "q"),
        ("/api/tasks", {"sort": "reward"}, "sort"),
        ("/api/tasks", {"limit": 0}, "limit"),
    ],
)
def test_bad_query_is_a_422_naming_the_field(
    rich_viewer: Viewer, path: str, params: dict, field: str
) -> None:
    response = answer(rich_viewer, path, **params)
    assert response.status_code == 422, response.text
    assert [entry["loc"] for entry in response.json()["detail"]] == [["query", field]]


@pytest.mark.parametrize(
    ("path", "names"),
    [
        ("/api/rollouts/999999", "row_id 999999"),
        ("/api/rollouts/-1", "row_id -1"),
        ("/assets/nope.js", "nope.js"),
    ],
)
def test_what_does_not_exist_is_a_404_in_the_gym_error_format(
    rich_viewer: Viewer, path: str, names: str
) -> None:
    response = answer(rich_viewer, path)
    assert response.status_code == 404, response.text
    (error,) = response.json().values()
    assert set(error) == {"type", "status", "message", "server", "cause"}
    assert (error["type"], error["status"], error["server"], error["cause"]) == (
        "not_found",
        404,
        "gym view",
        None,
    )
    assert names in error["message"]


FUZZ_SETTINGS = hypothesis.settings(
    max_examples=8,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def test_no_generated_request_gets_a_5xx(rich_viewer: Viewer) -> None:
    schema = api(rich_viewer, "/openapi.json")
    operations = [result.ok() for result in schemathesis.openapi.from_dict(schema).get_all_operations()]
    assert {operation.path for operation in operations} >= {
        "/api/rollouts",
        "/api/rollouts/{row_id}",
        "/api/tasks",
    }
    failures: list[str] = []
    sent = 0
    with requests.Session() as session:
        for operation in operations:
            has_input = operation.path_parameters or operation.query
            for mode in [GenerationMode.POSITIVE] + ([GenerationMode.NEGATIVE] if has_input else []):

                @FUZZ_SETTINGS
                @given(operation.as_strategy(generation_mode=mode))
                def run(case: schemathesis.Case) -> None:
                    nonlocal sent
                    response = case.call(base_url=rich_viewer.url, session=session, timeout=REQUEST_TIMEOUT_S)
                    sent += 1
                    try:
                        case.validate_response(response, checks=[not_a_server_error])
                    except FailureGroup:  # recorded; the run goes on
                        failures.append(
                            f"{case.as_curl_command()}: HTTP {response.status_code} {response.text[:300]}"
                        )

                try:
                    run()
                except hypothesis.errors.Unsatisfiable:  # a plain string in the path cannot be made invalid
                    assert mode is GenerationMode.NEGATIVE, operation.label
    assert not failures, "\n".join(failures)
    assert sent >= 30, sent
    assert api(rich_viewer, "/api/summary")["rollouts"] == 13, "the viewer still answers"


# ---- the page ---------------------------------------------------------------------------------------------


def absolute_urls(text: str) -> set[str]:
    return set(re.findall(r"https?://[^\s\"'<>)`]+", text))


def test_the_page_and_its_assets_are_served_and_reach_nowhere_else(rich_viewer: Viewer) -> None:
    page = answer(rich_viewer, "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-store"
    references = re.findall(r"""<(?:script|link)\b[^>]*\b(?:src|href)\s*=\s*["']([^"']*)["']""", page.text)
    assert references, page.text
    for reference in references:
        assert (
            not re.match(r"^([a-z][a-z0-9+.-]*:|//|/)", reference, re.IGNORECASE) or reference == "data:,"
        ), reference
    assets = [reference for reference in references if not reference.startswith("data:")]
    assert sorted(assets) == ["assets/viewer.css", "assets/viewer.js"]
    texts = [page.text]
    for asset, kind in (("assets/viewer.js", "javascript"), ("assets/viewer.css", "text/css")):
        served = answer(rich_viewer, "/" + asset)
        assert served.status_code == 200 and kind in served.headers["content-type"], asset
        assert served.content == (REPO_ROOT / "nemo_gym/rollout_viewer" / asset).read_bytes()
        texts.append(served.text)
    assert absolute_urls("\n".join(texts)) <= {SVG_NAMESPACE}
    assert not re.search(r"\bcdn\b|unpkg|jsdelivr|googleapis", "\n".join(texts), re.IGNORECASE)
    assert 'id="gym-data"' not in page.text, "a served page asks the API for its data"


# ---- the static page --------------------------------------------------------------------------------------


def static_command(*args: str, cwd: Path, legacy: bool = False) -> subprocess.CompletedProcess:
    command = (
        [str(Path(sys.executable).parent / "ng_viewer"), *args] if legacy else gym_command("view", *args)
    )
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def embedded_data(html: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="gym-data">(.*?)</script>', html, re.DOTALL)
    assert found, html[:2000]
    return json.loads(found[1])


def test_static_page_carries_the_rollouts_and_no_live_html(rich: RichRun, tmp_path: Path) -> None:
    result = static_command(str(rich.path), "--static", "page/out.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Wrote page/out.html (13 rollouts); open it in any browser."
    html = (tmp_path / "page/out.html").read_text()
    data = embedded_data(html)
    assert [row["id"] for row in data["rows"]] == list(range(13))
    assert sorted(data["details"], key=int) == [str(row_id) for row_id in range(13)]
    assert data["details"]["2"]["conversation"][2]["name"] == "get_weather"
    assert data["details"]["10"]["conversation"][-1]["tokens"]["generation_token_ids"] == [785, 9104, 151645]
    assert data["details"]["11"]["conversation"][-1]["text"] == f"Careful: {SCRIPT_TEXT} done"
    assert data["summary"]["shown"] == 13 and data["summary"]["unreadable_lines"]["count"] == 1
    tasks = [(row["task"], row["rollouts"]) for row in data["tasks"]["rows"]]
    assert tasks == [(0, 2), (1, 3), (2, 3), (3, 2), (4, 2), (5, 1)]
    assert data["tasks"]["histogram"] == [3, 0, 0, 0, 0, 0, 0, 1, 0, 0, 2]
    # The model's HTML is only there escaped: nothing from the data can close the script tag.
    assert "<img src=x" not in html and "</script><img" not in html
    assert "\\u003cimg src=x onerror=alert(1)>\\u003c/script>" in html
    assert html.count("</script>") == 2, "the data's and the script's own ends, no other"
    references = re.findall(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["']([^"']*)""", html)
    assert references == ["data:,"], "style and script are inlined"
    assert absolute_urls(html) <= {SVG_NAMESPACE}


def test_static_page_with_a_cap_carries_the_failed_rollout_first(collected: Path, tmp_path: Path) -> None:
    result = static_command(str(collected), "--static", "capped.html", "--max-rollouts", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(2 of 6 rollouts)" in result.stdout
    data = embedded_data((tmp_path / "capped.html").read_text())
    assert [(row["source"], row["line"]) for row in data["rows"]] == [("result", 1), ("failure", 1)]
    failed = data["details"][str(data["rows"][1]["id"])]
    assert failed["failure"]["class"] == "http_404"
    assert failed["conversation"][0]["text"] == UNRECORDED_QUESTION
    assert data["summary"]["shown"] == 2 and data["summary"]["rollouts"] == 6


def test_a_static_page_that_cannot_be_written_is_one_line(collected: Path, tmp_path: Path) -> None:
    (tmp_path / "taken.html").mkdir()
    result = static_command(str(collected), "--static", "taken.html", cwd=tmp_path)
    assert one_line_error(result).startswith(
        "Error: static_html_fpath: cannot write taken.html (Is a directory)"
    )
    assert result.returncode == 1


def test_legacy_ng_viewer_writes_the_same_static_page(collected: Path, tmp_path: Path) -> None:
    result = static_command(
        f"+jsonl_fpath={collected}", "+static_html_fpath=legacy.html", cwd=tmp_path, legacy=True
    )
    assert result.returncode == 0, result.stderr
    assert "(6 rollouts)" in result.stdout
    data = embedded_data((tmp_path / "legacy.html").read_text())
    assert len(data["rows"]) == 6 and data["summary"]["failure_classes"] == {"http_404": 1}
    assert [row["source"] for row in data["rows"]] == ["result"] * 5 + ["failure"]


# ---- starting and stopping --------------------------------------------------------------------------------


def listening_addresses(pid: int) -> set[str]:
    """host:port (hex, as /proc/net/tcp writes them) of the IPv4 and IPv6 sockets `pid` listens on."""
    inodes = socket_inodes(pid)
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in (line.split() for line in Path(table).read_text().splitlines()[1:]):
            if row[3] == "0A" and row[9] in inodes:
                found.add(row[1])
    return found


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_server_binds_localhost_and_stops_on_a_signal(
    collected: Path, stop_signal: signal.Signals
) -> None:
    with viewing(collected) as viewer:
        port = int(viewer.url.rsplit(":", 1)[1])
        assert viewer.url == f"http://127.0.0.1:{port}"
        pid = viewer.process.pid
        assert listening_addresses(pid) == {f"0100007F:{port:04X}"}, "only 127.0.0.1, nothing else"
        assert api(viewer, "/api/rollouts", limit=1)["total"] == 6
        family = [pid, *worker_pids(pid)]
        viewer.process.send_signal(stop_signal)
        code = viewer.process.wait(15)
        assert wait_until_gone(family) == []
        stderr = viewer.stderr_path.read_text()
        assert "Traceback" not in stderr, stderr
        if stop_signal == signal.SIGINT:  # Ctrl-C, as for every gym command: one line, exit code 130
            assert (code, stderr.strip().splitlines()[-1:]) == (130, ["Interrupted."]), (code, stderr)
        else:
            assert code in (0, -signal.SIGTERM, 128 + signal.SIGTERM), code
        with pytest.raises(requests.ConnectionError):
            requests.get(viewer.url + "/api/summary", timeout=2)


def test_a_busy_port_is_a_one_line_error(collected: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            gym_command("view", str(collected), "--port", str(port)),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1
    assert one_line_error(result).startswith(f"Error: cannot listen on 127.0.0.1:{port} ")
    assert "Viewing" not in result.stdout


def test_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    for args in (["view", "absent.jsonl"], ["view", "absent.jsonl", "--static", "out.html"]):
        result = subprocess.run(gym_command(*args), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        error = one_line_error(result)
        assert error.startswith("Error: jsonl_fpath") and "absent.jsonl" in error
    assert not (tmp_path / "out.html").exists()


def test_the_module_servers_are_still_alive(collected_viewer: Viewer, rich_viewer: Viewer) -> None:
    """Nothing above made a module server die: each still answers and its process lives."""
    for viewer in (collected_viewer, rich_viewer):
        assert process_alive(viewer.process.pid)
        assert api(viewer, "/api/rollouts/0")["id"] == 0
        assert "Traceback" not in viewer.stderr_path.read_text()
