"""reasoning_gym over HTTP: the server runs as a real process, started from its own app.py, and scores
answers through the real reasoning-gym library in its CPU worker pool."""

import copy
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    instance_config,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_instance,
    run_resources_server,
)
from resources_servers.reasoning_gym.scripts import generate_data

FOLDER = Path(__file__).resolve().parents[1]

INSTANCE = "reasoning_gym"
COOKIE_NAME = f"ReasoningGymResourcesServer___{INSTANCE}"
GENERATOR = FOLDER / "scripts" / "generate_data.py"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
TASK_FIELDS = ("question", "answer", "metadata")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp(INSTANCE)
    with run_resources_server(
        INSTANCE, workdir, env={"NEMO_GYM_CPU_WORKERS": "2"}, domain="other"
    ) as started:
        yield started


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Rows written by the generator script for two tasks, as a user of the script would produce them."""
    output = tmp_path_factory.mktemp("generated") / "train.jsonl"
    args = ["--task", "knights_knaves:3", "--task", "basic_arithmetic", "--count", "2", "--seed", "42"]
    subprocess.run([sys.executable, str(GENERATOR), *args, "--output", str(output)], check=True, timeout=60)
    return read_jsonl(output)


def replying(text: str) -> dict:
    """A response whose only assistant message says `text`."""
    return response_with(message_item(text, id="msg_test"), **copy.deepcopy(A_RESPONSE))


async def post(server: StartedServer, path: str, body: Any = None) -> tuple[int, Any]:
    """Every answer of this server must carry its session cookie."""
    return await post_json(server.url + path, body, require_cookie=COOKIE_NAME)


async def verify(server: StartedServer, row: dict, text: str) -> dict:
    status, body = await post(server, "/verify", {**row, "response": replying(text)})
    assert status == 200, body
    return body


def error_locations(body: dict) -> list[list]:
    return [error["loc"] for error in body["detail"]]


# --- reward and extraction --------------------------------------------------------------------------


async def test_the_right_answer_in_answer_tags_earns_1_and_the_response_names_task_and_answer(server):
    row = ROWS[0]
    body = await verify(server, row, f"Let me think.\n<answer>{row['answer']}</answer>")
    assert body["reward"] == body["score"] == 1.0
    assert body["task_name"] == "knights_knaves"
    assert body["extracted_answer"] == row["answer"]
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "task_name",
        "score",
        "extracted_answer",
    }
    assert body["responses_create_params"]["input"][0]["type"] == "message", "the parsed params are echoed"


async def test_the_last_answer_tag_wins(server):
    row = ROWS[0]
    wrong = "Zoey is a sage, and Riley is a fool."
    body = await verify(server, row, f"<answer>{wrong}</answer> no, wait: <answer>{row['answer']}</answer>")
    assert body["extracted_answer"] == row["answer"] and body["reward"] == 1.0
    body = await verify(server, row, f"<answer>{row['answer']}</answer> no, wait: <answer>{wrong}</answer>")
    assert body["extracted_answer"] == wrong and body["reward"] == 0.0


async def test_without_tags_the_first_flat_boxed_answer_is_used(server):
    row = ROWS[1]
    body = await verify(server, row, f"So \\boxed{{ {row['answer']} }} and later \\boxed{{nonsense}}")
    assert body["extracted_answer"] == row["answer"] and body["reward"] == 1.0


async def test_a_boxed_answer_with_nested_braces_is_skipped_for_the_next_flat_one(server):
    row = ROWS[1]
    body = await verify(server, row, f"\\boxed{{\\text{{x}}}} then \\boxed{{{row['answer']}}}")
    assert body["extracted_answer"] == row["answer"]


async def test_answer_tags_take_precedence_over_boxed(server):
    row = ROWS[2]
    body = await verify(server, row, f"\\boxed{{wrong}} <answer>{row['answer']}</answer>")
    assert body["extracted_answer"] == row["answer"] and body["reward"] == 1.0


async def test_without_tags_or_boxed_the_whole_stripped_text_is_scored(server):
    row = ROWS[3]
    body = await verify(server, row, f"\n\n  {row['answer']}  \n")
    assert body["extracted_answer"] == row["answer"] and body["reward"] == 1.0


async def test_text_is_joined_across_messages_and_parts_and_reasoning_is_ignored(server):
    row = ROWS[0]
    left, right = row["answer"][:10], row["answer"][10:]
    response = replying("")
    response["output"] = [
        {
            "id": "rs_1",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "<answer>junk</answer>"}],
        },
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"<answer>{left}", "annotations": []}],
        },
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"{right}</answer>", "annotations": []}],
        },
    ]
    status, body = await post(server, "/verify", {**row, "response": response})
    assert status == 200 and body["extracted_answer"] == row["answer"] and body["reward"] == 1.0


async def test_a_wrong_answer_earns_0_and_a_partly_right_one_gets_the_library_partial_credit(server):
    row = ROWS[0]  # Zoey is a fool, and Riley is a sage.
    assert (await verify(server, row, "<answer>Zoey is a sage, and Riley is a fool.</answer>"))[
        "reward"
    ] == 0.0
    partial = await verify(server, row, "<answer>Zoey is a fool, and Riley is a fool.</answer>")
    assert partial["reward"] == partial["score"] == pytest.approx(0.3 + 0.7 / 2)


async def test_an_empty_response_earns_0(server):
    row = ROWS[0]
    response = replying("")
    response["output"] = []
    status, body = await post(server, "/verify", {**row, "response": response})
    assert status == 200 and body["reward"] == 0.0 and body["extracted_answer"] == ""


async def test_a_scorer_that_raises_gives_0_not_an_error(server):
    """knights_knaves's scorer reads metadata it needs; a row missing it makes the library raise."""
    row = {**ROWS[0], "metadata": {"source_dataset": "basic_arithmetic"}, "answer": None}
    body = await verify(server, row, "<answer>3</answer>")
    assert body["reward"] == 0.0 and body["task_name"] == "basic_arithmetic"


async def test_the_default_library_scorer_gives_length_ratio_credit(server):
    """Tasks without their own scorer: exact → 1, oracle contained in a longer answer → len ratio."""
    row = {"responses_create_params": ROWS[0]["responses_create_params"], "question": "q", "answer": "42"}
    row["metadata"] = {"source_dataset": "gcd"}
    assert (await verify(server, row, "<answer>42</answer>"))["reward"] == 1.0
    assert (await verify(server, row, "<answer>x42y</answer>"))["reward"] == pytest.approx(0.5)


async def test_scoring_past_its_deadline_earns_0_and_the_server_keeps_answering(tmp_path):
    """A fresh worker must import the library (about a second) before scoring: a 10 ms deadline cannot hold."""
    inner = {"domain": "other", "grading_timeout_s": 0.01}
    config = {"hasty": instance_config("resources_servers", INSTANCE, **inner)}
    with run_instance(config, "hasty", tmp_path, {"NEMO_GYM_CPU_WORKERS": "1"}) as hasty:
        row = ROWS[0]
        response = await request(
            "POST", hasty.url + "/verify", json={**row, "response": replying(row["answer"])}
        )
        body = await get_response_json(response)
        assert response.status == 200 and body["reward"] == body["score"] == 0.0
        assert body["extracted_answer"] is None
        assert "grade exceeded its 0.01 s deadline" in hasty.log()
        health = await request("GET", hasty.url + "/")
        assert health.status == 200


def test_a_deadline_not_above_0_is_refused_at_startup(tmp_path):
    config = {"bad": instance_config("resources_servers", INSTANCE, domain="other", grading_timeout_s=0)}
    with pytest.raises(RuntimeError, match="grading_timeout_s"):
        with run_instance(config, "bad", tmp_path):
            pass


# --- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remove", "location"),
    [
        ("response", ["body", "response"]),
        ("metadata", ["body", "metadata"]),
        ("question", ["body", "question"]),
        ("responses_create_params", ["body", "responses_create_params"]),
    ],
)
async def test_a_verify_body_missing_a_field_is_a_422_naming_it(server, remove, location):
    body = {key: value for key, value in {**ROWS[0], "response": A_RESPONSE}.items() if key != remove}
    status, answer = await post(server, "/verify", body)
    assert status == 422
    assert location in error_locations(answer)


async def test_metadata_without_source_dataset_is_a_422_naming_it(server):
    metadata = {key: value for key, value in ROWS[0]["metadata"].items() if key != "source_dataset"}
    status, answer = await post(server, "/verify", {**ROWS[0], "metadata": metadata, "response": A_RESPONSE})
    assert status == 422
    assert ["body", "metadata", "source_dataset"] in error_locations(answer)


async def test_an_unknown_task_name_is_a_422_naming_source_dataset(server):
    metadata = {**ROWS[0]["metadata"], "source_dataset": "no_such_task"}
    status, answer = await post(server, "/verify", {**ROWS[0], "metadata": metadata, "response": A_RESPONSE})
    assert status == 422
    assert error_locations(answer) == [["body", "metadata", "source_dataset"]]
    assert "no_such_task" in answer["detail"][0]["msg"]


async def test_seed_session_accepts_a_row_and_answers_empty(server):
    assert await post(server, "/seed_session", ROWS[0]) == (200, {})


# --- metrics ----------------------------------------------------------------------------------------


async def test_aggregate_metrics_reports_pass_at_k_overall_and_per_task(server):
    rollouts = []
    for task_index, row in enumerate(ROWS[:2]):
        for rollout_index, text in enumerate([f"<answer>{row['answer']}</answer>", "<answer>no</answer>"]):
            body = await verify(server, row, text)
            rollouts.append({**body, "_ng_task_index": task_index, "_ng_rollout_index": rollout_index})
    status, metrics = await post(server, "/aggregate_metrics", {"verify_responses": rollouts})
    assert status == 200
    agent = metrics["agent_metrics"]
    assert agent["pass@1[avg-of-2]/accuracy"] == pytest.approx(50.0)
    assert agent["pass@2/accuracy"] == pytest.approx(100.0)
    assert agent["knights_knaves/pass@2/accuracy"] == pytest.approx(100.0)
    assert metrics["key_metrics"]["mean/reward"] == pytest.approx(0.5)
    assert "pass@2/accuracy" in metrics["key_metrics"] and "pass@1/accuracy" not in metrics["key_metrics"]


# --- generated data ---------------------------------------------------------------------------------


def test_the_generator_writes_rows_in_this_environments_format(generated):
    assert [row["metadata"]["source_dataset"] for row in generated] == ["knights_knaves"] * 3 + [
        "basic_arithmetic"
    ] * 2
    for row in generated:
        assert set(row) == {"responses_create_params", *TASK_FIELDS}
        assert row["responses_create_params"]["input"] == [{"role": "user", "content": row["question"]}]
        assert isinstance(row["answer"], str)


def run_generator_here(*args: str) -> None:
    """The script's `main` in this process: the library is imported once for all such tests."""
    assert generate_data.main(list(args)) == 0


def test_the_generator_is_deterministic_per_seed(generated, tmp_path):
    again, other = tmp_path / "again.jsonl", tmp_path / "other.jsonl"
    run_generator_here("--task", "knights_knaves:3", "--seed", "42", "--output", str(again))
    run_generator_here("--task", "knights_knaves:3", "--seed", "43", "--output", str(other))
    again_rows = read_jsonl(again)
    assert again_rows == generated[:3], "a task's rows do not depend on the other tasks requested"
    assert read_jsonl(other) != again_rows


def test_the_generator_refuses_an_unknown_task_and_leaves_no_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        generate_data.main(["--task", "no_such_task", "--output", str(tmp_path / "out.jsonl")])
    assert exit_info.value.code == 2 and "no_such_task" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("index", [0, 3], ids=["knights_knaves", "basic_arithmetic"])
async def test_a_generated_row_rewards_its_answer_and_not_a_wrong_one(server, generated, index):
    row = generated[index]
    right = await verify(server, row, f"<answer>{row['answer']}</answer>")
    assert right["reward"] == 1.0 and right["task_name"] == row["metadata"]["source_dataset"]
    wrong_answer = "Nobody is anything." if index == 0 else str(int(row["answer"]) + 1)
    assert (await verify(server, row, f"<answer>{wrong_answer}</answer>"))["reward"] == 0.0


def test_a_generated_row_whose_own_answer_cannot_win_stops_the_generator(tmp_path, monkeypatch):
    monkeypatch.setattr(generate_data, "score", lambda *args: 0.5)
    output = tmp_path / "out.jsonl"
    with pytest.raises(ValueError, match="its own answer scores 0.5"):
        generate_data.write_jsonl_atomically(generate_data.generate_rows([("gcd", 2)], 0, {}), output)
    assert list(tmp_path.iterdir()) == [], "a failed run leaves neither the output nor its temporary file"


async def test_arc_rows_read_back_from_jsonl_are_still_winnable(server, tmp_path):
    """ARC scorers compare boards with tuple grids that JSON turns into lists; the server restores them."""
    output = tmp_path / "arc.jsonl"
    run_generator_here("--task", "arc_agi:1", "--task", "rearc:1", "--output", str(output))
    for row in read_jsonl(output):
        assert (await verify(server, row, f"<answer>{row['answer']}</answer>"))["reward"] == 1.0
        assert (await verify(server, row, "<answer>0 0\n0 0</answer>"))["reward"] < 1.0


# --- recorded data ----------------------------------------------------------------------------------


def row_for(rollout: dict) -> dict:
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    return next(row for row in ROWS if row["responses_create_params"]["input"][-1]["content"] == prompt)


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_reward(server, rollout):
    """The recorded `extracted_answer` keeps the text's leading blank lines; ours strips them (catalog)."""
    row = row_for(rollout)
    status, body = await post(server, "/verify", {**row, "response": rollout["response"]})
    assert status == 200
    assert body["reward"] == rollout["reward"] and body["score"] == rollout["score"]
    assert body["task_name"] == rollout["task_name"]
    assert body["extracted_answer"] == rollout["extracted_answer"].strip()


def test_config_declares_the_environment_and_its_agent():
    check_environment_config(FOLDER, INSTANCE, "other")


def test_requirements_pin_the_library():
    assert "reasoning-gym>=0.1.25" in (FOLDER / "requirements.txt").read_text().split()
