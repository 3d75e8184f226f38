"""calendar: clock times, constraints and the calendar checks in-process, then /verify and
/aggregate_metrics over HTTP against one real server."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

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
from resources_servers.calendar.grading import (
    ExpectedEvent,
    constraint_window,
    extract_calendar,
    grade,
    minutes,
)

FOLDER = Path(__file__).resolve().parents[1]
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
ROW = ROWS[1]  # dentist before 12pm (45), budget review between 12pm and 3pm (90), check-in at 3:30pm (15)
EXPECTED = {key: ExpectedEvent.model_validate(event) for key, event in ROW["exp_cal_state"].items()}


def calendar(*events: tuple) -> str:
    return json.dumps(
        [{"event_id": i, "event_name": f"e{i}", "start_time": t, "duration": d} for i, t, d in events]
    )


GOOD = calendar((1, "10:15am", 45), (2, "1pm", 90), (3, "3:30pm", 15))


@pytest.mark.parametrize(
    ("clock", "value"),
    [("10am", 600), ("10:30 AM", 630), ("12pm", 720), ("12:15am", 15), ("2:05p.m.", 845), ("14:30", 870)],
)
def test_clock_times_in_12_and_24_hour_forms(clock, value):
    assert minutes(clock) == value


@pytest.mark.parametrize("clock", ["13pm", "noon", "10:75am", "25:00", "0am", ""])
def test_other_text_is_not_a_clock_time(clock):
    with pytest.raises(ValueError, match="not a clock time"):
        minutes(clock)


def test_constraints_set_an_earliest_start_a_latest_end_or_an_exact_start():
    assert constraint_window("before 12pm") == (None, 720, None)
    assert constraint_window("after 2pm") == (840, None, None)
    assert constraint_window("between 12pm and 3pm") == (720, 900, None)
    assert constraint_window("at 10am") == (None, None, 600)
    assert constraint_window(None) == (None, None, None)
    with pytest.raises(ValueError, match="unknown constraint"):
        constraint_window("around lunch")


def test_the_last_json_list_of_objects_is_the_calendar():
    text = f"Before: {calendar((1, '10am', 45))}\nThe [draft] is done. Now:\n```json\n{GOOD}\n```"
    assert [event["start_time"] for event in extract_calendar(text)] == ["10:15am", "1pm", "3:30pm"]
    assert extract_calendar("[1, 2] and [] and [broken {") is None


def test_finding_the_calendar_is_bounded_on_bracket_floods():
    _, seconds = cpu_time_of(extract_calendar, "[" * 50_000 + "]" * 50_000)
    assert seconds < LINEAR_CPU_BUDGET_S


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (GOOD, "pass"),
        (f"Any order works: {calendar((3, '3:30pm', 15), (1, '11am', 45), (2, '12pm', 90))}", "pass"),
        ("", "no_answer"),
        (f"<think>hm</think>{GOOD}", "think_found"),
        ("Done, your day is set!", "no_json_list"),
        ('[{"event_id": 1, "start_time": "10am"}]', "malformed_event"),
        ('[{"event_id": 1, "start_time": "ten", "duration": 45}]', "malformed_event"),
        ('[{"event_id": 1, "start_time": "10am", "duration": "45"}]', "malformed_event"),
        (calendar((1, "10am", 45), (1, "1pm", 90), (3, "3:30pm", 15)), "duplicate_event_id"),
        (calendar((1, "10am", 45), (2, "1pm", 90)), "different_number_of_events"),
        (calendar((1, "10am", 45), (2, "1pm", 90), (4, "3:30pm", 15)), "wrong_event_ids"),
        (calendar((1, "10am", 45), (2, "12pm", 90), (3, "1:15pm", 15)), "conflicting_events"),
        (
            calendar((1, "11:30am", 45), (2, "1pm", 90), (3, "3:30pm", 15)),
            "constraint_violated",
        ),  # ends 12:15
        (calendar((1, "10am", 60), (2, "1pm", 90), (3, "3:30pm", 15)), "constraint_violated"),  # duration
        (calendar((1, "9am", 45), (2, "1pm", 90), (3, "3:30pm", 15)), "constraint_violated"),  # before 10am
        (calendar((1, "10am", 45), (2, "1:45pm", 90), (3, "3:30pm", 15)), "constraint_violated"),  # past 3pm
        (calendar((1, "10am", 45), (2, "1pm", 90), (3, "3:15pm", 15)), "constraint_violated"),  # not at 3:30
    ],
)
def test_grades_and_their_reasons(text, reason):
    result = grade(text, EXPECTED)
    assert (result.reward, result.reason) == (1.0 if reason == "pass" else 0.0, reason)


def test_with_no_event_expected_any_plain_reply_passes():
    assert grade("Good morning to you too!", {}).reward == 1.0
    assert grade("<think>x</think> Hi", {}).reason == "think_found"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server("calendar", tmp_path_factory.mktemp("calendar"), domain="agent") as started:
        yield started


async def verify(server: StartedServer, text: str, row: dict = ROW) -> tuple[int, dict]:
    return await post_json(server.url + "/verify", {**row, "response": response_with(message_item(text))})


async def test_a_schedule_meeting_every_constraint_earns_1(server):
    status, body = await verify(server, f"Here is your day:\n{GOOD}")
    assert status == 200 and (body["reward"], body["grade_reason"], body["mask_sample"]) == (
        1.0,
        "pass",
        False,
    )
    assert body["exp_cal_state"] == ROW["exp_cal_state"]


async def test_a_conflicting_or_missing_calendar_earns_0_with_its_reason(server):
    status, body = await verify(server, calendar((1, "10am", 45), (2, "12pm", 90), (3, "1:15pm", 15)))
    assert (status, body["reward"], body["grade_reason"]) == (200, 0.0, "conflicting_events")
    assert body["grade_detail"] == "events 2 and 3 overlap"
    status, body = await verify(server, "Sure, all booked.")
    assert (status, body["reward"], body["grade_reason"]) == (200, 0.0, "no_json_list")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"exp_cal_state": None}, "exp_cal_state"),
        ({"exp_cal_state": {"1": {"event_id": 1, "duration": 30, "min_time": "10am"}}}, "max_time"),
        ({"exp_cal_state": {"1": {**ROW["exp_cal_state"]["1"], "min_time": "ten"}}}, "min_time"),
        ({"exp_cal_state": {"1": {**ROW["exp_cal_state"]["1"], "constraint": "soonish"}}}, "constraint"),
        ({"exp_cal_state": {"1": {**ROW["exp_cal_state"]["1"], "duration": 0}}}, "duration"),
        ({"exp_cal_state": {"1": {**ROW["exp_cal_state"]["1"], "duration": 400}}}, "window"),
    ],
)
async def test_a_malformed_row_is_a_422_naming_the_field(server, change, field):
    status, body = await verify(server, GOOD, {**ROW, **change})
    assert status == 422 and field in json.dumps(body)


async def test_aggregate_metrics_count_the_reasons(server):
    texts = [GOOD, "no calendar", GOOD, calendar((1, "10am", 45))]
    results = [(await verify(server, text))[1] for text in texts]
    rollouts = [
        {**result, "_ng_task_index": i // 2, "_ng_rollout_index": i % 2} for i, result in enumerate(results)
    ]
    status, body = await post_json(server.url + "/aggregate_metrics", {"verify_responses": rollouts})
    metrics = body["agent_metrics"]
    assert status == 200 and metrics["mean/reward"] == 0.5
    assert (metrics["reason/pass"], metrics["reason/no_json_list"]) == (0.5, 0.25)
    assert metrics["reason/different_number_of_events"] == 0.25 and metrics["reason/think_found"] == 0.0


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: str(rollout["_ng_task_index"]))
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    answer = without_verify_flags(body)
    assert answer == {key: value for key, value in rollout.items() if key in answer}
    assert body["reward"] == rollout["reward"]


def test_config_declares_the_environment_and_its_agent():
    _, resources, _ = check_environment_config(FOLDER, "calendar", "agent")
    assert resources.model_extra["grading_timeout_seconds"] == 5.0
    assert {row["agent_ref"]["name"] for row in ROWS} == {"calendar_simple_agent"}
