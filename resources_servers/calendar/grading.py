"""Calendar grading, free of any server: clock times, the expected events, the reply's calendar, the checks.

A reply passes when its calendar (a JSON list of event objects) holds exactly the expected events, none
overlapping, each with its expected duration, inside its day window and meeting its constraint:
`before X` (ends by X), `after X` (starts at or after X), `between X and Y` (starts at or after X, ends by
Y), `at X` (starts at X), or none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

MINUTES_PER_DAY = 24 * 60
# `10am`, `10:30 pm`, `12pm` (noon), or 24-hour `14:05`.
CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*([ap])\.?m\.?$|^(\d{1,2}):(\d{2})$")
CONSTRAINT = re.compile(r"^(before|after|at) (.+)$|^between (.+) and (.+)$")
# A reply longer than this is not searched for lists beyond its first this-many `[`: bounded work per reply.
MAX_LIST_STARTS = 2000


def minutes(clock: str) -> int:
    """Minutes after midnight of a clock time; ValueError for anything else."""
    match = CLOCK.match(clock.strip().lower())
    if match is None:
        raise ValueError(f"not a clock time: {clock!r} (write e.g. 10am, 2:30pm or 14:30)")
    hour_12, minute_12, half, hour_24, minute_24 = match.groups()
    if half:
        hour, minute = int(hour_12), int(minute_12 or 0)
        if not 1 <= hour <= 12:
            raise ValueError(f"not a clock time: {clock!r} (12-hour clock hours are 1 to 12)")
        hour = hour % 12 + (12 if half == "p" else 0)
    else:
        hour, minute = int(hour_24), int(minute_24)
    if hour > 23 or minute > 59:
        raise ValueError(f"not a clock time: {clock!r}")
    return hour * 60 + minute


def constraint_window(constraint: str | None) -> tuple[int | None, int | None, int | None]:
    """(earliest start, latest end, exact start) that a constraint sets; None where it sets nothing."""
    if constraint is None or not constraint.strip():
        return None, None, None
    match = CONSTRAINT.match(constraint.strip().lower())
    if match is None:
        raise ValueError(f"unknown constraint {constraint!r}: use before X, after X, at X or between X and Y")
    kind, clock, first, second = match.groups()
    if kind == "before":
        return None, minutes(clock), None
    if kind == "after":
        return minutes(clock), None, None
    if kind == "at":
        return None, None, minutes(clock)
    return minutes(first), minutes(second), None


class ExpectedEvent(BaseModel):
    """One entry of a row's `exp_cal_state` (NeMo Gym's fields)."""

    event_id: int | str
    event_name: str | None = None
    duration: int = Field(gt=0, le=MINUTES_PER_DAY)
    constraint: str | None = None
    min_time: str
    max_time: str

    @field_validator("min_time", "max_time")
    @classmethod
    def _clock(cls, value: str) -> str:
        minutes(value)
        return value

    @field_validator("constraint")
    @classmethod
    def _known_constraint(cls, value: str | None) -> str | None:
        constraint_window(value)
        return value

    @model_validator(mode="after")
    def _window_fits_the_event(self) -> ExpectedEvent:
        if minutes(self.max_time) - minutes(self.min_time) < self.duration:
            raise ValueError("the min_time to max_time window is shorter than the event")
        return self


@dataclass(frozen=True)
class Grade:
    reward: float
    reason: str
    detail: str = ""


@dataclass(frozen=True)
class Placed:
    event_id: str
    start: int
    duration: int


def extract_calendar(text: str) -> list[Any] | None:
    """The last JSON list of objects in `text` (the reply's final calendar), or None when it has none."""
    decoder = json.JSONDecoder()
    found = None
    starts = [index for index, char in enumerate(text) if char == "["][:MAX_LIST_STARTS]
    position = 0
    for start in starts:
        if start < position:
            continue  # inside a list already read
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            found, position = value, end
    return found


def _placed(item: dict[str, Any]) -> Placed:
    """An event of the reply; ValueError naming what is missing or unreadable."""
    if "event_id" not in item or "start_time" not in item or "duration" not in item:
        raise ValueError(f"an event needs event_id, start_time and duration: {json.dumps(item)[:200]}")
    duration = item["duration"]
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration != int(duration):
        raise ValueError(f"event {item['event_id']}: duration {duration!r} is not a whole number of minutes")
    if not isinstance(item["start_time"], str):
        raise ValueError(f"event {item['event_id']}: start_time {item['start_time']!r} is not a clock time")
    return Placed(str(item["event_id"]), minutes(item["start_time"]), int(duration))


def grade(text: str, expected: dict[str, ExpectedEvent]) -> Grade:
    """1.0 when the reply's calendar satisfies every expected event, else 0.0 with the first reason."""
    if not text.strip():
        return Grade(0.0, "no_answer", "the reply has no text (e.g. it ran out of tokens while reasoning)")
    if "<think>" in text:
        return Grade(0.0, "think_found", "the reply contains a <think> block")
    if not expected:
        return Grade(1.0, "pass", "no event was expected")
    calendar = extract_calendar(text)
    if calendar is None:
        return Grade(0.0, "no_json_list", "no JSON list of event objects in the reply")
    try:
        events = [_placed(item) for item in calendar]
    except ValueError as error:
        return Grade(0.0, "malformed_event", str(error))
    ids = [event.event_id for event in events]
    if len(set(ids)) != len(ids):
        return Grade(0.0, "duplicate_event_id", f"event ids {ids}")
    wanted = {str(key) for key in expected}
    if set(ids) != wanted:
        return Grade(
            0.0,
            "different_number_of_events" if len(ids) != len(wanted) else "wrong_event_ids",
            f"expected events {sorted(wanted)}, the calendar has {sorted(ids)}",
        )
    ordered = sorted(events, key=lambda event: event.start)
    for first, second in pairwise(ordered):
        if first.start + first.duration > second.start:
            return Grade(0.0, "conflicting_events", f"events {first.event_id} and {second.event_id} overlap")
    by_id = {str(key): event for key, event in expected.items()}
    for event in events:
        problem = _violation(event, by_id[event.event_id])
        if problem:
            return Grade(0.0, "constraint_violated", f"event {event.event_id}: {problem}")
    return Grade(1.0, "pass")


def _violation(event: Placed, wanted: ExpectedEvent) -> str | None:
    end = event.start + event.duration
    if event.duration != wanted.duration:
        return f"lasts {event.duration} min, not {wanted.duration}"
    if event.start < minutes(wanted.min_time) or end > minutes(wanted.max_time):
        return f"falls outside {wanted.min_time}-{wanted.max_time}"
    earliest, latest, exact = constraint_window(wanted.constraint)
    if (
        (earliest is not None and event.start < earliest)
        or (latest is not None and end > latest)
        or (exact is not None and event.start != exact)
    ):
        return f"breaks {wanted.constraint!r}"
    return None
