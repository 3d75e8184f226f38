"""scicode: multi-step scientific code (SciCode), each sub-step's tests run against numeric targets from
`test_data.h5`.

NeMo Gym's scicode_agent asks for one sub-step at a time and sends the accumulated code of each step in
`solutions` ({"<problem_id>.<step>": code}); that agent is not available here, so with simple_agent the
prompt asks for the whole function set in one answer and every sub-step is tested against that code
(its ```python blocks, after `required_dependencies`). A request that carries `solutions` is graded the
NeMo Gym way: only the steps it names count, an out-of-context sentinel fails its step.

Each sub-step runs in its own sandbox (nemo_gym.sandbox: no network, limits, wall deadline
`timeout_secs`) with only that step's targets copied in. Reward 1.0 iff every scored sub-step passes. A
step that loops forever is stopped at the deadline and fails (status `timeout`: the model's doing). A
missing target, or a runner that could not start, says nothing about the model: the rollout is marked
(`mask_sample`), never scored 0.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from nemo_gym import PARENT_DIR
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import compute_pass_majority_metrics, highest_k_metrics
from nemo_gym.reward_profile import count_of
from nemo_gym.sandbox import (
    SandboxLimits,
    SandboxResult,
    SandboxSlots,
)
from nemo_gym.wire.failure_kinds import VERIFIER_ERROR
from resources_servers.scicode.example_problems import write_test_data
from resources_servers.scicode.grading import OUT_OF_CONTEXT, extract_code, sanitize_test, step_targets
from resources_servers.scicodepile.grading import encodable, read_verdict

RUNNER = (Path(__file__).parent / "runner.py").read_bytes()
STDERR_CHARS = 2000


class ScicodeConfig(BaseResourcesServerConfig):
    num_processes: int = Field(default=4, ge=1, description="sub-step sandboxes running at once")
    timeout_secs: float = Field(default=30.0, gt=0, description="wall and CPU limit of one sub-step run")
    test_data_fpath: str | None = Field(
        default=None,
        description="SciCode's test_data.h5 (relative: to the Gym root); null: the example targets",
    )
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=4096, max_processes=16, scratch_mb=128),
        description="isolation and limits; wall/CPU time come from timeout_secs",
    )


class SubStep(BaseModel):
    model_config = ConfigDict(extra="allow")

    step_number: str = Field(min_length=1)
    test_cases: list[str]


class ScicodeVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")

    problem_id: str = Field(min_length=1)
    sub_steps: list[SubStep] = Field(min_length=1)
    required_dependencies: str = ""
    solutions: dict[str, str] | None = None


class ScicodeVerifyResponse(BaseVerifyResponse):
    problem_id: str = ""
    step_results: list[bool] = []
    step_details: list[dict[str, Any]] = []
    num_steps_passed: int = 0
    num_steps_total: int = 0
    problem_accuracy: bool = False
    subtask_accuracy: float = 0.0
    extracted_model_code: str | None = None


class ScicodeResourcesServer(SimpleResourcesServer):
    config: ScicodeConfig
    _sandbox: SandboxSlots = PrivateAttr()
    _test_data: Path = PrivateAttr()
    _scratch: tempfile.TemporaryDirectory | None = PrivateAttr(default=None)

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.num_processes)
        if self.config.test_data_fpath is None:
            self._scratch = tempfile.TemporaryDirectory(prefix="scicode-targets-")
            self._test_data = Path(self._scratch.name) / "test_data.h5"
            write_test_data(self._test_data)
            return
        path = Path(self.config.test_data_fpath).expanduser()
        self._test_data = path if path.is_absolute() else PARENT_DIR / path
        if not self._test_data.is_file():
            raise FileNotFoundError(
                f"test_data_fpath: no file at {self._test_data} (stage SciCode's test_data.h5)"
            )

    async def verify(self, body: ScicodeVerifyRequest) -> ScicodeVerifyResponse:
        """reward 1.0 iff every scored sub-step's tests pass on the model's code."""
        answer = ScicodeVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}),
            problem_id=body.problem_id,
            reward=0.0,
        )
        codes = self._codes(body, answer)
        if not codes:
            return answer
        prepared = []
        for index, code in codes.items():
            step = body.sub_steps[index]
            image, problem = await asyncio.to_thread(
                step_targets, self._test_data, step.step_number, len(step.test_cases)
            )
            if problem:
                return marked(answer, f"step {step.step_number}: {problem}")
            prepared.append((step, code, image))
        details = await asyncio.gather(*(self._run_step(step, code, image) for step, code, image in prepared))
        answer.step_details = encodable(list(details))
        fault = next((d for d in details if d["details"].get("harness_fault")), None)
        if fault is not None:
            return marked(answer, f"step {fault['step_number']}: {fault['details'].get('reason')}")
        answer.step_results = [d["status"] == "pass" for d in details]
        self._score(answer)
        return answer

    def _codes(self, body: ScicodeVerifyRequest, answer: ScicodeVerifyResponse) -> dict[int, str | None]:
        """The code each scored step runs (index -> code; None: a step that fails unrun)."""
        prefix = body.required_dependencies.strip()
        if body.solutions is not None:  # NeMo Gym's scicode_agent: per-step accumulated code
            keys = {i: f"{body.problem_id}.{i + 1}" for i in range(len(body.sub_steps))}
            return {
                i: None
                if body.solutions[key] in ("", OUT_OF_CONTEXT)
                else f"{prefix}\n\n{body.solutions[key]}"
                for i, key in keys.items()
                if key in body.solutions
            }
        code = extract_code(body.response.output_text or "")
        if not code:  # no code at all: every step fails, measured
            answer.step_results = [False] * len(body.sub_steps)
            answer.step_details = [
                {"step_number": s.step_number, "status": "no_code", "details": {}} for s in body.sub_steps
            ]
            self._score(answer)
            return {}
        answer.extracted_model_code = code
        return {i: f"{prefix}\n\n{code}" for i in range(len(body.sub_steps))}

    async def _run_step(self, step: SubStep, code: str | None, image: bytes) -> dict[str, Any]:
        if code is None:
            return {"step_number": step.step_number, "status": "no_code", "details": {}}
        token = secrets.token_hex(16)
        task = {
            "step_number": step.step_number,
            "code": code,
            "tests": [sanitize_test(t) for t in step.test_cases],
        }
        run = await self._sandbox.run_python(
            "runner.py",
            stdin=token + "\n" + json.dumps(task),
            files={"runner.py": RUNNER, "targets.h5": image},
            seconds=self.config.timeout_secs,
        )
        status, details = verdict_of(run, token)
        return {"step_number": step.step_number, "status": status, "details": details}

    @staticmethod
    def _score(answer: ScicodeVerifyResponse) -> None:
        passed, total = sum(answer.step_results), len(answer.step_results)
        answer.num_steps_passed, answer.num_steps_total = passed, total
        answer.problem_accuracy = total > 0 and passed == total
        answer.subtask_accuracy = passed / total if total else 0.0
        answer.reward = 1.0 if answer.problem_accuracy else 0.0

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """pass@k of the problem (`accuracy`), and `subtask_accuracy`: passed over scored sub-steps, pooled
        over every measured rollout (NeMo Gym's headline sub-step number)."""
        metrics, _, _, _ = compute_pass_majority_metrics(tasks, score_fn=_accuracy)
        rollouts = [r for task in tasks for r in task if not r.get("mask_sample")]
        total = sum(count_of(r.get("num_steps_total"), "num_steps_total") for r in rollouts)
        if total:
            metrics["subtask_accuracy"] = (
                100.0 * sum(count_of(r.get("num_steps_passed"), "num_steps_passed") for r in rollouts) / total
            )
        return metrics

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        key = highest_k_metrics(agent_metrics, "pass@1[avg-of-{k}]", score_names=["accuracy"])
        key.update(highest_k_metrics(agent_metrics, "pass@{k}", score_names=["accuracy"]))
        if "subtask_accuracy" in agent_metrics:
            key["subtask_accuracy"] = agent_metrics["subtask_accuracy"]
        return key


def _accuracy(rollout: dict[str, Any]) -> dict[str, float]:
    return {"accuracy": float(rollout.get("reward", 0.0) > 0)}


def marked(answer: ScicodeVerifyResponse, reason: str) -> ScicodeVerifyResponse:
    """The answer as not measured: the harness, not the model, kept it from being graded."""
    answer.mask_sample = True
    answer.failure_kind = VERIFIER_ERROR
    answer.failure_reason = reason
    answer.reward = 0.0
    return answer


def verdict_of(run: SandboxResult, token: str) -> tuple[str, dict[str, Any]]:
    """(status, details) of one sub-step run: the runner's verdict; `timeout` when the model's code was
    still running at the deadline; a harness fault when the runner never reported."""
    verdict = read_verdict(run.stdout, token)
    if verdict is None:
        stderr = run.stderr[-STDERR_CHARS:]
        return "error", {
            "reason": "runner_crashed",
            "phase": "runner",
            "harness_fault": True,
            "stderr": stderr,
        }
    if verdict["status"] != "started":
        details = verdict.get("details")
        return verdict["status"], details if isinstance(details, dict) else {}
    if run.timed_out:
        return "timeout", {"reason": "timeout", "limit": run.limit_hit}
    return "error", {
        "reason": "no_verdict",
        "phase": "model",
        "exit_code": run.exit_code,
        "signal": run.signal,
        "limit": run.limit_hit,
    }


if __name__ == "__main__":
    ScicodeResourcesServer.run_webserver()
