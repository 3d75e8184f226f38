"""evalplus: HumanEval+/MBPP+-style function completion, graded by running the model's code in the local
sandbox (nemo_gym.sandbox) on the task's base inputs and on its extra "plus" inputs.

Rows point at a problem by `verifier_metadata.task_id`; the problems (prompt, inputs, expected outputs)
are bundled in data/problems.json (made by data/make_problems.py) instead of being downloaded by the
`evalplus` package. A benchmark row carries its problem itself (`verifier_metadata.problem`, see
release.py). Only the inputs enter the sandbox (harness.py); the outputs are compared here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from fastapi import HTTPException
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.reward_profile import compute_pass_majority_metrics, highest_k_metrics
from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxSlots,
)
from nemo_gym.wire.validation_errors import first_problem
from resources_servers.evalplus.grading import PASS, extract_code_strict, grade_group, parse_reports

FOLDER = Path(__file__).parent
HARNESS = (FOLDER / "harness.py").read_bytes()
NAMESPACES = {"humaneval": "HumanEval/", "mbpp": "Mbpp/"}
SCORES = ("passing_base_tests", "passing_plus_tests")
AnyProblem = TypeVar("AnyProblem", bound=BaseModel)


class EvalPlusConfig(BaseResourcesServerConfig):
    dataset: Literal["humaneval", "mbpp"] = "humaneval"
    num_processes: int = Field(default=8, ge=1, description="sandboxes at once")
    min_time_limit: float = Field(default=1.0, gt=0, description="time limit of one call, in seconds")
    gt_time_limit_factor: float = Field(default=4.0, gt=0, description="kept for config compatibility")
    evalplus_version: str = "default"
    problems_path: str = Field(
        default=str(FOLDER / "data" / "problems.json"), description="the problems (see data/make_problems.py)"
    )
    sandbox: SandboxLimits = Field(default_factory=lambda: SandboxLimits(memory_mb=2048, max_processes=4))


class Problem(BaseModel):
    model_config = ConfigDict(extra="allow")

    task_id: str
    entry_point: str
    prompt: str = ""
    base_input: list[list[Any]]
    plus_input: list[list[Any]]
    base_expected: list[Any]
    plus_expected: list[Any]
    atol: float = 1e-6
    argument_shapes: list[dict[str, Any] | None] | None = Field(
        default=None, description="tuples, sets or complex numbers among the arguments (release.py)"
    )


class EvalPlusMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    task_id: str = Field(min_length=1)
    problem: str | None = Field(
        default=None,
        description="the problem itself: the JSON text of a problems-file entry (benchmark rows, release.py)",
    )


class EvalPlusVerifyRequest(BaseVerifyRequest):
    verifier_metadata: EvalPlusMetadata


class EvalPlusVerifyResponse(BaseVerifyResponse):
    extracted_model_output: str | None = None
    extracted_model_code: str | None = None
    base_status: str | None = None
    plus_status: str | None = None
    is_correct: bool = False
    is_correct_plus: bool = False
    metadata: dict[str, Any] | None = None


def read_problems(path: str | Path, prefix: str, model: type[AnyProblem]) -> dict[str, AnyProblem]:
    """The problems in the JSON list at `path` whose task_id starts with `prefix`, by task_id."""
    problems = [model.model_validate(row) for row in json.loads(Path(path).read_text())]
    return {p.task_id: p for p in problems if p.task_id.startswith(prefix)}


def load_problems(path: str | Path, dataset: str) -> dict[str, Problem]:
    """The problems of the configured dataset (its task-id namespace), by task_id."""
    return read_problems(path, NAMESPACES[dataset], Problem)


def problem_for(problems: dict[str, AnyProblem], task_id: str, source: str) -> AnyProblem:
    """The row's problem; a task_id the configured `source` (dataset or split) lacks is the row's fault."""
    problem = problems.get(task_id)
    if problem is None:
        raise HTTPException(
            status_code=422, detail=f"verifier_metadata.task_id: unknown task {task_id!r} for {source}"
        )
    return problem


def inline_problem(text: str, model: type[AnyProblem]) -> AnyProblem:
    """The row's own problem. It is JSON text rather than a nested object because the standard json
    module keeps what the row's JSON would lose: integers beyond 64 bits, NaN and infinities."""
    try:
        return model.model_validate(json.loads(text))
    except ValidationError as error:
        reason = first_problem(error, root="the problem")
    except ValueError as error:
        reason = f"not JSON ({error})"
    raise HTTPException(status_code=422, detail=f"verifier_metadata.problem: {reason}")


async def run_harness(
    code: str, entry_point: str, spec: dict[str, Any], sandbox: SandboxSlots, seconds: float, **limits: Any
) -> tuple[list[dict[str, Any]], str | None]:
    """The harness's reports of one sandboxed run of `code` (the spec: groups of inputs, time limit) within
    `seconds` (and other `limits` over the sandbox's own), and why the run ended early (None when it
    finished)."""
    files = {
        "harness.py": HARNESS,
        "solution.py": code,
        "tests.json": json.dumps({**spec, "entry_point": entry_point}),
    }
    run = await sandbox.run_python("harness.py", files=files, seconds=seconds, **limits)
    return parse_reports(run.stdout), run.early_end()


def key_metrics(agent_metrics: dict[str, Any], score_names: Sequence[str]) -> dict[str, Any]:
    """The token means, then pass@1[avg-of-k], pass@k and majority@k of each score at the highest k."""
    key = {
        name: agent_metrics[name]
        for name in ("mean/input_tokens", "mean/output_tokens")
        if name in agent_metrics
    }
    for family in ("pass@1[avg-of-{k}]", "pass@{k}", "majority@{k}"):
        key.update(highest_k_metrics(agent_metrics, family, score_names=list(score_names)))
    return key


class EvalPlusResourcesServer(SimpleResourcesServer):
    config: EvalPlusConfig
    _sandbox: SandboxSlots = PrivateAttr()
    _problems: dict[str, Problem] = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.num_processes)
        self._problems = load_problems(self.config.problems_path, self.config.dataset)

    async def verify(self, body: EvalPlusVerifyRequest) -> EvalPlusVerifyResponse:
        metadata = body.verifier_metadata
        if metadata.problem is not None:
            problem = inline_problem(metadata.problem, Problem)
        else:
            problem = problem_for(self._problems, metadata.task_id, f"dataset {self.config.dataset!r}")
        text = body.response.output_text
        answer = {"responses_create_params": body.responses_create_params, "response": body.response}
        if not text or not text.strip():
            return EvalPlusVerifyResponse(**answer, reward=0.0, metadata={"error": "no answer text"})
        code = extract_code_strict(text)
        if not code:
            reason = "no closed fenced code block in the answer"
            return EvalPlusVerifyResponse(
                **answer, reward=0.0, extracted_model_output=text, metadata={"error": reason}
            )
        base, plus, details = await self._run(code, problem)
        is_correct = base == PASS
        is_correct_plus = is_correct and plus == PASS
        return EvalPlusVerifyResponse(
            **answer,
            reward=float(is_correct_plus),
            extracted_model_output=text,
            extracted_model_code=code,
            base_status=base,
            plus_status=plus,
            is_correct=is_correct,
            is_correct_plus=is_correct_plus,
            metadata=details,
        )

    async def _run(self, code: str, problem: Problem) -> tuple[str, str, dict[str, Any]]:
        """Both groups in one sandbox run; its wall budget is (limit + 1) per call + 5 s."""
        limit = self.config.min_time_limit
        spec = {
            "time_limit": limit,
            "groups": {"base": problem.base_input, "plus": problem.plus_input},
            "argument_shapes": problem.argument_shapes,
        }
        budget = (limit + 1) * (len(problem.base_input) + len(problem.plus_input)) + 5
        # Room for every report line even when the expected values are large (a right answer is never cut).
        room = 4 * len(json.dumps([problem.base_expected, problem.plus_expected])) + 65536
        output_bytes = max(room, self.config.sandbox.output_bytes)
        reports, ended = await run_harness(
            code, problem.entry_point, spec, self._sandbox, budget, output_bytes=output_bytes
        )
        base, base_details = grade_group(
            reports, "base", problem.base_input, problem.base_expected, problem.atol, ended
        )
        plus, plus_details = grade_group(
            reports, "plus", problem.plus_input, problem.plus_expected, problem.atol, ended
        )
        details = {"base_details": base_details, "plus_details": plus_details, "sandbox_ended": ended}
        return base, plus, details

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics, _, _, _ = compute_pass_majority_metrics(
            tasks, score_fn=_scores, answer_key="extracted_model_code"
        )
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return key_metrics(agent_metrics, SCORES)


def _scores(rollout: dict[str, Any]) -> dict[str, float]:
    return {
        "passing_base_tests": float(bool(rollout.get("is_correct"))),
        "passing_plus_tests": float(bool(rollout.get("is_correct_plus"))),
    }


if __name__ == "__main__":
    EvalPlusResourcesServer.run_webserver()
