"""equivalence_llm_judge: an LLM judge decides whether the model's answer is equivalent to `expected_answer`.

One judge call per rollout, plus an optional second one: the same comparison with the two answers swapped
(`check_twice_swap`), or, when the row's own regex extracted the answer and the judge said "not equal",
the comparison on the whole generation (`check_full_generation_on_fail`). Judge calls go through
`nemo_gym.judge`: a judgment that fails is reported in `judge_failure`, never passed off as a wrong answer.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import (
    JudgedEnvConfig,
    JudgedResourcesServer,
    final_item_text,
    first_label,
)
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.reward_profile import compute_pass_majority_metrics, default_key_metrics
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.equivalence_llm_judge.equivalence_judging import (
    extract_with_regexes,
    last_user_text,
    load_template,
)

FOLDER = Path(__file__).resolve().parent


class EquivalenceLLMJudgeConfig(JudgedEnvConfig):
    # The base `grading_timeout_s` (10 s) bounds the answer extraction (regexes run in the CPU pool).
    OLD_KEY_NAMES: ClassVar[dict[str, str]] = {"extraction_timeout_s": "grading_timeout_s"}
    judge_system_message: str | None = None
    judge_prompt_template_fpath: str = "prompt_templates/equivalence_llm_judge.txt"
    judge_equal_label: str = Field(default="[[A=B]]", min_length=1)
    judge_not_equal_label: str = Field(default="[[A!=B]]", min_length=1)
    question_extract_regex: str | None = None
    response_extract_regex: str | None = None
    msg_extraction_failure: str = "[NO VALID ANSWER EXTRACTED]"
    check_twice_swap: bool = False
    reward_if_swap_fails: float = 0.0
    use_per_record_regex: bool = True
    extraction_length_threshold: int | None = Field(default=120, ge=0)
    check_full_generation_on_fail: bool = True
    reward_if_full_generation_succeeds: float = 0.5

    @field_validator("question_extract_regex", "response_extract_regex")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"not a valid regular expression ({error})") from None
        return pattern


class EquivalenceLLMJudgeVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    uuid: str | int | None = None
    expected_answer: str | None = None
    options: list[dict[str, str]] | None = None
    metadata: dict[str, Any] | None = None
    template_metadata: dict[str, Any] | None = None


class LabelledJudgeEvaluation(JudgeEvaluation):
    verdict_label: str | None = None


class EquivalenceLLMJudgeVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    judge_evaluations: list[LabelledJudgeEvaluation]
    judge_failure: JudgeFailure | None = None


class EquivalenceLLMJudgeResourcesServer(JudgedResourcesServer):
    config: EquivalenceLLMJudgeConfig
    _template: str = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._template = load_template(FOLDER, self.config.judge_prompt_template_fpath)
        return app

    async def verify(self, body: EquivalenceLLMJudgeVerifyRequest) -> EquivalenceLLMJudgeVerifyResponse:
        fallback = (body.metadata or {}).get("expected_answer")
        expected = body.expected_answer or ("" if fallback is None else str(fallback))
        row_regex = self._row_regex(body)
        too_long = row_regex is not None and self._too_long(expected)
        full = last_assistant_text(body.response)
        regex = None if too_long else row_regex or self.config.response_extract_regex
        evaluations: list[LabelledJudgeEvaluation] = []

        def answer(
            reward: float, judge_failure: JudgeFailure | None = None
        ) -> EquivalenceLLMJudgeVerifyResponse:
            return EquivalenceLLMJudgeVerifyResponse(
                responses_create_params=body.responses_create_params,
                response=body.response,
                reward=reward,
                expected_answer=expected,
                judge_evaluations=evaluations,
                judge_failure=judge_failure,
            )

        extracted = await self._extract(body, full, regex)
        if extracted is None:  # the extraction ran past its deadline
            return answer(0.0)
        question, generated = extracted
        config = self.config
        try:
            if not await self._equal(question, expected, generated, evaluations):
                rescue = row_regex is not None and not too_long and config.check_full_generation_on_fail
                if rescue and await self._equal(
                    question, expected, full or config.msg_extraction_failure, evaluations
                ):
                    return answer(config.reward_if_full_generation_succeeds)
                return answer(0.0)
            if config.check_twice_swap and not too_long:
                swapped_equal = await self._equal(question, generated, expected, evaluations)
                return answer(1.0 if swapped_equal else config.reward_if_swap_fails)
            return answer(1.0)
        except JudgeFailed as failed:
            return answer(**self._judge.failure_fields(failed))

    def _row_regex(self, body: EquivalenceLLMJudgeVerifyRequest) -> str | None:
        pattern = (body.template_metadata or {}).get("output_regex")
        return pattern if self.config.use_per_record_regex and isinstance(pattern, str) and pattern else None

    def _too_long(self, expected: str) -> bool:
        threshold = self.config.extraction_length_threshold
        return threshold is not None and len(expected) > threshold

    async def _extract(
        self, body: EquivalenceLLMJudgeVerifyRequest, full: str, regex: str | None
    ) -> tuple[str, str] | None:
        """(question, answer to judge); regexes run in the CPU pool, the rest is cheap enough to run here.
        None when the regexes run past their deadline."""
        question = last_user_text(body.responses_create_params)
        if not full:
            return question, self.config.msg_extraction_failure
        question_regex = self.config.question_extract_regex
        if not question_regex and not regex:
            return question, full
        return await run_cpu_bound(
            extract_with_regexes,
            question,
            question_regex,
            full,
            regex,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )

    async def _equal(
        self, question: str, expected: str, generated: str, evaluations: list[LabelledJudgeEvaluation]
    ) -> bool:
        """One judge call; its evaluation is appended to `evaluations`."""
        prompt = self._template.format(
            question=question, expected_answer=expected, generated_answer=generated
        )
        judgment = await self._judge.ask(prompt, system=self.config.judge_system_message)
        evaluation = judgment.evaluation
        labels = (self.config.judge_equal_label, self.config.judge_not_equal_label)
        label = first_label(final_item_text(evaluation.response), labels)
        evaluations.append(LabelledJudgeEvaluation(**dict(evaluation), verdict_label=label))
        return label == self.config.judge_equal_label

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return compute_pass_majority_metrics(tasks)[0]

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        failure_rate = {key: agent_metrics[key] for key in (JUDGE_FAILURE_RATE_KEY,) if key in agent_metrics}
        return {**default_key_metrics(agent_metrics), **failure_rate}


if __name__ == "__main__":
    EquivalenceLLMJudgeResourcesServer.run_webserver()
