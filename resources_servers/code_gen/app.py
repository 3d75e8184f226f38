"""code_gen: competitive programming (LiveCodeBench format), graded by running the model's program on the
task's unit tests in the local sandbox (nemo_gym.sandbox: no network, limits, throwaway work dir).

The program and the test inputs go into the sandbox with harness.py, which runs every test and reports
the outputs; the expected outputs never enter the sandbox, and the comparison runs in the CPU pool.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponseReasoningItem
from nemo_gym.reward_profile import (
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)
from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxSlots,
)
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.code_gen.grading import (
    GLOBAL_TIMEOUT,
    extract_code,
    grade_reports,
    output_caps,
    reasoning_format_violation,
)

logger = logging.getLogger("code_gen")

HARNESS = (Path(__file__).parent / "harness.py").read_bytes()
GRADING_TIMEOUT_S = 30.0
INLINE_GRADING_CHARS = 65536
ANSWER_KEY = "extracted_model_code"
SUBSET_ACCURACY = re.compile(r"^(?P<subset>.+)/pass@1\[avg-of-\d+\]/accuracy$")


class CodeGenConfig(BaseResourcesServerConfig):
    num_processes: int = Field(default=8, ge=1, description="test runs (sandboxes) at once")
    unit_test_timeout_secs: float = Field(default=10.0, gt=0, description="time limit of one test")
    debug: bool = False
    reasoning_format_penalty: float = 0.0
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=4096, file_size_mb=64, scratch_mb=256),
        description="isolation and limits; wall and CPU time are derived from unit_test_timeout_secs",
    )


class UnitTests(BaseModel):
    inputs: list[str] = Field(min_length=1)
    outputs: list[str]
    fn_name: str | None = None

    @model_validator(mode="after")
    def _one_output_per_input(self) -> UnitTests:
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"{len(self.inputs)} inputs but {len(self.outputs)} outputs")
        return self


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    unit_tests: UnitTests
    difficulty: str | None = None


class CodeGenVerifyRequest(BaseVerifyRequest):
    verifier_metadata: VerifierMetadata


class CodeGenVerifyResponse(BaseVerifyResponse):
    extracted_model_output: str | None = None
    extracted_model_code: str | None = None
    result: list[bool | int] | None = None
    metadata: dict[str, Any] | None = None
    unit_tests_time_taken: float | None = None
    reasoning_format_violation_rate: float
    difficulty: str | None


class CodeGenResourcesServer(SimpleResourcesServer):
    config: CodeGenConfig
    _sandbox: SandboxSlots = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.num_processes)

    async def verify(self, body: CodeGenVerifyRequest) -> CodeGenVerifyResponse:
        text = body.response.output_text
        summaries = [
            part.text
            for item in body.response.output
            if isinstance(item, NeMoGymResponseReasoningItem)
            for part in item.summary
        ]
        violation = reasoning_format_violation(text, summaries)
        graded: dict[str, Any] = {}
        if text:
            code = extract_code(text)
            graded = {"extracted_model_output": text, "extracted_model_code": code}
            if code is not None:
                graded.update(await self._run_tests(code, body.verifier_metadata.unit_tests))
        results = graded.get("result")
        passed = bool(results) and all(outcome is True for outcome in results)
        return CodeGenVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=self.config.reasoning_format_penalty if violation else float(passed),
            reasoning_format_violation_rate=float(violation),
            difficulty=body.verifier_metadata.difficulty,
            **graded,
        )

    async def _run_tests(self, code: str, tests: UnitTests) -> dict[str, Any]:
        """The program on every test in one sandbox; the run's budget is (timeout + 1) per test + 5 s."""
        timeout = self.config.unit_test_timeout_secs
        caps = output_caps(tests.outputs)
        spec = {"inputs": tests.inputs, "fn_name": tests.fn_name, "timeout": timeout, "output_caps": caps}
        budget = (timeout + 1) * len(tests.inputs) + 5
        files = {"harness.py": HARNESS, "solution.py": code, "tests.json": json.dumps(spec)}
        run = await self._sandbox.run_python(
            "harness.py", files=files, seconds=budget, output_bytes=6 * sum(caps) + 65536
        )
        grading = (run.stdout, tests.inputs, tests.outputs, tests.fn_name, run.early_end(stderr_chars=500))
        if len(run.stdout) <= INLINE_GRADING_CHARS:  # a few milliseconds: not worth a trip to the pool
            result, metadata = grade_reports(*grading)
        else:
            message = f"Error during testing: comparing outputs took over {GRADING_TIMEOUT_S:.0f} s"
            timed_out = [GLOBAL_TIMEOUT], {"error_code": GLOBAL_TIMEOUT, "error_message": message}
            result, metadata = await run_cpu_bound(
                grade_reports, *grading, timeout_s=GRADING_TIMEOUT_S, on_timeout=timed_out
            )
        if self.config.debug:
            logger.info(
                "code_gen run %s -> %s %s\n%s", run.model_dump(exclude={"stdout"}), result, metadata, code
            )
        return {"result": result, "metadata": metadata, "unit_tests_time_taken": run.seconds}

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics, score_dicts, score_names, max_k = compute_pass_majority_metrics(
            tasks, score_fn=_accuracy, answer_key=ANSWER_KEY
        )
        add_avg_sample_std_dev(metrics, score_dicts, score_names, max_k)
        metrics.update(compute_subset_metrics(tasks, "difficulty", score_fn=_accuracy, answer_key=ANSWER_KEY))
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key_metrics = {
            name: agent_metrics[name]
            for name in ("mean/input_tokens", "mean/output_tokens")
            if name in agent_metrics
        }
        subsets = {match["subset"] for name in agent_metrics if (match := SUBSET_ACCURACY.match(name))}
        families = (
            "pass@1[avg-of-{k}]",
            "pass@{k}",
            "majority@{k}",
            *(f"{s}/pass@1[avg-of-{{k}}]" for s in subsets),
        )
        for family in families:
            key_metrics.update(highest_k_metrics(agent_metrics, family, exclude_names=["no_answer"]))
        return key_metrics


def _accuracy(rollout: dict[str, Any]) -> dict[str, float]:
    return {"accuracy": float(rollout["reward"] > 0)}


if __name__ == "__main__":
    CodeGenResourcesServer.run_webserver()
