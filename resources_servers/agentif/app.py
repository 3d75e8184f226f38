"""agentif: AgentIF agentic instruction following. Each task carries its constraints, and each constraint a
short pipeline of steps: `llm` (an LLM judge answers YES/NO, or rewrites the text a later step checks),
`llm_conditional_check` (the judge says whether the constraint applies at all) and `code` (the row's
`check_following(response)` Python checker).

The row's checker code is run only in the sandbox (nemo_gym.sandbox: no network, limits, throwaway dir),
never in this process. Reward is ISR: 1.0 when every scored constraint of the row passed. A judgment that
fails, or a judge answer without YES/NO, is reported in `judge_failure`, never counted as a NO.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.sandbox import SandboxLimits, SandboxSlots
from resources_servers.agentif.agentif_grading import (
    agentif_metrics,
    fill_prompt,
    parse_yes_no,
    run_checker,
    tally,
    without_reasoning,
)


class AgentIFConfig(JudgedEnvConfig):
    checker_processes: int = Field(default=4, ge=1, description="code checkers (sandboxes) at once")
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(wall_seconds=10, cpu_seconds=5, memory_mb=1024),
        description="isolation and limits of one code checker run",
    )


class Step(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["llm", "llm_conditional_check", "code"]
    exec: str = ""


class Constraint(BaseModel):
    model_config = ConfigDict(extra="allow")

    desc: str | None = None
    dimension: str | None = None
    type: str | list[str] | None = None
    evaluation: list[Step] = []


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    query_id: int | str | None = None
    turn_id: int | str | None = None
    constraints: list[Constraint] = Field(min_length=1)


class AgentIFVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    verifier_metadata: VerifierMetadata


class ConstraintResult(BaseModel):
    verdict: bool | None  # None: unscored (the condition did not apply, or the checker could not say)
    reason: str | None = None


class AgentIFVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    n_true: int = 0
    n_false: int = 0
    n_null: int = 0
    isr_pass: int = 0
    isr_counted: int = 0
    by_dimension: dict[str, dict[str, int]] = {}
    by_type: dict[str, dict[str, int]] = {}
    query_id: int | str | None = None
    turn_id: int | str | None = None
    empty_response: bool = False
    constraint_results: list[ConstraintResult] = []
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None


GRADING_FIELDS = set(AgentIFVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


class AgentIFResourcesServer(JudgedResourcesServer):
    config: AgentIFConfig
    _sandbox: SandboxSlots = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.checker_processes)

    async def _ask(self, prompt: str, evaluations: list[JudgeEvaluation]) -> str:
        judgment = await self._judge.ask(prompt, parse_yes_no, missing="has no YES or NO")
        evaluations.append(judgment.evaluation)
        return judgment.text

    async def _score(
        self, constraint: Constraint, answer: str, evaluations: list[JudgeEvaluation]
    ) -> ConstraintResult:
        """Run the steps in order on a working value that starts as the answer; raises JudgeFailed."""
        working: str | bool = answer
        for step in constraint.evaluation:
            if not isinstance(working, str):
                return ConstraintResult(
                    verdict=None, reason=f"a {step.type} step follows a checker's verdict"
                )
            if step.type == "llm_conditional_check":
                if not parse_yes_no(await self._ask(fill_prompt(step.exec, working), evaluations)):
                    return ConstraintResult(verdict=None, reason="the condition does not apply")
            elif step.type == "llm":
                working = without_reasoning(await self._ask(fill_prompt(step.exec, working), evaluations))
            else:
                verdict, problem = await run_checker(step.exec, working, self._sandbox)
                if verdict is None:
                    return ConstraintResult(verdict=None, reason=problem)
                working = verdict
        if isinstance(working, bool):
            return ConstraintResult(verdict=working)
        verdict = parse_yes_no(working)
        if verdict is None:
            return ConstraintResult(verdict=None, reason="the last step left no YES/NO verdict")
        return ConstraintResult(verdict=verdict)

    async def verify(self, body: AgentIFVerifyRequest) -> AgentIFVerifyResponse:
        """ISR as the reward; no answer text fails every constraint without a judge call or checker run."""
        meta = body.verifier_metadata
        answer = without_reasoning(last_assistant_text(body.response))
        graded = {
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            "query_id": meta.query_id,
            "turn_id": meta.turn_id,
        }
        evaluations: list[JudgeEvaluation] = []
        if not answer:
            results = [ConstraintResult(verdict=False, reason="no answer text") for _ in meta.constraints]
        else:
            results = []
            for constraint in meta.constraints:
                try:
                    results.append(await self._score(constraint, answer, evaluations))
                except JudgeFailed as failed:
                    return AgentIFVerifyResponse(
                        **graded,
                        **self._judge.failure_fields(failed),
                        judge_evaluations=evaluations,
                    )
        by_dimension: dict[str, dict[str, int]] = {}
        by_type: dict[str, dict[str, int]] = {}
        for constraint, result in zip(meta.constraints, results, strict=True):
            if result.verdict is not None:
                tally(constraint.model_dump(), result.verdict, by_dimension, by_type)
        n_true = sum(result.verdict is True for result in results)
        n_false = sum(result.verdict is False for result in results)
        isr_pass = int(n_true + n_false > 0 and n_false == 0)
        return AgentIFVerifyResponse(
            **graded,
            reward=float(isr_pass),
            n_true=n_true,
            n_false=n_false,
            n_null=len(results) - n_true - n_false,
            isr_pass=isr_pass,
            isr_counted=int(n_true + n_false > 0),
            by_dimension=by_dimension,
            by_type=by_type,
            empty_response=not answer,
            constraint_results=results,
            judge_evaluations=evaluations,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return agentif_metrics(tasks)

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        keys = ("isr", "csr", "mean_reward", JUDGE_FAILURE_RATE_KEY)
        return {key: agent_metrics[key] for key in keys if key in agent_metrics}


if __name__ == "__main__":
    AgentIFResourcesServer.run_webserver()
