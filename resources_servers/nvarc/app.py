"""nvarc: ARC-AGI puzzles in NeMo Gym's two NVARC modes, rewarded 1.0 when the answer grid is the
expected one.

- transductive: the model writes the output grid (grading.parse_grid).
- inductive: the model writes a Python `transform(grid)`; it runs in the local sandbox (nemo_gym.sandbox:
  no network, limits, throwaway work dir) on the task's `test_input`, and its return value is the answer.

The mode is the row's `agent_mode`, else the config's. The expected grid never enters the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from fastapi.exceptions import RequestValidationError
from pydantic import Field, PositiveInt, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxResult,
    SandboxSlots,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.nvarc.grading import Grid, extract_code, is_grid, parse_grid, read_report

RUNNER = (Path(__file__).parent / "runner.py").read_bytes()
AgentMode = Literal["transductive", "inductive"]
SANDBOX_GRACE_S = 5.0
"""The sandbox's wall limit beyond python_timeout_seconds: interpreter start-up and imports."""


class NvarcConfig(BaseResourcesServerConfig):
    agent_mode: AgentMode = Field(default="transductive", description="the mode of rows without agent_mode")
    python_timeout_seconds: PositiveInt = Field(
        default=30, description="inductive: time limit of one program (its module code and transform())"
    )
    python_max_concurrency: PositiveInt = Field(default=32, description="inductive: programs running at once")
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=2048, max_processes=8, scratch_mb=64),
        description="isolation and limits; wall and CPU time are derived from python_timeout_seconds",
    )


class NvarcVerifyRequest(BaseVerifyRequest):
    expected_output: Grid
    train: list[dict[str, Any]] = Field(default_factory=list)
    test_input: Grid = Field(default_factory=list)
    task_id: str | None = None
    agent_mode: AgentMode | None = None


class NvarcVerifyResponse(BaseVerifyResponse):
    train: list[dict[str, Any]]
    test_input: Grid
    task_id: str | None
    expected_output: Grid
    predicted_output: Grid | None
    extraction_successful: bool
    exact_match: bool
    agent_mode: AgentMode
    execution_error: str | None = None


def answer_text(response: NeMoGymResponse) -> str:
    """Every assistant text of the response, one per line."""
    return "\n".join(text for item in response.output for text in assistant_texts(item))


class NvarcResourcesServer(SimpleResourcesServer):
    config: NvarcConfig
    _sandbox: SandboxSlots = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.python_max_concurrency)

    async def verify(self, body: NvarcVerifyRequest) -> NvarcVerifyResponse:
        """reward 1.0 iff an answer grid was found (written, or returned by transform()) and equals
        `expected_output`."""
        mode = body.agent_mode or self.config.agent_mode
        text = answer_text(body.response)
        error, measured = None, True
        if mode == "inductive":
            if not body.test_input:
                raise RequestValidationError(
                    [
                        {
                            "loc": ("body", "test_input"),
                            "msg": "inductive rows need a test_input grid",
                            "type": "value_error",
                        }
                    ]
                )
            predicted, error, measured = await self._run_transform(text, body.test_input)
        else:
            predicted = await run_cpu_bound(
                parse_grid, text, timeout_s=self.config.grading_timeout_s, on_timeout=None
            )
        exact = predicted is not None and predicted == body.expected_output
        return NvarcVerifyResponse(
            **body.model_dump(
                include={
                    "responses_create_params",
                    "response",
                    "train",
                    "test_input",
                    "task_id",
                    "expected_output",
                }
            ),
            reward=1.0 if exact else 0.0,
            predicted_output=predicted,
            extraction_successful=predicted is not None,
            exact_match=exact,
            agent_mode=mode,
            execution_error=error,
            mask_sample=not measured,
            failure_kind=None if measured else VERIFIER_ERROR,
            failure_reason=None if measured else f"the sandbox never ran the program: {error}",
        )

    async def _run_transform(self, text: str, test_input: Grid) -> tuple[Grid | None, str | None, bool]:
        """(the grid transform() returned, why there is none, whether the program ran at all). A sandbox
        that ended before the runner said the program was starting measured nothing about the answer."""
        code = extract_code(text)
        if code is None:
            return None, "no program in the answer", True
        timeout = self.config.python_timeout_seconds
        files = {
            "runner.py": RUNNER,
            "solution.py": code,
            "task.json": json.dumps({"test_input": test_input, "timeout": timeout}),
        }
        run = await self._sandbox.run_python("runner.py", files=files, seconds=timeout + SANDBOX_GRACE_S)
        return run_outcome(run)


def run_outcome(run: SandboxResult) -> tuple[Grid | None, str | None, bool]:
    """(grid, why there is none, measured) of a finished sandbox run, from the runner's report."""
    report = read_report(run.stdout)
    if report is None:
        return None, _early_end(run), False
    if report["status"] == "running":
        return None, _early_end(run), True
    if report["status"] != "ok":
        return None, str(report.get("error")), True
    if not is_grid(report.get("result")):
        return None, "transform() returned no grid of colours 0-9 (at most 30x30)", True
    return report["result"], None, True


def _early_end(run: SandboxResult) -> str:
    """Why the sandbox ended without a report: the sandbox's own words, or a clean exit that wrote none."""
    return run.early_end() or f"ended without a result (exit status {run.exit_code}): {run.stderr[-300:]}"


if __name__ == "__main__":
    NvarcResourcesServer.run_webserver()
