"""terminus_judge: one turn of a terminal agent driven by the Terminus harness. The model answers with the
harness's JSON (analysis, plan, commands of keystrokes, completion flag) and is rewarded 1.0 when that JSON
parses, fits the row's harness schema (terminus_1 or terminus_2), agrees with the demonstrated turn on
whether the task is complete, and types nearly the same keystrokes (difflib ratio at the threshold).
Keystrokes that miss the threshold may go to an optional equivalence judge (`enable_llm_judge`): other
commands can do the same thing. Judge calls go through `nemo_gym.judge`; one that fails masks the sample.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import ConfigError
from nemo_gym.envkit.judged_env import PromptJudge, first_label
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.http.errors import GymError
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeConfig,
    JudgeFailed,
    JudgeFailure,
    judge_failure_metrics,
    last_assistant_text,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.failure_kinds import JUDGE_FAILED, VERIFIER_ERROR
from resources_servers.terminus_judge.grading import HARNESSES, FailureCode, TurnGrade, grade_turn, turn_text


class TerminusJudgeConfig(JudgeConfig, BaseResourcesServerConfig):
    """NeMo Gym's keys. The judge runs only with `enable_llm_judge` (and then needs
    `judge_model_server`), for turns whose keystrokes missed the threshold or when string similarity is off."""

    judge_system_message: str | None = None
    judge_prompt_template_fpath: str = "prompt_templates/terminus_prompt.txt"
    judge_equal_label: str = Field(default="[[A=B]]", min_length=1)
    judge_not_equal_label: str = Field(default="[[A!=B]]", min_length=1)
    check_twice_swap: bool = False
    reward_if_swap_fails: float = 0.0
    enable_string_similarity: bool = True
    string_similarity_threshold: float | None = Field(default=None, ge=0, le=1)
    enable_llm_judge: bool = False

    @model_validator(mode="after")
    def _some_command_check(self) -> TerminusJudgeConfig:
        if self.enable_llm_judge and self.judge_model_server is None:
            raise ValueError("enable_llm_judge needs judge_model_server")
        if not self.enable_string_similarity and not self.enable_llm_judge:
            raise ValueError(
                "enable_string_similarity: false leaves the commands unchecked without enable_llm_judge"
            )
        return self


def load_template(fpath: str) -> str:
    """The judge prompt (a relative path is from this folder), checked to fill with its two fields."""
    path = Path(fpath) if Path(fpath).is_absolute() else Path(__file__).resolve().parent / fpath
    try:
        template = path.read_text(encoding="utf-8").strip()
        template.format(expected_answer="", generated_answer="")
    except OSError as error:
        raise ConfigError(f"judge_prompt_template_fpath: cannot read {path} ({error.strerror})") from None
    except (KeyError, IndexError, ValueError) as error:
        raise ConfigError(
            f"judge_prompt_template_fpath: {path} must use only {{expected_answer}} and {{generated_answer}} "
            f"(literal braces doubled): {error!r}"
        ) from None
    return template


class TerminusJudgeVerifyRequest(BaseVerifyRequest):
    """`expected_answer` (or `metadata.expected_answer`) is the demonstrated turn as JSON text;
    `metadata.harness` names its format; `threshold` overrides the config's similarity threshold."""

    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str | None = None
    metadata: dict[str, Any] | None = None
    threshold: float | None = Field(default=None, ge=0, le=1)

    @model_validator(mode="after")
    def _gradable_row(self) -> TerminusJudgeVerifyRequest:
        if not isinstance(self.expected_turn(), dict):
            raise ValueError("expected_answer (or metadata.expected_answer) must be a JSON object as text")
        if not isinstance(self.harness(), str) or self.harness() not in HARNESSES:
            raise ValueError(f"metadata.harness must be one of {sorted(HARNESSES)}")
        return self

    def expected_text(self) -> str:
        if self.expected_answer:
            return self.expected_answer
        found = (self.metadata or {}).get("expected_answer")
        return "" if found is None else str(found)

    def expected_turn(self) -> Any:
        try:
            return json.loads(self.expected_text())
        except (ValueError, RecursionError):
            return None

    def harness(self) -> Any:
        return (self.metadata or {}).get("harness")


class TerminusJudgeVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str
    model_output: str
    parsed_output: dict[str, Any] | None = None
    similarity_score: float = -1.0
    schema_check_passed: bool = False
    schema_problem: str | None = None
    task_complete_check_passed: bool = False
    string_similarity_passed: bool = False
    judge_passed: bool = False
    judge_evaluations: list[dict[str, Any]] = Field(default_factory=list)
    judge_failure: JudgeFailure | None = None
    metadata: dict[str, Any] | None = None
    threshold: float | None = None


RESULT_FIELDS = frozenset(TerminusJudgeVerifyResponse.model_fields)


class TerminusJudgeResourcesServer(SimpleResourcesServer):
    config: TerminusJudgeConfig
    _judge: PromptJudge | None = PrivateAttr(default=None)
    _template: str = PrivateAttr(default="")
    pass_at_k = PassAtK()
    key_metric_patterns = (
        "mean/reward",
        "mean/similarity_score",
        "pass@1[avg-of-{k}]/*",
        "pass@{k}/*",
        "failure/*",
    )

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        if self.config.enable_llm_judge:
            self._template = load_template(self.config.judge_prompt_template_fpath)
            self._judge = PromptJudge.of(self)
        return app

    async def verify(self, body: TerminusJudgeVerifyRequest) -> TerminusJudgeVerifyResponse:
        threshold = body.threshold if body.threshold is not None else self.config.string_similarity_threshold
        if not self.config.enable_string_similarity:
            threshold = None
        elif threshold is None:
            # Checked per row: NeMo Gym's rows may carry their own threshold and its configs none.
            raise GymError(422, "invalid_row", "threshold: the row has none and the config sets none")
        text = turn_text(last_assistant_text(body.response))
        grade = await run_cpu_bound(
            grade_turn,
            text,
            body.expected_turn(),
            body.harness(),
            threshold,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=TurnGrade(failure_reason=FailureCode.UNKNOWN_ERROR),
        )
        extras = {key: value for key, value in (body.model_extra or {}).items() if key not in RESULT_FIELDS}
        answer = TerminusJudgeVerifyResponse(
            **extras,
            responses_create_params=body.responses_create_params,
            response=body.response,
            uuid=body.uuid,
            metadata=body.metadata,
            threshold=body.threshold,
            expected_answer=body.expected_text(),
            model_output=text,
            reward=grade.reward,
            parsed_output=grade.parsed_output,
            similarity_score=grade.similarity_score,
            schema_check_passed=grade.schema_check_passed,
            schema_problem=grade.schema_problem,
            task_complete_check_passed=grade.task_complete_check_passed,
            string_similarity_passed=grade.string_similarity_passed,
        )
        answer.failure_reason = grade.failure_reason.value
        if grade.failure_reason is FailureCode.UNKNOWN_ERROR:
            answer.mask_sample, answer.failure_kind = True, VERIFIER_ERROR
        elif grade.failure_reason is FailureCode.COMMAND_CORRECTNESS_FAILED and self._judge is not None:
            await self._judge_commands(answer, body.expected_text(), text)
        return answer

    async def _judge_commands(self, answer: TerminusJudgeVerifyResponse, expected: str, text: str) -> None:
        """The judge's verdict on keystrokes that missed the threshold (both orders with
        `check_twice_swap`), written into `answer`. A judgment that cannot be had masks the sample."""
        config = self.config
        try:
            if await self._equal(expected, text, answer):
                if not config.check_twice_swap or await self._equal(text, expected, answer):
                    answer.judge_passed, answer.reward = True, 1.0
                    answer.failure_reason = FailureCode.NONE.value
                    return
                answer.reward = config.reward_if_swap_fails
            answer.failure_reason = FailureCode.JUDGE_EVALUATION_FAILED.value
        except JudgeFailed as failed:
            answer.reward, answer.judge_failure = config.judge_failure_reward, failed.failure
            answer.mask_sample, answer.failure_kind = True, JUDGE_FAILED
            answer.failure_reason = FailureCode.JUDGE_EVALUATION_FAILED.value

    async def _equal(self, expected: str, generated: str, answer: TerminusJudgeVerifyResponse) -> bool:
        """One judge call, recorded in `answer.judge_evaluations`; True on the equal label (the first
        label in the judge's last text wins)."""
        assert self._judge is not None
        labels = (self.config.judge_equal_label, self.config.judge_not_equal_label)
        judgment = await self._judge.ask(
            self._template.format(expected_answer=expected, generated_answer=generated),
            lambda text: first_label(text, labels),
            system=self.config.judge_system_message,
        )
        answer.judge_evaluations.append(
            {**judgment.evaluation.model_dump(mode="json"), "verdict_label": judgment.verdict}
        )
        return judgment.verdict == self.config.judge_equal_label

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k over the reward, and the share of rollouts stopped at each check (`failure/<code>`)."""
        rollouts = [rollout for task in tasks for rollout in task]
        known = {code.value for code in FailureCode}
        counts = Counter(r.get("failure_reason") for r in rollouts if r.get("failure_reason") in known)
        shares = {f"failure/{code}": count / len(rollouts) for code, count in sorted(counts.items())}
        return {**super().compute_metrics(tasks), **shares, **judge_failure_metrics(tasks)}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        headline = super().get_key_metrics(agent_metrics)
        if self._judge is not None and JUDGE_FAILURE_RATE_KEY in agent_metrics:
            headline[JUDGE_FAILURE_RATE_KEY] = agent_metrics[JUDGE_FAILURE_RATE_KEY]
        return headline


if __name__ == "__main__":
    TerminusJudgeResourcesServer.run_webserver()
