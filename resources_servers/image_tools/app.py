"""image_tools: PivotRL for vision-language image tools. At a pivot turn of a demonstrated trajectory, the
model makes one decision (zoom into a region, rotate, compare two images, read a colour... or answer), and
that one decision is scored against the demonstrated action (`expected_action`); see grading.py for the
levels. Nothing is executed: the call is the answer, so the agent makes a single model call.

`binary` reward mode pays 1.0 when the argument score reaches `argument_threshold`, `continuous` pays the
score itself; a wrong tool or a wrong image earns 0.0, and so does a burst of calls when one was expected.
When the demonstration answered at this turn (`"name": "__answer__"`), the answer must match and no tool
may be called.
"""

import json
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseRunRequest,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.image_tools.grading import (
    ANSWER_ACTION,
    answers_match,
    argument_score,
    family_of,
    final_answer,
    same_target,
    same_tool,
    without_ignored,
)
from resources_servers.image_tools.tool_calls import assistant_text, calls_in_output

logger = logging.getLogger(__name__)

FailureCode = Literal[
    "none",
    "no_tool_call_in_rollout",
    "tool_name_mismatch",
    "target_mismatch",
    "argument_below_threshold",
    "extra_tool_calls",
    "tool_call_when_answer_expected",
    "answer_missing",
    "answer_incorrect",
]


class ImageToolsPivotResourcesServerConfig(BaseResourcesServerConfig):
    reward_mode: Literal["binary", "continuous"] = "binary"
    enable_target_match: bool = True
    argument_threshold: float = Field(default=0.5, ge=0, le=1)
    numeric_tolerance: float = Field(default=1e-6, ge=0)
    penalize_extra_tool_calls: bool = True
    unify_region_inspect_tools: bool = True
    log_unparsed_generations: bool = False
    log_unparsed_every_n: int = Field(default=50, ge=1)


class ExpectedAction(BaseModel):
    name: str
    arguments: dict[str, Any]


def expected_action_of(
    action: dict[str, Any] | None, metadata: dict[str, Any] | None, expected_answer: str | None
) -> ExpectedAction | None:
    """The demonstrated action, from `expected_action`, else `metadata.expected_action`, else
    `expected_answer` as JSON; its arguments may be an object or a JSON-encoded object."""
    candidates: list[Any] = [action, (metadata or {}).get("expected_action")]
    if expected_answer:
        try:
            candidates.append(json.loads(expected_answer))
        except ValueError:
            pass
    for candidate in candidates:
        if isinstance(candidate, dict) and isinstance(candidate.get("name"), str) and candidate["name"]:
            arguments = candidate.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    arguments = {}
            return ExpectedAction(
                name=candidate["name"], arguments=arguments if isinstance(arguments, dict) else {}
            )
    return None


class ImageToolsPivotRunRequest(BaseRunRequest):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_action: dict[str, Any] | None = None
    expected_answer: str | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _has_an_expected_action(self) -> "ImageToolsPivotRunRequest":
        """Without a demonstrated action there is nothing to score against: a bad row, not a 0."""
        if expected_action_of(self.expected_action, self.metadata, self.expected_answer) is None:
            raise ValueError(
                "no expected action: set expected_action (or metadata.expected_action, or expected_answer "
                'as JSON) to {"name": ..., "arguments": {...}}'
            )
        return self


class ImageToolsPivotVerifyRequest(ImageToolsPivotRunRequest, BaseVerifyRequest):
    pass


class ImageToolsPivotVerifyResponse(BaseVerifyResponse):
    uuid: str | int | None = None
    expected_action: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    model_output: str = ""
    tool_name_match: bool = False
    rollout_tool_name: str | None = None
    expected_tool_name: str | None = None
    target_match: bool | None = None
    argument_score: float | None = None
    argument_detail: str | None = None
    tool_family: str | None = None
    num_rollout_tool_calls: int = 0
    failure_code: FailureCode = "none"


class ImageToolsPivotResourcesServer(SimpleResourcesServer):
    config: ImageToolsPivotResourcesServerConfig
    _unparsed_seen: int = 0

    async def verify(self, body: ImageToolsPivotVerifyRequest) -> ImageToolsPivotVerifyResponse:
        expected = expected_action_of(body.expected_action, body.metadata, body.expected_answer)
        assert expected is not None  # the request model refuses rows without one
        output = body.response.output
        calls = calls_in_output(output)
        grade: dict[str, Any] = {"num_rollout_tool_calls": len(calls), "expected_tool_name": expected.name}

        if expected.name == ANSWER_ACTION:
            grade["tool_family"] = "answer"
            if calls:
                grade.update(
                    failure_code="tool_call_when_answer_expected", model_output=f"{calls[0].name}(...)"
                )
                return self._answer(body, 0.0, grade)
            text = assistant_text(output)
            got = final_answer(text)
            grade["model_output"] = got if got is not None else text[-300:]
            if got is None:
                return self._answer(body, 0.0, {**grade, "failure_code": "answer_missing"})
            right = answers_match(str(expected.arguments.get("answer", "")), got)
            return self._answer(
                body,
                1.0 if right else 0.0,
                {**grade, "failure_code": "none" if right else "answer_incorrect"},
            )

        family = family_of(expected.name)
        grade["tool_family"] = family
        if not calls:
            text = assistant_text(output)
            self._log_unparsed(text)
            return self._answer(
                body, 0.0, {**grade, "failure_code": "no_tool_call_in_rollout", "model_output": text[-500:]}
            )

        call = calls[0]  # the demonstration is one action: the first call is the decision
        got_arguments, expected_arguments = (
            without_ignored(call.arguments),
            without_ignored(expected.arguments),
        )
        grade.update(
            rollout_tool_name=call.name, model_output=f"{call.name}({json.dumps(got_arguments)[:400]})"
        )
        grade["tool_name_match"] = same_tool(call.name, expected.name, self.config.unify_region_inspect_tools)
        if not grade["tool_name_match"]:
            return self._answer(body, 0.0, {**grade, "failure_code": "tool_name_mismatch"})
        if self.config.enable_target_match:
            grade["target_match"] = same_target(family, got_arguments, expected_arguments)
            if not grade["target_match"]:
                return self._answer(body, 0.0, {**grade, "failure_code": "target_mismatch"})

        score, detail = argument_score(
            family, got_arguments, expected_arguments, self.config.numeric_tolerance
        )
        grade.update(argument_score=score, argument_detail=detail)
        passed = score >= self.config.argument_threshold
        reward = score if self.config.reward_mode == "continuous" else float(passed)
        grade["failure_code"] = "none" if passed else "argument_below_threshold"
        if self.config.penalize_extra_tool_calls and len(calls) > 1:
            reward = 0.0
            grade["failure_code"] = "extra_tool_calls" if passed else grade["failure_code"]
        return self._answer(body, reward, grade)

    def _answer(
        self, body: ImageToolsPivotVerifyRequest, reward: float, grade: dict[str, Any]
    ) -> ImageToolsPivotVerifyResponse:
        return ImageToolsPivotVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=reward,
            uuid=body.uuid,
            expected_action=body.expected_action,
            metadata=body.metadata,
            **grade,
        )

    def _log_unparsed(self, text: str) -> None:
        """A sample of generations with no tool call, to tell a format problem from a model that answered."""
        if not self.config.log_unparsed_generations:
            return
        self._unparsed_seen += 1
        if (
            self._unparsed_seen % self.config.log_unparsed_every_n == 1
            or self.config.log_unparsed_every_n == 1
        ):
            logger.warning(
                "image_tools: no tool call in a generation of %d chars: %r", len(text), text[-400:]
            )


if __name__ == "__main__":
    ImageToolsPivotResourcesServer.run_webserver()
