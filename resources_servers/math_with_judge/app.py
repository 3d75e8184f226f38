"""math_with_judge: reward a math answer by symbolic equivalence (math-verify), optionally rescued by an LLM judge.

The symbolic check runs in the CPU worker pool, never on the event loop, so a slow sympy simplification
cannot stall the server's other requests; past its deadline it scores 0.0. When the check fails and the
judge is enabled, the judge model compares the expected and generated answers twice, the second time
with the two answers swapped, and the reward is 1.0 only if both comparisons say "equal". Judge calls go
through `nemo_gym.judge`: a judgment that fails is reported in `judge_failure`, not scored as wrong.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.cpu_pool import run_cpu_bound
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    Judge,
    JudgeConfig,
    JudgeFailed,
    JudgeFailure,
    judge_failure_metrics,
)
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming, assistant_texts
from nemo_gym.pass_at_k_metrics import TOKEN_MEANS, pass_at_k_key_metrics
from nemo_gym.reward_profile import compute_pass_majority_metrics, is_metric
from resources_servers.math_with_judge.grading import Grade, grade

logger = logging.getLogger("math_with_judge")

EQUAL_LABEL = "[[A=B]]"
NOT_EQUAL_LABEL = "[[A!=B]]"

JUDGE_SYSTEM_PROMPT = f"""You compare two answers to the same math problem, written by assistant A and \
assistant B, and decide whether they are mathematically equivalent.

Judge only the mathematical content: the same value written differently (fractions versus decimals, \
factored versus expanded, a different variable order in a set) counts as equivalent. Ignore formatting \
requirements of the problem, wording, units written out or omitted, and any working shown around the answer.

When you have decided, write exactly one of these labels as your final verdict:

1. The answers are equivalent: {EQUAL_LABEL}
2. The answers are not equivalent: {NOT_EQUAL_LABEL}

For example: "Final verdict: not equivalent {NOT_EQUAL_LABEL}"."""

JUDGE_USER_TEMPLATE = """<|Problem|>
{question}

<|Start of Assistant A's Answer|>
{first_answer}
<|End of Assistant A's Answer|>

<|Start of Assistant B's Answer|>
{second_answer}
<|End of Assistant B's Answer|>"""


class MathWithJudgeConfig(JudgeConfig, BaseResourcesServerConfig):
    """The judge settings (`judge_model_server`, ...) come from `JudgeConfig`; the judge is asked only when
    the symbolic check fails and `should_use_judge` is true."""

    should_use_judge: bool = False
    library_verifier_timeout_seconds: float = Field(default=10.0, gt=0)
    library_verifier_max_concurrency: int = Field(default=32, ge=1)

    @model_validator(mode="after")
    def _judge_needs_a_model(self) -> MathWithJudgeConfig:
        if self.should_use_judge and self.judge_model_server is None:
            raise ValueError("should_use_judge is true but judge_model_server is not set")
        return self


class MathVerifyRequest(BaseVerifyRequest):
    question: str
    expected_answer: str


class JudgeEvaluation(BaseModel):
    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    response: NeMoGymResponse


class MathVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None
    library_reward: float
    judge_evaluations: list[JudgeEvaluation] | None
    judge_failure: JudgeFailure | None = None


def judge_says_equal(response: NeMoGymResponse) -> bool:
    """The label that comes first in the last text of the final message; no message or no label: not equal."""
    texts = assistant_texts(response.output[-1]) if response.output else []
    if not texts:
        return False
    verdict = texts[-1]
    equal_at, not_equal_at = verdict.find(EQUAL_LABEL), verdict.find(NOT_EQUAL_LABEL)
    if equal_at < 0:
        return False
    return not_equal_at < 0 or equal_at < not_equal_at


async def judge_equal(
    judge: Judge, question: str, expected_answer: str, generated: str, evaluations: list[JudgeEvaluation]
) -> float:
    """Expected as A and generated as B; only if that is judged equal, again with the two swapped. Each call
    is appended to `evaluations` (raises `JudgeFailed`, keeping the evaluations made before)."""
    for first, second in ((expected_answer, generated), (generated, expected_answer)):
        prompt = JUDGE_USER_TEMPLATE.format(question=question, first_answer=first, second_answer=second)
        messages = [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        params = judge.params_for(messages)
        response = await judge.ask(params)
        evaluations.append(JudgeEvaluation(responses_create_params=params, response=response))
        if not judge_says_equal(response):
            return 0.0
    return 1.0


class MathWithJudgeResourcesServer(SimpleResourcesServer):
    config: MathWithJudgeConfig
    _grading_slots: asyncio.Semaphore = PrivateAttr()
    _judge: Judge | None = PrivateAttr(default=None)

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._grading_slots = asyncio.Semaphore(self.config.library_verifier_max_concurrency)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        if self.config.should_use_judge:
            self._judge = Judge(self.config, self.server_client, self.config.name)
        return app

    async def verify(self, body: MathVerifyRequest) -> MathVerifyResponse:
        generated = body.response.output_text
        library = await self._library_grade(body.expected_answer, generated)
        reward, evaluations, failure = library.library_reward, None, None
        if self._judge is not None and library.library_reward <= 0.5:
            evaluations = []
            try:
                reward = await judge_equal(
                    self._judge, body.question, body.expected_answer, generated, evaluations
                )
            except JudgeFailed as failed:
                reward, failure = self.config.judge_failure_reward, failed.failure
        return MathVerifyResponse(
            **body.model_dump(exclude={"question"}),
            extracted_answer=library.extracted_answer,
            library_reward=library.library_reward,
            judge_evaluations=evaluations,
            judge_failure=failure,
            reward=reward,
        )

    async def _library_grade(self, expected_answer: str, generated: str) -> Grade:
        deadline_s = self.config.library_verifier_timeout_seconds
        async with self._grading_slots:
            timed_out = Grade(0.0, None, timed_out=True)
            result = await run_cpu_bound(
                grade, expected_answer, generated, timeout_s=deadline_s, on_timeout=timed_out
            )
        if result.timed_out:
            logger.warning("math-verify gave up after %.1f s; the answer scores 0.0", deadline_s)
        return result

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return {
            **compute_pass_majority_metrics(tasks, score_fn=_scores, answer_key="extracted_answer"),
            **judge_failure_metrics(tasks),
        }

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(agent_metrics, leading=(*TOKEN_MEANS, JUDGE_FAILURE_RATE_KEY))


def _scores(rollout: dict[str, Any]) -> dict[str, float]:
    """Symbolic accuracy always (0 when `library_reward` is not a usable number); judge accuracy only for
    rollouts the judge actually judged (not those whose judgment failed)."""
    library_reward = rollout.get("library_reward")
    scores = {"symbolic_accuracy": float(library_reward) if is_metric(library_reward) else 0.0}
    if rollout.get("judge_evaluations") is not None and rollout.get("judge_failure") is None:
        scores["judge_accuracy"] = float(rollout["reward"])
    return scores


if __name__ == "__main__":
    MathWithJudgeResourcesServer.run_webserver()
