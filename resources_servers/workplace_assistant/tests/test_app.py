"""workplace_assistant over HTTP: a real server process, the session cookie threaded by hand as an agent does."""

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    VERIFY_FLAGS,
    StartedServer,
    check_environment_config,
    function_call_item,
    instance_config,
    read_jsonl,
    response_with,
    run_instance,
    run_resources_server,
)

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "workplace_assistant"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "real_model_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]


def call(name: str, /, **arguments: Any) -> dict[str, str]:
    return {"name": name, "arguments": orjson.dumps(arguments).decode()}


# The recorded rollouts carry only `responses_create_params`, `response` and `reward`: the task rows they
# came from (with their ground truth) were not shipped. These are the ground truths their prompts call for,
# keyed by a phrase of the prompt.
ROLLOUT_GROUND_TRUTH = {
    # "Create a bar chart of total visits since November 30" (i.e. up to today, 2023-11-30): the model plotted
    # up to 2024-06-30, a different plot, hence the recorded 0.0.
    "bar chart": [
        call(
            "analytics_create_plot",
            time_min="2023-11-30",
            time_max="2023-11-30",
            value_to_plot="total_visits",
            plot_type="bar",
        )
    ],
    # Consulting proposals untouched for 3 weeks: there are none, so nothing changes.
    "consulting": [],
    "Casey Wilson": [call("customer_relationship_manager_delete_customer", customer_id="00000014")],
    "Dakota Thomas": [
        call(
            "customer_relationship_manager_add_customer",
            customer_name="Dakota Thomas",
            assigned_to_email="nadia.moreau@atlas.com",
            status="Lead",
        )
    ],
    "kofi": [call("email_delete_email", email_id="00000259")],
}


def rollout_ground_truth(rollout: dict) -> list[dict[str, str]]:
    prompt = rollout["responses_create_params"]["input"][-1]["content"]
    for key, calls in ROLLOUT_GROUND_TRUTH.items():
        if key in prompt:
            return calls
    raise KeyError(prompt)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="agent") as started:
        yield started


@pytest.fixture(scope="module")
def hasty_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    """An instance whose replay deadline (100 µs) no replay can meet."""
    config = {
        "hasty": instance_config("resources_servers", INSTANCE, domain="agent", grading_timeout_s=0.0001)
    }
    with run_instance(config, "hasty", tmp_path_factory.mktemp("hasty")) as started:
        yield started


class Session:
    """One rollout's view of the server: sends the cookie it was last given and keeps the new one."""

    def __init__(self, server: StartedServer, instance: str = INSTANCE) -> None:
        self.url = server.url
        self.cookie_name = f"WorkplaceAssistantResourcesServer___{instance}"
        self.cookie: str | None = None

    async def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        cookies = {self.cookie_name: self.cookie} if self.cookie else None
        response = await request("POST", self.url + path, json=body, cookies=cookies)
        self.cookie = response.cookies[self.cookie_name].value
        return response.status, await get_response_json(response)

    async def seed(self) -> None:
        assert await self.post("/seed_session", ROWS[0]) == (200, {})

    async def tool(self, tool_name: str, /, **arguments: Any) -> Any:
        status, body = await self.post(f"/{tool_name}", arguments)
        assert status == 200, body
        assert set(body) == {"output"}
        return body["output"]


@pytest.fixture
async def office(server) -> Session:
    session = Session(server)
    await session.seed()
    return session


def response_with_calls(calls: list[dict[str, str]]) -> dict:
    output = [function_call_item(c["name"], c["arguments"], call_id=f"call_{i}") for i, c in enumerate(calls)]
    return response_with(*output, **A_RESPONSE)


async def verify(server: StartedServer, row: dict, calls: list[dict[str, str]]) -> float:
    status, body = await Session(server).post("/verify", {**row, "response": response_with_calls(calls)})
    assert status == 200, body
    return body["reward"]


# ----- sessions -----


async def test_a_tool_call_on_an_unseeded_session_is_a_400(server):
    status, body = await Session(server).post("/email_delete_email", {"email_id": "00000259"})
    assert (status, body) == (400, {"detail": "Session not initialized. Please call seed_session first."})


async def test_changes_stay_in_their_session_and_a_new_seed_resets_them(server):
    first, second = Session(server), Session(server)
    await asyncio.gather(first.seed(), second.seed())
    assert await first.tool("email_delete_email", email_id="00000259") == "Email deleted successfully."
    assert await first.tool("email_delete_email", email_id="00000259") == "Email not found."
    assert await second.tool("email_get_email_information_by_id", email_id="00000259", field="subject") == {
        "subject": "Task Update on Create wireframe for homepage"
    }
    await first.seed()
    assert await first.tool("email_delete_email", email_id="00000259") == "Email deleted successfully."


async def test_verify_drops_the_session_workspace(office):
    status, _ = await office.post("/verify", {**ROWS[0], "response": A_RESPONSE})
    assert status == 200
    status, body = await office.post("/email_search_emails", {"query": "kofi"})
    assert status == 400 and body["detail"].startswith("Session not initialized")


# ----- tool semantics -----


async def test_null_arguments_are_dropped_and_unexpected_ones_are_reported_as_text(office):
    found = await office.tool("email_search_emails", query="kofi", date_min=None, page=1, page_size=1)
    assert found["emails"][0]["email_id"] == "00000259"
    output = await office.tool("email_delete_email", email_id="00000259", folder="inbox")
    assert output.startswith("Error executing tool 'email_delete_email': ") and "folder" in output


async def test_an_unknown_tool_is_reported_as_text(office):
    assert (
        await office.tool("email_archive", email_id="1")
        == "Error executing tool 'email_archive': no such tool"
    )


async def test_a_tool_called_without_a_body_uses_its_defaults(office):
    status, body = await office.post("/company_directory_find_email_address")
    assert (status, body) == (200, {"output": "Name not provided."})


async def test_company_directory_matches_part_of_a_name_case_insensitively(office):
    assert await office.tool("company_directory_find_email_address", name="NADIA") == [
        "nadia.moreau@atlas.com"
    ]
    assert "raj.patel@atlas.com" in await office.tool("company_directory_find_email_address", name="patel")


async def test_email_search_is_newest_first_paginated_and_date_bounded(office):
    page = await office.tool("email_search_emails", query="kofi", page=2, page_size=3)
    assert page["pagination"] == {"total_emails": 26, "page": 2, "page_size": 3, "total_pages": 9}
    dates = [email["sent_datetime"] for email in page["emails"]]
    assert dates == sorted(dates, reverse=True) and len(dates) == 3
    default = await office.tool("email_search_emails", query="kofi")
    assert default["pagination"]["page_size"] == 5 and default["pagination"]["page"] == 1
    bounded = await office.tool(
        "email_search_emails", query="kofi", date_min="2023-11-22", date_max="2023-11-22"
    )
    assert {email["sent_datetime"][:10] for email in bounded["emails"]} == {"2023-11-22"}
    assert await office.tool("email_search_emails", query="no such words anywhere") == "No emails found."


async def test_email_send_reply_forward_and_their_errors(office):
    assert await office.tool("email_send_email", recipient="x", subject="s", body="b") == (
        "Invalid recipient email address."
    )
    assert await office.tool("email_send_email", recipient="A@B.com", subject="s") == (
        "Recipient, subject, or body not provided."
    )
    assert await office.tool(
        "email_send_email", recipient="Nia.Johnson@atlas.com", subject="Hi", body="Yo"
    ) == ("Email sent successfully.")
    sent = await office.tool("email_search_emails", query="nia.johnson@atlas.com hi yo", page_size=1)
    email = sent["emails"][0]
    assert email["inbox/outbox"] == "outbox" and email["sender/recipient"] == "nia.johnson@atlas.com"
    assert email["sent_datetime"] == "2023-11-30 23:59:00"
    assert (
        await office.tool("email_reply_email", email_id="00000057", body="Thanks")
        == "Email replied successfully."
    )
    assert await office.tool("email_forward_email", email_id="00000057", recipient="raj.patel@atlas.com") == (
        "Email forwarded successfully."
    )
    forwarded = await office.tool("email_search_emails", query="raj.patel@atlas.com fw:", page_size=1)
    assert forwarded["emails"][0]["subject"].startswith("FW: ")
    assert await office.tool("email_reply_email", email_id="99999999", body="x") == "Email not found."
    assert await office.tool("email_get_email_information_by_id", email_id="00000057", field="nope") == (
        "Field not found."
    )


async def test_calendar_create_search_update_delete(office):
    event_id = await office.tool(
        "calendar_create_event",
        event_name="Zebra sync",
        participant_email="Raj.Patel@atlas.com",
        event_start="2023-12-05 10:00:00",
        duration="30",
    )
    assert len(event_id) == 8 and event_id.isdigit()
    found = await office.tool("calendar_search_events", query="zebra")
    assert found["events"][0]["participant_email"] == "raj.patel@atlas.com"
    assert found["pagination"]["total_events"] == 1
    assert await office.tool("calendar_search_events", query="zebra", time_min="2023-12-06 00:00:00") == (
        "No events found."
    )
    assert await office.tool(
        "calendar_update_event", event_id=event_id, field="event_name", new_value="Yak"
    ) == ("Event updated successfully.")
    assert await office.tool(
        "calendar_get_event_information_by_id", event_id=event_id, field="event_name"
    ) == {"event_name": "Yak"}
    assert await office.tool("calendar_update_event", event_id=event_id, field="event_name") == (
        "Event ID, field, or new value not provided."
    )
    assert await office.tool("calendar_delete_event", event_id=event_id) == "Event deleted successfully."
    assert await office.tool("calendar_delete_event", event_id=event_id) == "Event not found."
    assert await office.tool("calendar_create_event", event_name="x") == "Participant email not provided."


async def test_analytics_counts_per_day_and_plots(office):
    visits = await office.tool("analytics_total_visits_count", time_min="2023-11-01", time_max="2023-11-03")
    assert list(visits) == sorted(visits) and set(visits) <= {"2023-11-01", "2023-11-02", "2023-11-03"}
    engaged = await office.tool("analytics_engaged_users_count", time_min="2023-11-01", time_max="2023-11-03")
    direct = await office.tool(
        "analytics_traffic_source_count",
        time_min="2023-11-01",
        time_max="2023-11-03",
        traffic_source="direct",
    )
    average = await office.tool(
        "analytics_get_average_session_duration", time_min="2023-11-01", time_max="2023-11-03"
    )
    for day, count in visits.items():
        assert 0 <= engaged[day] <= count and 0 <= direct[day] <= count and isinstance(average[day], float)
    visitor = await office.tool("analytics_get_visitor_information_by_id", visitor_id="0860")
    assert visitor[0]["user_engaged"] is False and visitor[0]["date_of_visit"] == "2023-10-22"
    assert (
        await office.tool("analytics_get_visitor_information_by_id", visitor_id="nobody")
        == "Visitor not found."
    )
    assert await office.tool(
        "analytics_create_plot",
        time_min="2023-11-01",
        time_max="2023-11-03",
        value_to_plot="visits",
        plot_type="bar",
    ) == (
        "Value to plot must be one of 'total_visits', 'session_duration_seconds', 'user_engaged', "
        "'direct', 'referral', 'search engine', 'social media'"
    )
    assert await office.tool(
        "analytics_create_plot",
        time_min="2023-11-01",
        time_max="2023-11-03",
        value_to_plot="user_engaged",
        plot_type="pie",
    ) == ("Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'")


async def test_project_tasks_validate_their_lists_boards_and_assignees(office):
    assert await office.tool("project_management_search_tasks") == "No search parameters provided."
    tasks = await office.tool("project_management_search_tasks", assigned_to_email="leila", board="Front end")
    assert tasks and all(task["board"] == "Front end" for task in tasks)
    create = {"task_name": "T", "assigned_to_email": "LEILA.AZIZI@atlas.com", "due_date": "2023-12-01"}
    assert await office.tool(
        "project_management_create_task", **create, list_name="Todo", board="Design"
    ) == ("List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'.")
    assert await office.tool(
        "project_management_create_task", **create, list_name="Backlog", board="Ops"
    ) == ("Board not valid. Please choose from: 'Back end', 'Front end', 'Design'.")
    assert await office.tool(
        "project_management_create_task",
        **{**create, "assigned_to_email": "who@x.com"},
        list_name="Backlog",
        board="Design",
    ) == ("Assignee email not valid. Please choose from the list of team members.")
    task_id = await office.tool(
        "project_management_create_task", **create, list_name="Backlog", board="Design"
    )
    assert await office.tool(
        "project_management_get_task_information_by_id", task_id=task_id, field="assigned_to_email"
    ) == {"assigned_to_email": "leila.azizi@atlas.com"}
    assert await office.tool(
        "project_management_update_task", task_id=task_id, field="list_name", new_value="Completed"
    ) == ("Task updated successfully.")
    assert await office.tool(
        "project_management_update_task", task_id=task_id, field="colour", new_value="red"
    ) == ("Field not valid.")
    assert (
        await office.tool("project_management_delete_task", task_id=task_id) == "Task deleted successfully."
    )
    assert await office.tool("project_management_delete_task", task_id=task_id) == "Task not found."


async def test_crm_search_update_add_delete(office):
    assert await office.tool("customer_relationship_manager_search_customers", page=1) == (
        "No search parameters provided. Please provide at least one parameter."
    )
    found = await office.tool("customer_relationship_manager_search_customers", customer_name="casey wilson")
    assert (
        found["customers"][0]["customer_id"] == "00000014" and found["customers"][0]["customer_phone"] is None
    )
    assert await office.tool(
        "customer_relationship_manager_update_customer",
        customer_id="00000014",
        field="status",
        new_value="Gone",
    ) == ("Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'")
    assert await office.tool(
        "customer_relationship_manager_update_customer", customer_id="00000014", field="shoe", new_value="x"
    ) == (
        "Field not valid. Please choose from: 'customer_name', 'assigned_to_email', 'customer_email', "
        "'customer_phone', 'last_contact_date', 'product_interest', 'status', 'notes', 'follow_up_by'"
    )
    assert (
        await office.tool(
            "customer_relationship_manager_update_customer",
            customer_id="00000014",
            field="status",
            new_value="Won",
        )
        == "Customer updated successfully."
    )
    after = await office.tool("customer_relationship_manager_search_customers", customer_name="casey wilson")
    assert after["customers"][0]["status"] == "Won"
    assert await office.tool("customer_relationship_manager_add_customer", customer_name="X") == (
        "Please provide all required fields: customer_name, assigned_to_email, status."
    )
    assert await office.tool("customer_relationship_manager_delete_customer", customer_id="00000014") == (
        "Customer deleted successfully."
    )
    assert await office.tool("customer_relationship_manager_delete_customer", customer_id="00000014") == (
        "Customer not found."
    )


# ----- verify -----


@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"id_{row['id']}")
async def test_the_ground_truth_calls_earn_1_and_doing_nothing_earns_0(server, row):
    assert await verify(server, row, row["ground_truth"]) == 1.0
    assert await verify(server, row, []) == 0.0


async def test_read_only_calls_and_call_order_do_not_change_the_reward(server):
    row = ROWS[3]
    reads = [call("customer_relationship_manager_search_customers", status="Won")]
    assert await verify(server, row, reads + list(reversed(row["ground_truth"])) + reads) == 1.0


async def test_a_partial_or_wrong_solution_earns_0(server):
    row = ROWS[2]
    assert await verify(server, row, row["ground_truth"][:2]) == 0.0
    wrong = [call("customer_relationship_manager_delete_customer", customer_id="00000095")]
    assert await verify(server, row, row["ground_truth"] + wrong) == 0.0


async def test_case_differences_count_in_board_but_not_in_free_text_fields(server):
    row = {
        **ROWS[1],
        "ground_truth": [
            call(
                "calendar_update_event",
                event_id="00000252",
                field="event_name",
                new_value="Risk Management Forum",
            )
        ],
    }
    shouting = [
        call(
            "calendar_update_event",
            event_id="00000252",
            field="event_name",
            new_value="RISK MANAGEMENT FORUM",
        )
    ]
    assert await verify(server, row, shouting) == 1.0
    status_row = {
        **ROWS[4],
        "ground_truth": [
            call(
                "customer_relationship_manager_update_customer",
                customer_id="00000037",
                field="notes",
                new_value="x",
            )
        ],
    }
    assert (
        await verify(
            server,
            status_row,
            [
                call(
                    "customer_relationship_manager_update_customer",
                    customer_id="00000037",
                    field="notes",
                    new_value="X",
                )
            ],
        )
        == 1.0
    )
    task = [call("project_management_update_task", task_id="00000149", field="board", new_value="Design")]
    task_row = {**ROWS[0], "ground_truth": task}
    assert await verify(server, task_row, task) == 1.0
    assert (
        await verify(
            server,
            task_row,
            [call("project_management_update_task", task_id="00000149", field="board", new_value="design")],
        )
        == 0.0
    )


async def test_failing_and_unparsable_calls_are_skipped(server):
    row = ROWS[0]
    noise = [
        {"name": "email_reply_email", "arguments": "{not json"},
        call("email_no_such_tool", x=1),
        call("email_reply_email", email_id="00000057", body="x", bogus=True),
    ]
    assert await verify(server, row, noise + row["ground_truth"]) == 1.0


async def test_ground_truth_may_be_a_json_string(server):
    row = {**ROWS[0], "ground_truth": orjson.dumps(ROWS[0]["ground_truth"]).decode()}
    assert await verify(server, row, ROWS[0]["ground_truth"]) == 1.0


async def test_a_replay_past_its_deadline_earns_0_instead_of_failing(hasty_server):
    body = {**ROWS[0], "response": response_with_calls(ROWS[0]["ground_truth"])}
    status, answer = await Session(hasty_server, "hasty").post("/verify", body)
    assert (status, answer["reward"]) == (200, 0.0)
    assert "replay_reward exceeded its" in hasty_server.log()


def test_a_non_positive_replay_deadline_is_refused_at_startup(tmp_path):
    config = {"bad": instance_config("resources_servers", INSTANCE, domain="agent", grading_timeout_s=0)}
    with pytest.raises(RuntimeError, match="grading_timeout_s"):
        with run_instance(config, "bad", tmp_path):
            pass


async def test_verify_echoes_the_task_fields(server):
    status, body = await Session(server).post("/verify", {**ROWS[0], "response": A_RESPONSE})
    assert status == 200
    assert set(body) == {
        *VERIFY_FLAGS,
        "responses_create_params",
        "response",
        "reward",
        "ground_truth",
        "id",
        "category",
        "environment_name",
    }
    assert (body["id"], body["category"], body["reward"]) == (0, "workplace_assistant_email", 0.0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"responses_create_params": ROWS[0]["responses_create_params"], "response": A_RESPONSE},
            "ground_truth",
        ),
        (ROWS[0], "response"),
        ({**ROWS[0], "response": A_RESPONSE, "ground_truth": 7}, "ground_truth"),
    ],
)
async def test_a_bad_verify_body_is_a_422_naming_the_field(server, body, field):
    status, answer = await Session(server).post("/verify", body)
    assert status == 422
    assert any(error["loc"][:2] == ["body", field] for error in answer["detail"])


async def test_a_tool_body_that_is_not_an_object_is_a_422(office):
    status, answer = await office.post("/email_search_emails", ["kofi"])
    assert status == 422 and answer["detail"][0]["loc"][0] == "body"


# ----- recorded rollouts -----


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["response"]["id"][-8:])
async def test_recorded_rollouts_replay_to_their_tool_outputs_and_reward(server, rollout):
    session = Session(server)
    await session.seed()
    output = rollout["response"]["output"]
    recorded = {item["call_id"]: item["output"] for item in output if item["type"] == "function_call_output"}
    for item in (item for item in output if item["type"] == "function_call"):
        status, body = await session.post(f"/{item['name']}", orjson.loads(item["arguments"]))
        assert status == 200 and body == orjson.loads(recorded[item["call_id"]])
    row = {
        "responses_create_params": rollout["responses_create_params"],
        "ground_truth": rollout_ground_truth(rollout),
    }
    status, body = await session.post("/verify", {**row, "response": rollout["response"]})
    assert status == 200 and body["reward"] == rollout["reward"]


async def test_aggregate_metrics_reports_pass_at_k_per_category(server):
    responses = []
    for task_index, row in enumerate(ROWS[:2]):
        for rollout_index, calls in enumerate((row["ground_truth"], [])):
            status, body = await Session(server).post(
                "/verify", {**row, "response": response_with_calls(calls)}
            )
            assert status == 200
            responses.append({**body, "_ng_task_index": task_index, "_ng_rollout_index": rollout_index})
    status, metrics = await Session(server).post("/aggregate_metrics", {"verify_responses": responses})
    assert status == 200
    agent = metrics["agent_metrics"]
    assert agent["pass@2/accuracy"] == 100.0 and agent["pass@1[avg-of-2]/accuracy"] == 50.0
    assert agent["workplace_assistant_email/pass@2/accuracy"] == 100.0
    assert metrics["key_metrics"]["mean/reward"] == 0.5 and "pass@2/accuracy" in metrics["key_metrics"]


def test_config_declares_the_environment_and_its_agent():
    _, _, agent = check_environment_config(FOLDER, INSTANCE, "agent")
    assert agent["max_steps"] == 6
