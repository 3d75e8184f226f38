"""scicodepile: SciCodePile's runnable benchmark. The model writes a scientific Python function; the task's
own `check(candidate)` decides, run with the model's code in the local sandbox (nemo_gym.sandbox: no
network, limits, throwaway work dir; one fresh process per task, since the tests patch globals freely).

Reward 1.0 iff `check` returns without raising. A failure in the task's own code (its `setup_code` or
`test`) says nothing about the model: that rollout is masked, never scored 0.
"""

from __future__ import annotations

import json
import secrets
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.reward_profile import (
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    highest_k_metrics,
)
from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxResult,
    SandboxSlots,
)
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.scicodepile.grading import encodable, extract_code, read_verdict

RUNNER = (Path(__file__).parent / "runner.py").read_bytes()
ANSWER_KEY = "extracted_model_code"
STDERR_CHARS = 2000


class FailureCode(StrEnum):
    """Why a rollout was not measured (its `failure_reason`): the task's code failed, not the model's."""

    SETUP_CODE_FAILED = "setup_code_failed"
    TEST_CODE_FAILED = "test_code_failed"
    TEST_DEFINES_NO_CHECK = "test_defines_no_check"
    RUNNER_CRASHED = "runner_crashed"


class ScicodepileConfig(BaseResourcesServerConfig):
    num_processes: int = Field(default=8, ge=1, description="tasks (sandboxes) running at once")
    subprocess_timeout: float = Field(default=120.0, gt=0, description="wall and CPU limit of one task run")
    max_as_limit: int = Field(
        default=8192, ge=0, description="address space of each process, MiB; 0: the sandbox's memory_mb"
    )
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=8192, max_processes=16, scratch_mb=256),
        description="isolation and limits; wall/CPU time come from subprocess_timeout, memory from max_as_limit",
    )


class VerifierMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")

    test: str = Field(description="source defining check(candidate)")
    entry_point: str = Field(min_length=1, description="the function under test")
    setup_code: str = ""
    task_id: str | None = None
    audit_flags: list[str] | None = None
    primary_score_eligible: bool | None = None


class ScicodepileVerifyRequest(BaseVerifyRequest):
    verifier_metadata: VerifierMetadata


class ScicodepileVerifyResponse(BaseVerifyResponse):
    verifier_metadata: VerifierMetadata
    extracted_model_output: str | None = None
    extracted_model_code: str | None = None
    status: str
    details: dict[str, Any] | None = None
    task_id: str | None = None


class ScicodepileResourcesServer(SimpleResourcesServer):
    config: ScicodepileConfig
    _sandbox: SandboxSlots = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.num_processes)

    async def verify(self, body: ScicodepileVerifyRequest) -> ScicodepileVerifyResponse:
        """reward 1.0 iff the task's check() passed on the model's function."""
        meta = body.verifier_metadata
        answer: dict[str, Any] = {"task_id": meta.task_id}
        text = body.response.output_text or ""
        if not text.strip():
            return self._answer(body, status="empty_output", **answer)
        code = extract_code(text)
        answer["extracted_model_output"] = text
        if not code:
            return self._answer(body, status="no_code_block", **answer)
        token = secrets.token_hex(16)
        task = {
            "setup_code": meta.setup_code,
            "code": code,
            "test": meta.test,
            "entry_point": meta.entry_point,
        }
        # The task goes in on stdin, not as a file: the runner has read it before the model's code runs, so
        # that code finds no copy of the test to read its expected values from.
        memory = {"memory_mb": self.config.max_as_limit} if self.config.max_as_limit > 0 else {}
        run = await self._sandbox.run_python(
            "runner.py",
            stdin=token + "\n" + json.dumps(task),
            files={"runner.py": RUNNER},
            seconds=self.config.subprocess_timeout,
            **memory,
        )
        status, details = verdict_of(run, token)
        return self._answer(body, status=status, details=details, extracted_model_code=code, **answer)

    @staticmethod
    def _answer(body: ScicodepileVerifyRequest, status: str, **fields: Any) -> ScicodepileVerifyResponse:
        failure = failure_code(fields.get("details"))
        return ScicodepileVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response", "verifier_metadata"}),
            **encodable(fields),
            status=status,
            reward=1.0 if status == "pass" else 0.0,
            mask_sample=failure is not None,
            failure_kind=VERIFIER_ERROR if failure is not None else None,
            failure_reason=failure.value if failure is not None else None,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        metrics, score_dicts, score_names, max_k = compute_pass_majority_metrics(
            tasks, score_fn=_accuracy, answer_key=ANSWER_KEY
        )
        add_avg_sample_std_dev(metrics, score_dicts, score_names, max_k)
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key_metrics = {
            name: agent_metrics[name]
            for name in ("mean/input_tokens", "mean/output_tokens")
            if name in agent_metrics
        }
        key_metrics.update(highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", score_names=["accuracy"]))
        key_metrics.update(highest_k_metrics(agent_metrics, "pass@{k}", score_names=["accuracy"]))
        return key_metrics


def _accuracy(rollout: dict[str, Any]) -> dict[str, float]:
    return {"accuracy": float(rollout["reward"] > 0)}


def verdict_of(run: SandboxResult, token: str) -> tuple[str, dict[str, Any]]:
    """(status, details) of a sandbox run. No line at all: the runner never reached the task's code (a
    harness fault). `started` only: the task's process ended or was stopped before a verdict."""
    verdict = read_verdict(run.stdout, token)
    if verdict is None:
        return "error", {
            "reason": "runner_crashed",
            "phase": "runner",
            "harness_fault": True,
            "stderr": run.stderr[-STDERR_CHARS:],
        }
    if verdict["status"] != "started":
        details = verdict.get("details")
        return verdict["status"], details if isinstance(details, dict) else {}
    if run.timed_out:
        return "timeout", {"reason": "subprocess_timeout", "limit": run.limit_hit}
    return "error", {
        "reason": "unparseable_runner_output",
        "exit_code": run.exit_code,
        "signal": run.signal,
        "limit": run.limit_hit,
        "stderr": run.stderr[-STDERR_CHARS:],
    }


def failure_code(details: dict[str, Any] | None) -> FailureCode | None:
    """The harness fault the runner reported, if any; the runner alone decides what is one."""
    if not details or not details.get("harness_fault"):
        return None
    phase = details.get("phase")
    if phase == "setup":
        return FailureCode.SETUP_CODE_FAILED
    if phase == "test":
        if details.get("reason") == "test_defines_no_check":
            return FailureCode.TEST_DEFINES_NO_CHECK
        return FailureCode.TEST_CODE_FAILED
    return FailureCode.RUNNER_CRASHED


if __name__ == "__main__":
    ScicodepileResourcesServer.run_webserver()
