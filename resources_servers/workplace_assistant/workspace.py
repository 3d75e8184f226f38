"""The office the model works in: email, calendar, web analytics, project tasks, a CRM and a company directory.

Tables are lists of row dicts loaded once from `csv_data/processed/` (every cell a string, empty cells None)
and shared by every workspace: a tool never edits a row in place, it swaps in a new dict, so a fresh
workspace costs one list copy per table. Tool results (dicts, lists, or plain error sentences) are what the
model sees, so their wording is kept stable.

Also home of the module-level `replay_reward` that `/verify` runs in the CPU pool.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "csv_data" / "processed"
NOW = "2023-11-30 23:59:00"
"""The fixed "current time" of every task; sent emails carry it."""
DEFAULT_PAGE_SIZE = 5

Row = dict[str, Any]

EMAIL_COLUMNS = ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")
EVENT_COLUMNS = ("event_id", "event_name", "participant_email", "event_start", "duration")
TASK_COLUMNS = ("task_id", "task_name", "assigned_to_email", "list_name", "due_date", "board")
CRM_COLUMNS = (
    "customer_id",
    "assigned_to_email",
    "customer_name",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "follow_up_by",
    "notes",
)
PLOT_COLUMNS = ("file_path",)

LISTS = ("Backlog", "In Progress", "In Review", "Completed")
BOARDS = ("Back end", "Front end", "Design")
STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")
PLOT_VALUES = (
    "total_visits",
    "session_duration_seconds",
    "user_engaged",
    "visits_direct",
    "visits_referral",
    "visits_search_engine",
    "visits_social_media",
)
PLOT_TYPES = ("bar", "line", "scatter", "histogram")

COMPARED_TABLES = {
    "calendar_events": EVENT_COLUMNS,
    "emails": EMAIL_COLUMNS,
    "plots": PLOT_COLUMNS,
    "project_tasks": TASK_COLUMNS,
    "crm": CRM_COLUMNS,
}
"""The tables whose final contents decide the reward (analytics is read-only)."""
CASE_SENSITIVE_COLUMNS = frozenset({"status", "list_name", "board"})

LIST_ERROR = "List not valid. Please choose from: 'Backlog', 'In Progress', 'In Review', 'Completed'."
BOARD_ERROR = "Board not valid. Please choose from: 'Back end', 'Front end', 'Design'."
ASSIGNEE_ERROR = "Assignee email not valid. Please choose from the list of team members."


class UnknownToolError(LookupError):
    """The route names no tool of the workspace."""


def _read_csv(name: str) -> tuple[Row, ...]:
    with (DATA_DIR / name).open(newline="", encoding="utf-8") as handle:
        return tuple(
            {key: (value if value != "" else None) for key, value in row.items()}
            for row in csv.DictReader(handle)
        )


@cache
def base_tables() -> dict[str, tuple[Row, ...]]:
    """The shipped data, read once per process; rows are treated as immutable."""
    analytics = tuple(
        {**row, "user_engaged": row["user_engaged"] == "True"} for row in _read_csv("analytics_data.csv")
    )
    tables = {
        "emails": _read_csv("emails.csv"),
        "calendar_events": _read_csv("calendar_events.csv"),
        "analytics": analytics,
        "project_tasks": _read_csv("project_tasks.csv"),
        "crm": _read_csv("customer_relationship_manager_data.csv"),
        "plots": (),
    }
    return tables


@cache
def company_directory() -> tuple[str, ...]:
    """Every colleague's address: the company-domain addresses that appear anywhere in the data, sorted."""
    tables = base_tables()
    found = {row["sender/recipient"] for row in tables["emails"]}
    found |= {row["participant_email"] for row in tables["calendar_events"]}
    found |= {row["assigned_to_email"] for row in tables["project_tasks"]}
    found |= {row["assigned_to_email"] for row in tables["crm"]}
    return tuple(
        sorted(address.lower() for address in found if address and address.lower().endswith("@atlas.com"))
    )


def _contains(pattern: str, value: Any) -> bool:
    """Case-insensitive regular-expression search, false on empty cells (the upstream DataFrame semantics)."""
    return isinstance(value, str) and re.search(pattern, value, re.IGNORECASE) is not None


def _next_id(rows: list[Row], column: str, pad: bool = True) -> str:
    """One more than the largest id (ids compare as strings, like the upstream string columns)."""
    number = str(int(max(row[column] for row in rows)) + 1)
    return number.zfill(8) if pad else number


def _valid_address(address: str) -> bool:
    return "@" in address and "." in address


def _paginate(items: list[Row], noun: str, page: Any, page_size: Any) -> dict[str, Any] | str:
    page = 1 if page is None else int(page)
    page_size = DEFAULT_PAGE_SIZE if page_size is None else int(page_size)
    if page < 1 or page_size < 1:
        return "Page and page size must be positive integers."
    start = (page - 1) * page_size
    return {
        noun: items[start : start + page_size],
        "pagination": {
            f"total_{noun}": len(items),
            "page": page,
            "page_size": page_size,
            "total_pages": math.ceil(len(items) / page_size),
        },
    }


class Workspace:
    """One rollout's office. Each public `<tool name>` method is a tool; keyword arguments only."""

    def __init__(self) -> None:
        tables = base_tables()
        self.emails: list[Row] = list(tables["emails"])
        self.calendar_events: list[Row] = list(tables["calendar_events"])
        self.analytics: list[Row] = list(tables["analytics"])
        self.project_tasks: list[Row] = list(tables["project_tasks"])
        self.crm: list[Row] = list(tables["crm"])
        self.plots: list[Row] = []

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run tool `name`; None-valued arguments count as not given."""
        if name not in TOOL_NAMES:
            raise UnknownToolError(f"unknown tool {name!r}")
        given = {key: value for key, value in arguments.items() if value is not None}
        return getattr(self, name)(**given)

    def comparable_state(self) -> dict[str, list[tuple[Any, ...]]]:
        """The compared tables as row tuples, strings lower-cased except in the case-sensitive columns."""
        state = {}
        for table, columns in COMPARED_TABLES.items():
            rows = getattr(self, table)
            extra = sorted({key for row in rows for key in row} - set(columns))
            state[table] = [
                tuple(_normalise(column, row.get(column)) for column in (*columns, *extra)) for row in rows
            ]
        return state

    # ----- company directory -----

    def company_directory_find_email_address(self, name: str = "") -> Any:
        if name == "":
            return "Name not provided."
        return [address for address in company_directory() if re.search(name.lower(), address)]

    # ----- email -----

    def _email(self, email_id: str) -> Row | None:
        return next((row for row in self.emails if row["email_id"] == email_id), None)

    def email_get_email_information_by_id(self, email_id: str | None = None, field: str | None = None) -> Any:
        if not email_id:
            return "Email ID not provided."
        if not field:
            return "Field not provided."
        email = self._email(email_id)
        if email is None:
            return "Email not found."
        if field not in email:
            return "Field not found."
        return {field: email[field]}

    def email_search_emails(
        self,
        query: str = "",
        date_min: str | None = None,
        date_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        words = query.lower().split()

        def matches(row: Row) -> bool:
            text = f"{row['subject']} {row['body']} {row['sender/recipient']}".lower()
            return all(word in text for word in words)

        found = sorted(
            (row for row in self.emails if matches(row)), key=lambda row: row["sent_datetime"], reverse=True
        )
        if date_min:
            lowest = _parse_time(date_min).date()
            found = [row for row in found if _parse_time(row["sent_datetime"]).date() >= lowest]
        if date_max:
            highest = _parse_time(date_max).date()
            found = [row for row in found if _parse_time(row["sent_datetime"]).date() <= highest]
        if not found:
            return "No emails found."
        return _paginate(found, "emails", page, page_size)

    def email_send_email(
        self, recipient: str | None = None, subject: str | None = None, body: str | None = None
    ) -> str:
        if not recipient or not subject or not body:
            return "Recipient, subject, or body not provided."
        if not _valid_address(recipient):
            return "Invalid recipient email address."
        values = (
            _next_id(self.emails, "email_id", pad=False),
            "outbox",
            recipient.lower(),
            subject,
            NOW,
            body,
        )
        email = dict(zip(EMAIL_COLUMNS, values, strict=True))
        self.emails.append(email)
        return "Email sent successfully."

    def email_delete_email(self, email_id: str | None = None) -> str:
        if not email_id:
            return "Email ID not provided."
        if self._email(email_id) is None:
            return "Email not found."
        self.emails = [row for row in self.emails if row["email_id"] != email_id]
        return "Email deleted successfully."

    def email_forward_email(self, email_id: str | None = None, recipient: str | None = None) -> str:
        if not email_id or not recipient:
            return "Email ID or recipient not provided."
        email = self._email(email_id)
        if email is None:
            return "Email not found."
        if not _valid_address(recipient):
            return "Invalid recipient email address."
        result = self.email_send_email(
            recipient=recipient, subject=f"FW: {email['subject']}", body=email["body"]
        )
        return "Email forwarded successfully." if result == "Email sent successfully." else result

    def email_reply_email(self, email_id: str | None = None, body: str | None = None) -> str:
        if not email_id or not body:
            return "Email ID or body not provided."
        email = self._email(email_id)
        if email is None:
            return "Email not found."
        result = self.email_send_email(
            recipient=email["sender/recipient"], subject=email["subject"], body=body
        )
        return "Email replied successfully." if result == "Email sent successfully." else result

    # ----- calendar -----

    def _event(self, event_id: str) -> Row | None:
        return next((row for row in self.calendar_events if row["event_id"] == event_id), None)

    def calendar_get_event_information_by_id(
        self, event_id: str | None = None, field: str | None = None
    ) -> Any:
        if not event_id:
            return "Event ID not provided."
        if not field:
            return "Field not provided."
        event = self._event(event_id)
        if event is None:
            return "Event not found."
        if field not in event:
            return "Field not found."
        return {field: event[field]}

    def calendar_search_events(
        self,
        query: str = "",
        time_min: str | None = None,
        time_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        found = [
            row
            for row in self.calendar_events
            if _contains(query, row["event_name"]) or _contains(query, row["participant_email"])
        ]
        if time_min:
            lowest = _parse_time(time_min)
            found = [row for row in found if _parse_time(row["event_start"]) >= lowest]
        if time_max:
            highest = _parse_time(time_max)
            found = [row for row in found if _parse_time(row["event_start"]) <= highest]
        if not found:
            return "No events found."
        return _paginate(found, "events", page, page_size)

    def calendar_create_event(
        self,
        event_name: str | None = None,
        participant_email: str | None = None,
        event_start: str | None = None,
        duration: str | None = None,
    ) -> str:
        if not event_name:
            return "Event name not provided."
        if not participant_email:
            return "Participant email not provided."
        if not event_start:
            return "Event start not provided."
        if not duration:
            return "Event duration not provided."
        event_id = _next_id(self.calendar_events, "event_id")
        values = (event_id, event_name, participant_email.lower(), event_start, duration)
        self.calendar_events.append(dict(zip(EVENT_COLUMNS, values, strict=True)))
        return event_id

    def calendar_delete_event(self, event_id: str | None = None) -> str:
        if not event_id:
            return "Event ID not provided."
        if self._event(event_id) is None:
            return "Event not found."
        self.calendar_events = [row for row in self.calendar_events if row["event_id"] != event_id]
        return "Event deleted successfully."

    def calendar_update_event(
        self, event_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        if not event_id or not field or not new_value:
            return "Event ID, field, or new value not provided."
        if self._event(event_id) is None:
            return "Event not found."
        if field == "participant_email":
            new_value = new_value.lower()
        self.calendar_events = _replace(self.calendar_events, "event_id", event_id, field, new_value)
        return "Event updated successfully."

    # ----- analytics -----

    def _visits(self, time_min: str | None, time_max: str | None) -> list[Row]:
        return [
            row
            for row in self.analytics
            if (not time_min or row["date_of_visit"] >= time_min)
            and (not time_max or row["date_of_visit"] <= time_max)
        ]

    def analytics_get_visitor_information_by_id(self, visitor_id: str | None = None) -> Any:
        if not visitor_id:
            return "Visitor ID not provided."
        found = [dict(row) for row in self.analytics if row["visitor_id"] == visitor_id]
        return found if found else "Visitor not found."

    def analytics_create_plot(
        self,
        time_min: str | None = None,
        time_max: str | None = None,
        value_to_plot: str | None = None,
        plot_type: str | None = None,
    ) -> str:
        if not time_min:
            return "Start date not provided."
        if not time_max:
            return "End date not provided."
        if value_to_plot not in PLOT_VALUES:
            return (
                "Value to plot must be one of 'total_visits', 'session_duration_seconds', 'user_engaged', "
                "'direct', 'referral', 'search engine', 'social media'"
            )
        if plot_type not in PLOT_TYPES:
            return "Plot type must be one of 'bar', 'line', 'scatter', or 'histogram'"
        file_path = f"plots/{time_min}_{time_max}_{value_to_plot}_{plot_type}.png"
        self.plots.append({"file_path": file_path})
        return file_path

    def analytics_total_visits_count(self, time_min: str | None = None, time_max: str | None = None) -> Any:
        return _per_day(self._visits(time_min, time_max), lambda rows: len(rows))

    def analytics_engaged_users_count(self, time_min: str | None = None, time_max: str | None = None) -> Any:
        return _per_day(
            self._visits(time_min, time_max), lambda rows: sum(bool(row["user_engaged"]) for row in rows)
        )

    def analytics_traffic_source_count(
        self, time_min: str | None = None, time_max: str | None = None, traffic_source: str | None = None
    ) -> Any:
        visits = self._visits(time_min, time_max)
        if not traffic_source:
            return _per_day(visits, lambda rows: len(rows))
        return _per_day(visits, lambda rows: sum(row["traffic_source"] == traffic_source for row in rows))

    def analytics_get_average_session_duration(
        self, time_min: str | None = None, time_max: str | None = None
    ) -> Any:
        def mean(rows: list[Row]) -> float:
            return sum(float(row["session_duration_seconds"]) for row in rows) / len(rows)

        return _per_day(self._visits(time_min, time_max), mean)

    # ----- project management -----

    def _task(self, task_id: str) -> Row | None:
        return next((row for row in self.project_tasks if row["task_id"] == task_id), None)

    def _team(self) -> set[str]:
        return {row["assigned_to_email"].lower() for row in self.project_tasks if row["assigned_to_email"]}

    def project_management_get_task_information_by_id(
        self, task_id: str | None = None, field: str | None = None
    ) -> Any:
        if not task_id:
            return "Task ID not provided."
        if not field:
            return "Field not provided."
        task = self._task(task_id)
        if task is None:
            return "Task not found."
        if field not in task:
            return "Field not found."
        return {field: task[field]}

    def project_management_search_tasks(
        self,
        task_name: str | None = None,
        assigned_to_email: str | None = None,
        list_name: str | None = None,
        due_date: str | None = None,
        board: str | None = None,
    ) -> Any:
        filters = {
            "task_name": task_name,
            "assigned_to_email": assigned_to_email,
            "list_name": list_name,
            "due_date": due_date,
            "board": board,
        }
        if not any(filters.values()):
            return "No search parameters provided."
        found = self.project_tasks
        for column, wanted in filters.items():
            if wanted:
                found = [row for row in found if _contains(wanted, row[column])]
        return list(found)

    def project_management_create_task(
        self,
        task_name: str | None = None,
        assigned_to_email: str | None = None,
        list_name: str | None = None,
        due_date: str | None = None,
        board: str | None = None,
    ) -> str:
        if not all([task_name, assigned_to_email, list_name, due_date, board]):
            return "Missing task details."
        assigned_to_email = assigned_to_email.lower()
        if assigned_to_email not in self._team():
            return ASSIGNEE_ERROR
        if list_name not in LISTS:
            return LIST_ERROR
        if board not in BOARDS:
            return BOARD_ERROR
        task_id = _next_id(self.project_tasks, "task_id")
        values = (task_id, task_name, assigned_to_email, list_name, due_date, board)
        self.project_tasks.append(dict(zip(TASK_COLUMNS, values, strict=True)))
        return task_id

    def project_management_delete_task(self, task_id: str | None = None) -> str:
        if not task_id:
            return "Task ID not provided."
        if self._task(task_id) is None:
            return "Task not found."
        self.project_tasks = [row for row in self.project_tasks if row["task_id"] != task_id]
        return "Task deleted successfully."

    def project_management_update_task(
        self, task_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        if not task_id or not field or not new_value:
            return "Task ID, field, or new value not provided."
        if field == "assigned_to_email":
            new_value = new_value.lower()
        if field == "board" and new_value not in BOARDS:
            return BOARD_ERROR
        if field == "list_name" and new_value not in LISTS:
            return LIST_ERROR
        if field == "assigned_to_email" and new_value not in self._team():
            return ASSIGNEE_ERROR
        if self._task(task_id) is None:
            return "Task not found."
        if field not in TASK_COLUMNS:
            return "Field not valid."
        self.project_tasks = _replace(self.project_tasks, "task_id", task_id, field, new_value)
        return "Task updated successfully."

    # ----- customer relationship manager -----

    def customer_relationship_manager_search_customers(
        self,
        customer_name: str | None = None,
        customer_email: str | None = None,
        product_interest: str | None = None,
        status: str | None = None,
        assigned_to_email: str | None = None,
        last_contact_date_min: str | None = None,
        last_contact_date_max: str | None = None,
        follow_up_by_min: str | None = None,
        follow_up_by_max: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
    ) -> Any:
        contains = {
            "customer_name": customer_name,
            "customer_email": customer_email,
            "product_interest": product_interest,
            "status": status,
            "assigned_to_email": assigned_to_email,
        }
        bounds = (
            ("last_contact_date", last_contact_date_min, last_contact_date_max),
            ("follow_up_by", follow_up_by_min, follow_up_by_max),
        )
        if not any(contains.values()) and not any(low or high for _, low, high in bounds):
            return "No search parameters provided. Please provide at least one parameter."
        found = self.crm
        for column, wanted in contains.items():
            if wanted:
                found = [row for row in found if _contains(wanted, row[column])]
        for column, low, high in bounds:
            if low:
                found = [row for row in found if row[column] is not None and row[column] >= low]
            if high:
                found = [row for row in found if row[column] is not None and row[column] <= high]
        if not found:
            return "No customers found."
        return _paginate(list(found), "customers", page, page_size)

    def customer_relationship_manager_update_customer(
        self, customer_id: str | None = None, field: str | None = None, new_value: str | None = None
    ) -> str:
        if not customer_id or not field or not new_value:
            return "Customer ID, field, or new value not provided."
        if field == "status" and new_value not in STATUSES:
            return "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
        if field == "product_interest" and new_value not in PRODUCTS:
            return (
                "Product interest not valid. Please choose from: 'Software', 'Hardware', 'Services', "
                "'Consulting', 'Training'"
            )
        if field in ("customer_email", "assigned_to_email"):
            new_value = new_value.lower()
        if not any(row["customer_id"] == customer_id for row in self.crm):
            return "Customer not found."
        if field not in CRM_COLUMNS:
            return (
                "Field not valid. Please choose from: 'customer_name', 'assigned_to_email', 'customer_email', "
                "'customer_phone', 'last_contact_date', 'product_interest', 'status', 'notes', 'follow_up_by'"
            )
        self.crm = _replace(self.crm, "customer_id", customer_id, field, new_value)
        return "Customer updated successfully."

    def customer_relationship_manager_add_customer(
        self,
        customer_name: str | None = None,
        assigned_to_email: str | None = None,
        status: str | None = None,
        customer_email: str | None = None,
        customer_phone: str | None = None,
        last_contact_date: str | None = None,
        product_interest: str | None = None,
        notes: str = "",
        follow_up_by: str | None = None,
    ) -> str:
        if not all([customer_name, assigned_to_email, status]):
            return "Please provide all required fields: customer_name, assigned_to_email, status."
        customer_id = _next_id(self.crm, "customer_id")
        self.crm.append(
            {
                "customer_id": customer_id,
                "assigned_to_email": assigned_to_email.lower(),
                "customer_name": customer_name,
                "customer_email": customer_email.lower() if customer_email else customer_email,
                "customer_phone": customer_phone,
                "last_contact_date": last_contact_date,
                "product_interest": product_interest,
                "status": status,
                "follow_up_by": follow_up_by,
                "notes": notes,
            }
        )
        return customer_id

    def customer_relationship_manager_delete_customer(self, customer_id: str | None = None) -> str:
        if not customer_id:
            return "Customer ID not provided."
        if not any(row["customer_id"] == customer_id for row in self.crm):
            return "Customer not found."
        self.crm = [row for row in self.crm if row["customer_id"] != customer_id]
        return "Customer deleted successfully."


TOOL_NAMES = frozenset(
    name
    for name in vars(Workspace)
    if name.startswith(
        ("company_directory_", "email_", "calendar_", "analytics_", "project_management_", "customer_")
    )
)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.strip())


def _replace(rows: list[Row], id_column: str, row_id: str, field: str, value: Any) -> list[Row]:
    """A new table in which the matching rows are new dicts with `field` set (shared rows stay untouched)."""
    return [{**row, field: value} if row[id_column] == row_id else row for row in rows]


def _per_day(rows: list[Row], measure: Callable[[list[Row]], Any]) -> dict[str, Any]:
    days: dict[str, list[Row]] = {}
    for row in rows:
        days.setdefault(row["date_of_visit"], []).append(row)
    return {day: measure(days[day]) for day in sorted(days)}


def _normalise(column: str, value: Any) -> Any:
    if isinstance(value, str) and column not in CASE_SENSITIVE_COLUMNS:
        return value.lower()
    return value


def parse_calls(calls: Iterable[tuple[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name, arguments) with arguments a JSON object string or a dict; unparsable calls are dropped."""
    parsed = []
    for name, arguments in calls:
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                continue
        if isinstance(arguments, dict):
            parsed.append((name, arguments))
    return parsed


def final_state(calls: Iterable[tuple[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """Replay `calls` on a fresh workspace; a call that fails (unknown tool, bad arguments) is skipped."""
    workspace = Workspace()
    for name, arguments in parse_calls(calls):
        try:
            workspace.call(name, arguments)
        except TimeoutError:
            raise  # the CPU pool's deadline, not a failing tool call
        except Exception:
            continue
    return workspace.comparable_state()


def replay_reward(predicted: list[tuple[str, Any]], expected: list[tuple[str, Any]]) -> float:
    """1.0 iff the predicted calls leave the office in the same state as the ground-truth calls."""
    return 1.0 if final_state(predicted) == final_state(expected) else 0.0
