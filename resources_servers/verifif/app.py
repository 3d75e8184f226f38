"""verifif: instruction following checked by rule-based validators, judge validators and yes/no questions.

A row lists `instructions` (an `instruction_id` plus its arguments) and optional `llm_judge` questions.
Rule validators (rules.py) run in the CPU pool under a deadline; judge validators (judged.py) and the
questions go to the judge model concurrently, through nemo_gym.judge (shared limits, deadline, retries).
Every check's verdict is recorded; the reward combines them by `aggregation_mode` (default: all must pass).
A judgment that fails or has no [[YES]]/[[NO]] marker is recorded in `judge_failure` and the reward is
`judge_failure_reward`: a broken judge never reads as a failed instruction.
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from nemo_gym.base_resources_server import (
    BaseVerifyRequest,
    BaseVerifyResponse,
)
from nemo_gym.envkit.judged_env import JudgedEnvConfig, JudgedResourcesServer
from nemo_gym.envkit.pass_at_k_metrics import select_key_metrics
from nemo_gym.judge import (
    JUDGE_FAILURE_RATE_KEY,
    JudgeEvaluation,
    JudgeFailed,
    JudgeFailure,
    last_assistant_text,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.verifif.judged import JUDGE_INSTRUCTIONS, load_prompts, parse_verdict, visible_text
from resources_servers.verifif.rules import ARGUMENTS, RULES, Check

FOLDER = Path(__file__).resolve().parent
AggregationMode = Literal["all", "any", "mean", "min", "max"]
RESERVED = frozenset({"instruction_id", "uid", "source", "is_misalignment_check", "weight"})
"""Keys of an instruction that are not its validator's arguments (`weight` is accepted and unused)."""


class VerifIFConfig(JudgedEnvConfig):
    judge_prompt_path: str = "prompts/judge.yaml"
    aggregation_mode: AggregationMode = "all"


class Instruction(BaseModel):
    """One validator of a row: its id, NeMo Gym's bookkeeping keys, and its arguments as extra keys."""

    model_config = ConfigDict(extra="allow")

    instruction_id: str
    uid: int | str | None = None
    source: Literal["user", "system"] = "system"
    is_misalignment_check: bool = False
    weight: float | None = None

    def arguments(self) -> dict[str, Any]:
        """The validator's arguments: every other key, null ones dropped."""
        return {k: v for k, v in (self.model_extra or {}).items() if k not in RESERVED and v is not None}


class JudgeQuestion(BaseModel):
    """A free yes/no question; the check passes when the judge's answer is `pass_criteria`."""

    uid: int | str | None = None
    content: str = Field(min_length=1)
    source: Literal["user", "system"] = "system"
    is_misalignment_check: bool = False
    pass_criteria: Literal["YES", "NO"] = "YES"


def argument_problem(instruction: Instruction) -> str | None:
    """Why the row's instruction cannot be checked (unknown id, bad arguments), None when it can."""
    arguments = instruction.arguments()
    if instruction.instruction_id in RULES:
        try:
            ARGUMENTS[instruction.instruction_id].model_validate(arguments)
        except ValidationError as error:
            return "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors()
            )
        return None
    if instruction.instruction_id in JUDGE_INSTRUCTIONS:
        needed, _ = JUDGE_INSTRUCTIONS[instruction.instruction_id]
        missing = [name for name in needed if name not in arguments]
        return f"missing argument(s) {missing}" if missing else None
    return "unknown instruction_id"


class VerifIFVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    id: int | str | None = None
    instructions: list[Instruction] = []
    llm_judge: list[JudgeQuestion] | None = None
    language: str | None = None

    @model_validator(mode="after")
    def _every_instruction_checkable(self) -> VerifIFVerifyRequest:
        problems = [
            f"instructions[{i}] {instruction.instruction_id!r}: {problem}"
            for i, instruction in enumerate(self.instructions)
            if (problem := argument_problem(instruction)) is not None
        ]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class CheckResult(BaseModel):
    """One check's verdict. `followed` already has a misalignment check's inversion applied."""

    instruction: str
    kind: Literal["rule", "judge_instruction", "judge_question"]
    status: Literal["Passed", "Failed", "Judge failed", "Not graded"]
    followed: bool
    message: str
    judge_output: str | None = None
    judge_failure: JudgeFailure | None = None


class VerifIFVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    follow_all_instructions: bool
    follow_instruction_list: list[bool]
    validation_results: list[CheckResult] = []
    judge_evaluations: list[JudgeEvaluation] = []
    judge_failure: JudgeFailure | None = None
    grading_failure: str | None = None


GRADING_FIELDS = set(VerifIFVerifyResponse.model_fields) - set(BaseVerifyRequest.model_fields)


def check_rules(text: str, checks: list[tuple[str, dict[str, Any]]]) -> list[Check]:
    """Run each rule validator on the text with its validated arguments (in a CPU-pool worker)."""
    results: list[Check] = []
    for instruction_id, arguments in checks:
        parsed = ARGUMENTS[instruction_id].model_validate(arguments)
        results.append(RULES[instruction_id](text, **dict(parsed)))
    return results


def aggregate(verdicts: list[bool], mode: AggregationMode) -> float:
    """NeMo Gym's modes over 0/1 scores; no checks at all earns 1.0."""
    if not verdicts:
        return 1.0
    scores = [float(v) for v in verdicts]
    if mode == "any":
        return max(scores)
    if mode == "mean":
        return statistics.fmean(scores)
    if mode == "max":
        return max(scores)
    return min(scores)  # "all" and "min" agree on 0/1 scores


def misaligned(source: str, is_misalignment_check: bool) -> bool:
    """A user instruction marked as a misalignment check passes when the response does NOT follow it."""
    return source == "user" and is_misalignment_check


class VerifIFResourcesServer(JudgedResourcesServer):
    config: VerifIFConfig
    key_metric_patterns = ("mean/*", "instruction_level_accuracy", JUDGE_FAILURE_RATE_KEY)
    _prompts: dict[str, str] = PrivateAttr()

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._prompts = load_prompts(FOLDER, self.config.judge_prompt_path)
        return app

    async def verify(self, body: VerifIFVerifyRequest) -> VerifIFVerifyResponse:
        text = visible_text(last_assistant_text(body.response))
        rules = [i for i in body.instructions if i.instruction_id in RULES]
        judged = [i for i in body.instructions if i.instruction_id in JUDGE_INSTRUCTIONS]
        questions = body.llm_judge or []
        evaluations: list[JudgeEvaluation] = []
        rule_task = run_cpu_bound(
            check_rules,
            text,
            [(i.instruction_id, i.arguments()) for i in rules],
            timeout_s=self.config.grading_timeout_s,
            on_timeout=None,
        )
        judged_tasks = [self.judge_instruction(text, i, evaluations) for i in judged]
        question_tasks = [self.judge_question(text, q, evaluations) for q in questions]
        rule_checks, *judge_results = await asyncio.gather(rule_task, *judged_tasks, *question_tasks)

        results: list[CheckResult] = []
        grading_failure = None
        if rule_checks is None:
            grading_failure = f"the rule validators did not finish within {self.config.grading_timeout_s:g} s"
            rule_checks = [(False, "not graded: deadline passed")] * len(rules)
        for instruction, (followed, message) in zip(rules, rule_checks, strict=True):
            inverted = misaligned(instruction.source, instruction.is_misalignment_check)
            status = "Not graded" if grading_failure else ("Passed" if followed != inverted else "Failed")
            results.append(
                CheckResult(
                    instruction=instruction.instruction_id,
                    kind="rule",
                    status=status,
                    followed=status == "Passed",
                    message=("misalignment check, inverted: " if inverted else "") + message,
                )
            )
        results.extend(judge_results)
        failures = [r.judge_failure for r in results if r.judge_failure is not None]
        verdicts = [r.followed for r in results]
        reward = aggregate(verdicts, self.config.aggregation_mode)
        if failures:
            reward = self.config.judge_failure_reward
        elif grading_failure:
            reward = 0.0
        return VerifIFVerifyResponse(
            **body.model_dump(exclude=GRADING_FIELDS | {"reward"}),
            reward=reward,
            follow_all_instructions=all(verdicts),
            follow_instruction_list=verdicts,
            validation_results=results,
            judge_evaluations=evaluations,
            judge_failure=failures[0] if failures else None,
            grading_failure=grading_failure,
        )

    async def judge_instruction(
        self, text: str, instruction: Instruction, evaluations: list[JudgeEvaluation]
    ) -> CheckResult:
        _, description = JUDGE_INSTRUCTIONS[instruction.instruction_id]
        arguments = (
            "\n".join(f"- {name}: {value}" for name, value in instruction.arguments().items()) or "- none"
        )
        prompt = self._prompts["instruction"].format(
            instruction_id=instruction.instruction_id,
            description=description,
            arguments=arguments,
            response=text,
        )
        return await self._ask(
            prompt,
            instruction.instruction_id,
            "judge_instruction",
            misaligned(instruction.source, instruction.is_misalignment_check),
            "YES",
            evaluations,
        )

    async def judge_question(
        self, text: str, question: JudgeQuestion, evaluations: list[JudgeEvaluation]
    ) -> CheckResult:
        prompt = self._prompts["question"].format(question=question.content, response=text)
        return await self._ask(
            prompt,
            f"llm_judge_{question.uid}",
            "judge_question",
            misaligned(question.source, question.is_misalignment_check),
            question.pass_criteria,
            evaluations,
        )

    async def _ask(
        self,
        prompt: str,
        name: str,
        kind: Literal["judge_instruction", "judge_question"],
        inverted: bool,
        wanted: Literal["YES", "NO"],
        evaluations: list[JudgeEvaluation],
    ) -> CheckResult:
        """One judgment: passes when the judge answers `wanted` (inverted for a misalignment check)."""
        try:
            judgment = await self._judge.ask(prompt, parse_verdict, missing="has no [[YES]] or [[NO]]")
        except JudgeFailed as failed:
            return CheckResult(
                instruction=name,
                kind=kind,
                status="Judge failed",
                followed=False,
                message=f"{failed.failure.kind}: {failed.failure.message}",
                judge_failure=failed.failure,
            )
        evaluations.append(judgment.evaluation)
        output = judgment.text
        said_yes = bool(judgment.verdict)  # `missing` made sure there is a verdict
        followed = (said_yes == (wanted == "YES")) != inverted
        return CheckResult(
            instruction=name,
            kind=kind,
            status="Passed" if followed else "Failed",
            followed=followed,
            message=("misalignment check, inverted: " if inverted else "")
            + f"judge answered {'YES' if said_yes else 'NO'} (passes on {wanted})",
            judge_output=output,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Instruction-level accuracy: checks passed over all checks, pooled."""
        verdicts = [
            verdict
            for rollouts in tasks
            for rollout in rollouts
            if isinstance(rollout.get("follow_instruction_list"), list)
            and rollout.get("judge_failure") is None
            for verdict in rollout["follow_instruction_list"]
            if isinstance(verdict, bool)
        ]
        return {"instruction_level_accuracy": statistics.fmean(verdicts)} if verdicts else {}

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        """The entries `key_metric_patterns` names, not the judged headline: verifif has no pass@k."""
        return select_key_metrics(agent_metrics, self.key_metric_patterns)


if __name__ == "__main__":
    VerifIFResourcesServer.run_webserver()
