"""litmus_agent: a domain-agnostic verifier for any task whose answer is one typed value.

A row says where the answer is written (`output_regex`, else a named wrapper format `answer_format`, else
the legacy `use_box_format`), what type it is (`answer_type`: float, bool or string; legacy rows give a
`property_type` instead) and, optionally, how to compare it (`match`: a named reward rule with its
tolerances). Any other row fields (the domain's: a SMILES string, a property name, a `method`) pass
through untouched and are echoed; `method` only groups the metrics. A row whose type, format, regex or
rule cannot be used is refused with a 422 naming the field rather than scored 0.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.responses import NeMoGymResponse, assistant_texts
from resources_servers.litmus_agent.grading import (
    ANSWER_FORMATS,
    BOXED_FORMAT,
    DEFAULT_RULES,
    DOUBLE_PARENTHESES_FORMAT,
    LEGACY_DISCRETE_PROPERTY_TYPES,
    LEGACY_PROPERTY_TYPES,
    NUMERIC_RULES,
    AnswerType,
    RuleName,
    compile_output_regex,
    extract_value,
    parse_bool,
    parse_number,
    score,
)


class LitmusAgentConfig(BaseResourcesServerConfig):
    float_rel_tol: float = Field(default=1e-6, ge=0, description="isclose's relative tolerance by default")
    float_abs_tol: float = Field(default=1e-6, ge=0, description="isclose's absolute tolerance by default")
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline of one answer extraction (row regexes come from data)"
    )


class MatchRule(BaseModel):
    """A row's choice of reward rule; tolerances other than the ones named here are passed on as well."""

    model_config = ConfigDict(extra="allow")

    rule: RuleName
    rel_tol: float | None = Field(default=None, ge=0)
    abs_tol: float | None = Field(default=None, ge=0)

    def params(self) -> dict[str, Any]:
        return {key: value for key, value in self.model_dump(exclude={"rule"}).items() if value is not None}


class LitmusAgentVerifyRequest(BaseVerifyRequest):
    # Domain fields ride along: accepted, echoed, never read (but `method`, for grouping metrics).
    model_config = ConfigDict(extra="allow")

    expected_answer: str | float | int
    answer_type: AnswerType | None = None
    output_regex: str | None = None
    answer_format: str | None = None
    use_box_format: bool = False
    match: MatchRule | None = None

    @field_validator("output_regex")
    @classmethod
    def _one_group(cls, output_regex: str | None) -> str | None:
        if output_regex is not None:
            compile_output_regex(output_regex)
        return output_regex

    @field_validator("answer_format")
    @classmethod
    def _known_format(cls, answer_format: str | None) -> str | None:
        if answer_format is not None and answer_format not in ANSWER_FORMATS:
            raise ValueError(f"unknown answer_format {answer_format!r}; use fmt_00 .. fmt_30")
        return answer_format

    @model_validator(mode="after")
    def _resolvable(self) -> LitmusAgentVerifyRequest:
        """A type must be given or implied, and the expected answer must be readable by the rule."""
        legacy = (self.model_extra or {}).get("property_type")
        if self.answer_type is None and legacy not in LEGACY_PROPERTY_TYPES:
            raise field_error(
                "answer_type",
                f"answer_type is missing and property_type {legacy!r} does not imply one; "
                "set answer_type to float, bool or string",
                None,
            )
        rule = self.policy().rule
        if rule in NUMERIC_RULES and parse_finite(self.expected_answer) is None:
            message = f"expected_answer {self.expected_answer!r} is not a finite number, as rule {rule} needs"
            raise field_error("expected_answer", message, self.expected_answer)
        if rule == "bool_eq" and parse_bool(str(self.expected_answer)) is None:
            message = f"expected_answer {self.expected_answer!r} is not a yes/no value, as rule bool_eq needs"
            raise field_error("expected_answer", message, self.expected_answer)
        return self

    def policy(self) -> Policy:
        legacy = (self.model_extra or {}).get("property_type")
        if self.answer_type is not None:
            resolved, parse_as = self.answer_type, self.answer_type
        else:  # the validator made sure the legacy kind implies a type
            resolved = LEGACY_PROPERTY_TYPES[legacy]
            # Legacy flags and counts were always read as numbers, so "2" is not taken for true.
            parse_as = "float" if legacy in LEGACY_DISCRETE_PROPERTY_TYPES else resolved
        if self.match is not None:
            rule, params = self.match.rule, self.match.params()
        elif self.answer_type is None and legacy in LEGACY_DISCRETE_PROPERTY_TYPES:
            rule, params = "exact", {}
        else:
            rule, params = DEFAULT_RULES[resolved], {}
        return Policy(resolved, parse_as, rule, params)

    def answer_format_name(self) -> str:
        if self.answer_format is not None:
            return self.answer_format
        return BOXED_FORMAT if self.use_box_format else DOUBLE_PARENTHESES_FORMAT


class Policy(NamedTuple):
    """How a row is graded: its reported type, the type its capture is read as, and the reward rule."""

    answer_type: AnswerType
    parse_as: AnswerType
    rule: RuleName
    params: dict[str, Any]


def field_error(field: str, message: str, value: Any) -> ValidationError:
    """A validation error located at `field` (a 422 naming it), for checks that read several fields."""
    error = PydanticCustomError("invalid_row", "{reason}", {"reason": message})
    return ValidationError.from_exception_data(
        "LitmusAgentVerifyRequest", [InitErrorDetails(type=error, loc=(field,), input=value)]
    )


def parse_finite(value: str | float | int) -> float | None:
    number = parse_number(str(value))
    return number if number is not None and abs(number) != float("inf") and number == number else None


class LitmusAgentVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    predicted_value: float | str | None = None
    correct: bool = False
    resolved_answer_type: str = ""
    resolved_reward_rule: str = ""


# Fields verify sets itself: a pass-through row field of the same name is dropped, not a clash.
SET_BY_VERIFY = frozenset(
    set(LitmusAgentVerifyResponse.model_fields) - set(LitmusAgentVerifyRequest.model_fields)
)


def response_text(response: NeMoGymResponse) -> str:
    """The assistant's messages, one per line, without reasoning or tool calls."""
    return "\n".join(text for item in response.output for text in assistant_texts(item)).strip()


class LitmusAgentResourcesServer(SimpleResourcesServer):
    config: LitmusAgentConfig
    key_metric_patterns = ("mean/reward", "mean/correct")

    async def verify(self, body: LitmusAgentVerifyRequest) -> LitmusAgentVerifyResponse:
        """Extract (in the CPU pool, past the deadline: no value and a masked sample), read, compare."""
        policy = body.policy()
        predicted = await run_cpu_bound(
            extract_value,
            response_text(body.response),
            policy.parse_as,
            body.output_regex,
            body.answer_format_name(),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        reward = score(
            predicted,
            body.expected_answer,
            policy.rule,
            policy.params,
            self.config.float_rel_tol,
            self.config.float_abs_tol,
        )
        echoed = {key: value for key, value in body.model_dump().items() if key not in SET_BY_VERIFY}
        return LitmusAgentVerifyResponse(
            **echoed,
            reward=reward,
            predicted_value=predicted,
            correct=reward == 1.0,
            resolved_answer_type=policy.answer_type,
            resolved_reward_rule=policy.rule,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Accuracy and mean reward per `method` (pass-through; `unknown` when absent), and within each
        method per resolved answer type."""
        groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for rollout in (rollout for task in tasks for rollout in task):
            answer_type = rollout.get("resolved_answer_type") or rollout.get("answer_type") or "unknown"
            groups[str(rollout.get("method") or "unknown")][str(answer_type)].append(rollout)
        return {
            method: {
                **_group_stats([rollout for group in by_type.values() for rollout in group]),
                "by_answer_type": {
                    answer_type: _group_stats(by_type[answer_type]) for answer_type in sorted(by_type)
                },
            }
            for method, by_type in sorted(groups.items())
        }


def _group_stats(rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "count": len(rollouts),
        "accuracy": statistics.fmean(float(bool(rollout.get("correct"))) for rollout in rollouts),
        "mean_reward": statistics.fmean(float(rollout["reward"]) for rollout in rollouts),
    }


if __name__ == "__main__":
    LitmusAgentResourcesServer.run_webserver()
