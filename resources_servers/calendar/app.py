"""calendar: multi-turn scheduling, rewarded 1.0 when the reply's calendar meets every stated constraint.

The row is a conversation in which a user adds events with time constraints, turn after turn; the model
answers the last turn with the whole calendar as a JSON list of events (`event_id`, `start_time`,
`duration`, ...). `exp_cal_state` lists the events the calendar must then hold, with their durations, day
windows and constraints; any schedule that satisfies them all earns 1.0, whatever times it picks. Reading
the reply's JSON runs in the CPU worker pool under a deadline, since a long reply full of brackets costs
time; a grading that runs out of it is masked, not scored.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    ReverifyMode,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.calendar.grading import ExpectedEvent, Grade, grade

REASONS = (
    "pass",
    "no_answer",
    "think_found",
    "no_json_list",
    "malformed_event",
    "duplicate_event_id",
    "different_number_of_events",
    "wrong_event_ids",
    "conflicting_events",
    "constraint_violated",
)


class CalendarConfig(BaseResourcesServerConfig):
    REVERIFY_MODE: ClassVar[ReverifyMode] = ReverifyMode.STATELESS
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one grading; past it the rollout is masked"
    )


class CalendarVerifyRequest(BaseVerifyRequest):
    # Event id -> the event the final calendar must hold (NeMo Gym's field).
    exp_cal_state: dict[str, ExpectedEvent]


class CalendarVerifyResponse(CalendarVerifyRequest, BaseVerifyResponse):
    grade_reason: str
    grade_detail: str


class CalendarServer(SimpleResourcesServer):
    config: CalendarConfig

    async def verify(self, body: CalendarVerifyRequest) -> CalendarVerifyResponse:
        """1.0 iff the calendar in the reply satisfies every expected event; else 0.0 and the first reason."""
        result: Grade = await run_cpu_bound(
            grade,
            body.response.output_text,
            body.exp_cal_state,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=Grade(0.0, "grading_timeout", "the reply could not be graded within the deadline"),
        )
        return CalendarVerifyResponse(
            **body.model_dump(), reward=result.reward, grade_reason=result.reason, grade_detail=result.detail
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """The share of rollouts by grade reason (`reason/<name>`), to see why schedules fail."""
        rollouts = [rollout for task in tasks for rollout in task if "grade_reason" in rollout]
        if not rollouts:
            return {}
        return {
            f"reason/{reason}": sum(rollout["grade_reason"] == reason for rollout in rollouts) / len(rollouts)
            for reason in REASONS
        }


if __name__ == "__main__":
    CalendarServer.run_webserver()
