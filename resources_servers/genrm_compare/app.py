"""genrm_compare: RLHF rewards from pairwise comparisons by a generative reward model (GenRM).

The rollouts of one prompt form a cohort. Each verify call joins its prompt's cohort and waits (without
polling) until all `num_rollouts_per_prompt` members have arrived; the cohort's pairs are then compared by
the GenRM (`circular` or `all_pairs`, `num_judges_per_comparison` times each), and every member gets its
mean score over the comparisons it took part in (`simple_tiebreaker`). Rewards are relative to the cohort,
so a cohort that misses members at `cohort_deadline_s`, or whose comparisons could not all be read, gives
no rewards: each member is masked with the reason, never scored as if it were bad.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import orjson
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config.jsonl import TASK_INDEX_KEY
from nemo_gym.config_types import ModelServerRef
from nemo_gym.envkit.judged_env import PromptJudge
from nemo_gym.http.client import default_retry_policy
from nemo_gym.http.deadlines import remaining_s
from nemo_gym.judge import (
    JudgeConfig,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.failure_kinds import COHORT_INCOMPLETE, JUDGE_FAILED
from resources_servers.genrm_compare.grading import (
    Verdict,
    comparison_pairs,
    load_prompt,
    parse_verdict,
    simple_tiebreaker,
)

FOLDER = Path(__file__).resolve().parent
NO_ANSWER = "(no answer)"


UNSUPPORTED_WHEN_SET = (
    "use_principle",
    "reasoning_bonus",
    "answer_bonus",
    "group_reasoning_length_penalty_coeff",
    "group_answer_length_penalty_coeff",
    "group_style_penalty_coeff",
)


class GenRMCompareConfig(JudgeConfig, BaseResourcesServerConfig):
    """NeMo Gym's keys (`genrm_*`, cohort and aggregation settings) plus the judge limits of
    `nemo_gym.judge` (`judge_deadline_s`, breaker, ...), which apply to every GenRM call."""

    genrm_model_server: ModelServerRef
    genrm_responses_create_params: NeMoGymResponseCreateParamsNonStreaming = Field(
        default_factory=lambda: NeMoGymResponseCreateParamsNonStreaming(input=[])
    )
    num_rollouts_per_prompt: int = Field(default=16, ge=1)
    comparison_strategy: Literal["circular", "all_pairs"] = "circular"
    num_judges_per_comparison: int = Field(default=1, ge=1)
    aggregator_method: Literal["simple_tiebreaker"] = "simple_tiebreaker"
    default_score: float = 3.0
    default_ranking: float = 3.5
    genrm_parse_retries: int = Field(default=3, ge=0)
    genrm_parse_retry_sleep_s: float = Field(default=0.2, ge=0)
    # null: the deployment's global_http_deadline_s (a rollout's default budget).
    cohort_deadline_s: float | None = Field(default=None, gt=0)
    comparison_prompt_path: str = "prompts/compare.yaml"

    # NeMo Gym keys accepted at their neutral values only (the features behind them are not implemented).
    use_principle: bool = False
    default_principle: str | None = None
    reasoning_bonus: float = 0.0
    answer_bonus: float = 0.0
    top_percentile: float = 0.2
    group_reasoning_length_penalty_coeff: float = 0.0
    group_answer_length_penalty_coeff: float = 0.0
    group_style_penalty_coeff: float = 0.0
    debug_logging: bool = False

    @model_validator(mode="after")
    def _genrm_is_the_judge(self) -> GenRMCompareConfig:
        unsupported = [key for key in UNSUPPORTED_WHEN_SET if getattr(self, key)]
        if unsupported:
            raise ValueError(f"not supported in Gym's genrm_compare (leave unset, false or 0): {unsupported}")
        self.judge_model_server = self.genrm_model_server
        self.judge_responses_create_params = self.genrm_responses_create_params
        return self


class GenRMCompareVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    principle: str | None = None


class PairVerdict(BaseModel):
    """One comparison of the cohort: members `response_i` (shown as response_1) and `response_j`."""

    response_i: int
    response_j: int
    judge_idx: int
    score_1: float
    score_2: float
    ranking: float


class GenRMCompareVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    cohort_size: int = 0
    cohort_member: int | None = None
    comparisons: list[PairVerdict] = []
    tiebreak_usage_rate: float | None = None
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(GenRMCompareVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


@dataclass
class MemberGrade:
    reward: float | None
    comparisons: list[PairVerdict]
    evaluations: list[JudgeEvaluation]
    tiebreak_usage_rate: float | None = None
    failure: JudgeFailure | None = None


@dataclass
class Cohort:
    key: str
    deadline: float
    conversation: str
    answers: list[str] = field(default_factory=list)
    full: asyncio.Event = field(default_factory=asyncio.Event)
    grades: asyncio.Future[list[MemberGrade]] | None = None


def cohort_key(body: GenRMCompareVerifyRequest) -> str:
    """NeMo Gym's cohort identity: the task index the collector stamps (repeats of a row share it) and a
    digest of the prompt and principle, so equal prompt texts of different tasks never mix."""
    params = body.responses_create_params.model_dump(mode="json", exclude_unset=True)
    digest = hashlib.sha256(
        orjson.dumps({"input": params.get("input"), "principle": body.principle}, option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
    task = (body.model_extra or {}).get(TASK_INDEX_KEY)
    return f"task::{task}::{digest}" if task is not None else digest


def conversation_text(body: GenRMCompareVerifyRequest) -> str:
    """The prompt as `role: text` lines (the GenRM is shown text, not structured items)."""
    params = body.responses_create_params.model_dump(mode="json", exclude_unset=True)
    items = params.get("input")
    lines = [f"system: {params['instructions']}"] if params.get("instructions") else []
    if isinstance(items, str):
        return "\n".join([*lines, f"user: {items}"])
    for item in items or []:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, list):
            content = "".join(part.get("text") or "" for part in content if isinstance(part, dict))
        if isinstance(content, str):
            lines.append(f"{item.get('role', 'user')}: {content}")
    return "\n".join(lines)


class GenRMCompareResourcesServer(SimpleResourcesServer):
    config: GenRMCompareConfig
    _judge: PromptJudge = PrivateAttr()
    _prompt: str = PrivateAttr()
    _cohorts: dict[str, Cohort] = PrivateAttr(default_factory=dict)
    _grading: set[asyncio.Task[None]] = PrivateAttr(default_factory=set)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompt = load_prompt(FOLDER, self.config.comparison_prompt_path)
        self._judge = PromptJudge.of(self)
        return app

    async def verify(self, body: GenRMCompareVerifyRequest) -> GenRMCompareVerifyResponse:
        """Join the prompt's cohort, wait for it to fill (until `cohort_deadline_s`, or the caller's own
        deadline if that comes first), answer this member's share of the cohort's comparisons."""
        echoed = body.model_dump(exclude=GRADING_FIELDS | {"reward"})
        size = self.config.num_rollouts_per_prompt
        key = cohort_key(body)
        cohort = self._cohorts.get(key)
        loop = asyncio.get_running_loop()
        cohort_deadline_s = self.config.cohort_deadline_s or default_retry_policy().deadline_s
        if cohort is None:
            cohort = Cohort(key, loop.time() + cohort_deadline_s, conversation_text(body))
            self._cohorts[key] = cohort
        member = len(cohort.answers)
        cohort.answers.append(last_assistant_text(body.response) or NO_ANSWER)
        if len(cohort.answers) == size:
            del self._cohorts[key]
            cohort.full.set()
            cohort.grades = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(self._grade(cohort))
            self._grading.add(task)
            task.add_done_callback(self._grading.discard)
        caller_left = remaining_s()
        waits_until = (
            cohort.deadline if caller_left is None else min(cohort.deadline, loop.time() + caller_left)
        )
        try:
            async with asyncio.timeout_at(waits_until):
                await cohort.full.wait()
        except TimeoutError:
            if self._cohorts.get(key) is cohort and loop.time() >= cohort.deadline:
                del self._cohorts[key]  # a late member starts a new cohort instead of joining a dead one
            reason = (
                f"cohort incomplete: {len(cohort.answers)} of {size} rollouts of this prompt arrived "
                + (
                    f"within cohort_deadline_s={cohort_deadline_s:g}"
                    if waits_until == cohort.deadline
                    else "before the caller's deadline"
                )
            )
            return GenRMCompareVerifyResponse(
                **echoed, reward=self.config.default_score, mask_sample=True,
                failure_kind=COHORT_INCOMPLETE, failure_reason=reason,
                cohort_size=len(cohort.answers), cohort_member=member,
            )  # fmt: skip
        assert cohort.grades is not None
        grade = (await asyncio.shield(cohort.grades))[member]
        if grade.failure is not None:
            return GenRMCompareVerifyResponse(
                **echoed, **self._judge.failure_fields(grade.failure), mask_sample=True,
                failure_kind=JUDGE_FAILED, failure_reason=f"{grade.failure.kind}: {grade.failure.message}",
                cohort_size=size, cohort_member=member,
                comparisons=grade.comparisons, judge_evaluations=grade.evaluations,
            )  # fmt: skip
        return GenRMCompareVerifyResponse(
            **echoed, reward=grade.reward if grade.reward is not None else self.config.default_score,
            cohort_size=size, cohort_member=member, comparisons=grade.comparisons,
            judge_evaluations=grade.evaluations, tiebreak_usage_rate=grade.tiebreak_usage_rate,
        )  # fmt: skip

    async def _grade(self, cohort: Cohort) -> None:
        assert cohort.grades is not None
        try:
            cohort.grades.set_result(await self._compare_all(cohort))
        except BaseException as error:  # never leave the members waiting
            failure = JudgeFailure(
                kind="upstream_error", message=f"grading failed: {error!r}"[:300], attempts=0
            )
            cohort.grades.set_result([MemberGrade(None, [], [], failure=failure) for _ in cohort.answers])
            if not isinstance(error, Exception):
                raise

    async def _compare_all(self, cohort: Cohort) -> list[MemberGrade]:
        size = len(cohort.answers)
        jobs = [
            (first, second, judge)
            for judge in range(self.config.num_judges_per_comparison)
            for first, second in comparison_pairs(self.config.comparison_strategy, size)
        ]
        outcomes = await asyncio.gather(
            *(self._compare(cohort, first, second) for first, second, _ in jobs), return_exceptions=True
        )
        verdicts: list[tuple[int, int, Verdict]] = []
        records: list[PairVerdict] = []
        evaluations: list[list[JudgeEvaluation]] = [[] for _ in range(size)]
        failure: JudgeFailure | None = None
        for (first, second, judge), outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, JudgeFailed):
                failure = failure or outcome.failure
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            verdict, asked = outcome
            verdicts.append((first, second, verdict))
            records.append(
                PairVerdict(
                    response_i=first, response_j=second, judge_idx=judge,
                    score_1=verdict.score_1, score_2=verdict.score_2, ranking=verdict.ranking,
                )
            )  # fmt: skip
            evaluations[first].extend(asked)
            if second != first:
                evaluations[second].extend(asked)
        mine = [[r for r in records if index in (r.response_i, r.response_j)] for index in range(size)]
        if failure is not None:
            return [MemberGrade(None, mine[i], evaluations[i], failure=failure) for i in range(size)]
        rewards, ties = simple_tiebreaker(size, verdicts, self.config.default_score)
        return [MemberGrade(rewards[i], mine[i], evaluations[i], ties) for i in range(size)]

    def _read_verdict(self, text: str) -> Verdict | None:
        return parse_verdict(text, self.config.default_score, self.config.default_ranking)

    async def _compare(
        self, cohort: Cohort, first: int, second: int
    ) -> tuple[Verdict, list[JudgeEvaluation]]:
        """One GenRM comparison; an answer without a verdict is asked again `genrm_parse_retries` times,
        then the comparison fails (`bad_response`) instead of falling back to a neutral score."""
        prompt = self._prompt.format(
            conversation=cohort.conversation,
            response_1=cohort.answers[first],
            response_2=cohort.answers[second],
        )
        asked: list[JudgeEvaluation] = []
        attempts = self.config.genrm_parse_retries + 1
        text = ""
        for attempt in range(attempts):
            if attempt and self.config.genrm_parse_retry_sleep_s:
                await asyncio.sleep(self.config.genrm_parse_retry_sleep_s)
            judgment = await self._judge.ask(prompt, self._read_verdict)
            asked.append(judgment.evaluation)
            text = judgment.text
            if judgment.verdict is not None:
                return judgment.verdict, asked
        message = f"no score_1/score_2/ranking JSON in {attempts} GenRM answer(s); last: {text[:100]!r}"
        raise JudgeFailed(JudgeFailure(kind="bad_response", message=message, attempts=attempts))


if __name__ == "__main__":
    GenRMCompareResourcesServer.run_webserver()
