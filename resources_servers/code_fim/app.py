"""code_fim: HumanEval-Infilling-style fill-in-the-middle. The model's middle is spliced between the
task's prefix and suffix, the task's check() is appended, and the program runs in the local sandbox
(nemo_gym.sandbox): it passes when it runs to its end within the time limit.

Rows point at a problem by `verifier_metadata.task_id`; the problems are bundled in data/problems.json
(made by data/make_problems.py) instead of coming from the human-eval-infilling package. A benchmark row
carries its problem itself (`verifier_metadata.problem`, as evalplus's rows do). Code extraction and the
problem lookup are evalplus's (this folder builds on it).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.reward_profile import compute_pass_majority_metrics
from nemo_gym.sandbox import SandboxLimits, SandboxSlots
from resources_servers.evalplus.app import inline_problem, key_metrics, problem_for, read_problems
from resources_servers.evalplus.grading import extract_code_strict

FOLDER = Path(__file__).parent
SPLITS = {
    "single_line": "SingleLineInfilling/",
    "multi_line": "MultiLineInfilling/",
    "random_span": "RandomSpanInfilling/",
    "random_span_light": "RandomSpanInfillingLight/",
}
PASSED, TIMED_OUT = "passed", "timed out"


class CodeFimConfig(BaseResourcesServerConfig):
    split: Literal["single_line", "multi_line", "random_span", "random_span_light"] = "random_span"
    num_processes: int = Field(default=8, ge=1, description="sandboxes at once")
    timeout: float = Field(default=3.0, gt=0, description="wall time of one program run, in seconds")
    problems_path: str = Field(
        default=str(FOLDER / "data" / "problems.json"), description="the problems (see data/make_problems.py)"
    )
    sandbox: SandboxLimits = Field(default_factory=lambda: SandboxLimits(memory_mb=2048, max_processes=4))


class Problem(BaseModel):
    model_config = ConfigDict(extra="allow")

    task_id: str
    entry_point: str
    prompt: str
    suffix: str
    test: str


class CodeFimMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    task_id: str = Field(min_length=1)
    problem: str | None = Field(
        default=None,
        description="the problem itself: the JSON text of a problems-file entry (benchmark rows)",
    )


class CodeFimVerifyRequest(BaseVerifyRequest):
    verifier_metadata: CodeFimMetadata


class CodeFimVerifyResponse(BaseVerifyResponse):
    extracted_model_output: str | None = None
    extracted_model_code: str | None = None
    completion: str | None = None
    status: str | None = None
    passed: bool = False
    metadata: dict[str, Any] | None = None


def load_problems(path: str | Path, split: str) -> dict[str, Problem]:
    """The problems of the configured split (its task-id prefix), by task_id."""
    return read_problems(path, SPLITS[split], Problem)


def trim_overlap(before: str, after: str, cut_from: Literal["before", "after"]) -> str:
    """Drop the longest span that ends `before` and starts `after` from one of them (the model often
    repeats the end of the prefix or the start of the suffix). A span of blanks without a newline does
    not count: it is usually indentation the middle needs."""
    for size in range(min(len(before), len(after)), 0, -1):
        span = after[:size]
        if not before.endswith(span) or (not span.strip() and "\n" not in span):
            continue
        return after[size:] if cut_from == "after" else before[:-size]
    return after if cut_from == "after" else before


def postprocess(code: str, prefix: str, suffix: str) -> str:
    """The middle to splice: one leading newline (the fence's) dropped, then prefix and suffix repeats."""
    middle = code[1:] if code.startswith("\n") else code
    middle = trim_overlap(prefix, middle, cut_from="after")
    return trim_overlap(middle, suffix, cut_from="before")


class CodeFimResourcesServer(SimpleResourcesServer):
    config: CodeFimConfig
    _sandbox: SandboxSlots = PrivateAttr()
    _problems: dict[str, Problem] = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.num_processes)
        self._problems = load_problems(self.config.problems_path, self.config.split)

    async def verify(self, body: CodeFimVerifyRequest) -> CodeFimVerifyResponse:
        metadata = body.verifier_metadata
        if metadata.problem is not None:
            problem = inline_problem(metadata.problem, Problem)
        else:
            problem = problem_for(self._problems, metadata.task_id, f"split {self.config.split!r}")
        text = body.response.output_text
        answer = {"responses_create_params": body.responses_create_params, "response": body.response}
        if not text:
            return CodeFimVerifyResponse(**answer, reward=0.0, metadata={"error": "no answer text"})
        code = extract_code_strict(text.partition("</think>")[2] if "</think>" in text else text, strip=False)
        if not code:
            reason = "no closed fenced code block in the answer"
            return CodeFimVerifyResponse(
                **answer, reward=0.0, extracted_model_output=text, metadata={"error": reason}
            )
        completion = postprocess(code, problem.prompt, problem.suffix)
        status, details = await self._run(problem, completion)
        return CodeFimVerifyResponse(
            **answer,
            reward=float(status == PASSED),
            extracted_model_output=text,
            extracted_model_code=code,
            completion=completion,
            status=status,
            passed=status == PASSED,
            metadata=details,
        )

    async def _run(self, problem: Problem, completion: str) -> tuple[str, dict[str, Any]]:
        """prefix + completion + suffix + test + check(entry point), then a per-run marker: the program
        passes only when it prints the marker (reaching its end) and exits with status 0."""
        marker = secrets.token_hex(16)
        program = (
            f"{problem.prompt}{completion}{problem.suffix}\n{problem.test}\n"
            f"check({problem.entry_point})\nprint({marker!r})\n"
        )
        run = await self._sandbox.run_python(
            "program.py", files={"program.py": program}, seconds=self.config.timeout
        )
        ended = run.early_end()
        details: dict[str, Any] = {"sandbox_ended": ended}
        if run.timed_out:
            return TIMED_OUT, details
        if run.exit_code == 0 and run.stdout.rstrip().endswith(marker):
            return PASSED, details
        lines = [line for line in run.stderr.strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else (ended or "the program stopped before its end")
        return f"failed: {reason}", details

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics, _, _, _ = compute_pass_majority_metrics(tasks, score_fn=_accuracy, answer_key="completion")
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return key_metrics(agent_metrics, ["accuracy"])


def _accuracy(rollout: dict[str, Any]) -> dict[str, float]:
    return {"accuracy": float(bool(rollout.get("passed")))}


if __name__ == "__main__":
    CodeFimResourcesServer.run_webserver()
