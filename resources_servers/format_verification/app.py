"""format_verification: reward a response for its form (patterns, citations, length, sections, JSON), not its content.

A row lists typed checks (see checks.py) or carries NeMo Gym's single `verifier` object; the reward is
1.0 only if every check passes (`binary`) or the fraction that pass (`fraction`). The checks run in the
CPU worker pool because row regexes may backtrack catastrophically; past the deadline the reward is 0.0.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.format_verification.checks import Check, Verifier, run_checks

GradingMode = Literal["binary", "fraction"]
MAX_CHECKS = 100


class FormatVerificationConfig(BaseResourcesServerConfig):
    grading_mode: GradingMode | None = Field(
        default=None, description="when set, used for every row instead of the row's own grading_mode"
    )
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"check_timeout_seconds": "grading_timeout_s"}
    grading_timeout_s: float = Field(
        default=5.0, gt=0, description="deadline for running one row's checks; a slower row scores 0.0"
    )


class FormatVerifyRequest(BaseVerifyRequest):
    checks: list[Check] | None = Field(default=None, min_length=1, max_length=MAX_CHECKS)
    verifier: Verifier | None = None
    grading_mode: GradingMode = "binary"

    @model_validator(mode="after")
    def _one_source_of_checks(self) -> FormatVerifyRequest:
        if (self.checks is None) == (self.verifier is None):
            raise ValueError(
                "give either `checks` (a list of typed checks) or NeMo Gym's `verifier`, not both"
            )
        return self

    def all_checks(self) -> list[Check]:
        return self.checks if self.checks is not None else [self.verifier.to_check()]


class CheckResult(BaseModel):
    type: str
    passed: bool
    details: dict[str, Any]


class FormatVerifyResponse(BaseVerifyResponse):
    checks: list[Check] | None
    grading_mode: GradingMode
    check_results: list[CheckResult]
    all_passed: bool
    fraction_passed: float
    timed_out: bool
    verifier: Verifier | None = None
    match_details: dict[str, Any] | None = None


class FormatVerificationResourcesServer(SimpleResourcesServer):
    config: FormatVerificationConfig

    async def verify(self, body: FormatVerifyRequest) -> FormatVerifyResponse:
        results = await self._run_checks(body.response.output_text, body.all_checks())
        passed = [result["passed"] for result in results or []]
        fraction = sum(passed) / len(passed) if passed else 0.0
        all_passed = bool(passed) and all(passed)
        mode = self.config.grading_mode or body.grading_mode
        match_details = {**results[0]["details"], "passed": all_passed} if body.verifier and results else None
        return FormatVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=fraction if mode == "fraction" else float(all_passed),
            checks=body.checks,
            grading_mode=mode,
            check_results=results or [],
            all_passed=all_passed,
            fraction_passed=fraction,
            timed_out=results is None,
            verifier=body.verifier,
            match_details=match_details,
        )

    async def _run_checks(self, text: str, checks: list[Check]) -> list[dict[str, Any]] | None:
        """Each check's verdict; none for a blank answer (only negative checks would pass it); None past
        the deadline."""
        if not text.strip():
            return []
        return await run_cpu_bound(
            run_checks, text, checks, timeout_s=self.config.grading_timeout_s, on_timeout=None
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """`check_pass_rate/<type>`: the share of checks of each type that passed, over every rollout."""
        verdicts: dict[str, list[bool]] = defaultdict(list)
        for rollout in (rollout for task in tasks for rollout in task):
            results = rollout.get("check_results")
            for result in results if isinstance(results, list) else []:
                if isinstance(result, dict) and isinstance(result.get("passed"), bool):
                    verdicts[str(result.get("type"))].append(result["passed"])
        return {
            f"check_pass_rate/{kind}": statistics.fmean(passed) for kind, passed in sorted(verdicts.items())
        }

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        headline = ("mean/reward", "mean/all_passed", "mean/fraction_passed", "mean/timed_out")
        keys = {name: agent_metrics[name] for name in headline if name in agent_metrics}
        keys.update(
            {name: value for name, value in agent_metrics.items() if name.startswith("check_pass_rate/")}
        )
        return keys


if __name__ == "__main__":
    FormatVerificationResourcesServer.run_webserver()
