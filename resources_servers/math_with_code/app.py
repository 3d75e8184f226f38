"""math_with_code: math problems the model may solve with a Python tool (`execute_python`), which runs its
code in the local sandbox (nemo_gym.sandbox: no network, time and memory limits, throwaway work dir).

The reward looks only at the final answer: the last `\\boxed{...}` of the last assistant message,
checked against `expected_answer` with math-verify in the CPU pool (past its deadline: 0.0).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, Field, PrivateAttr

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import TOKEN_MEANS, pass_at_k_key_metrics
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseFunctionToolCall, assistant_texts
from nemo_gym.reward_profile import compute_pass_majority_metrics
from nemo_gym.sandbox import SandboxLimits, SandboxSlots
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.math_with_code.grading import Grade, grade


class MathWithCodeConfig(BaseResourcesServerConfig):
    sandbox: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(wall_seconds=10, cpu_seconds=10, output_bytes=8192),
        description="isolation and limits of one execute_python call",
    )
    max_concurrent_executions: int = Field(default=8, ge=1)


class ExecutePythonRequest(BaseModel):
    code: str


class ExecutePythonResponse(BaseModel):
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    truncated: bool


class MathWithCodeVerifyRequest(BaseVerifyRequest):
    question: str
    expected_answer: str


class MathWithCodeVerifyResponse(BaseVerifyResponse):
    expected_answer: str
    extracted_answer: str | None
    num_tool_calls: int


class MathWithCodeResourcesServer(SimpleResourcesServer):
    config: MathWithCodeConfig
    _sandbox: SandboxSlots = PrivateAttr()

    def model_post_init(self, context: object) -> None:
        super().model_post_init(context)
        self._sandbox = SandboxSlots(self.config.sandbox, self.config.max_concurrent_executions)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/execute_python")(self.execute_python)
        return app

    async def execute_python(self, body: ExecutePythonRequest) -> ExecutePythonResponse:
        """Run the code as a Python 3 program; what it printed comes back, cut (and marked) past the limit."""
        run = await self._sandbox.run(body.code)
        stderr = run.stderr
        if run.timed_out:
            stderr += f"\n[killed: the program exceeded its {run.limit_hit.replace('_', ' ')} limit]"
        return ExecutePythonResponse(
            stdout=_marked(run.stdout, run.stdout_bytes, self.config.sandbox.output_bytes),
            stderr=_marked(stderr, run.stderr_bytes, self.config.sandbox.output_bytes),
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            truncated=run.truncated,
        )

    async def verify(self, body: MathWithCodeVerifyRequest) -> MathWithCodeVerifyResponse:
        graded = await run_cpu_bound(
            grade,
            body.expected_answer,
            final_text(body.response),
            timeout_s=self.config.grading_timeout_s,
            on_timeout=Grade(0.0, None),
        )
        calls = sum(isinstance(item, NeMoGymResponseFunctionToolCall) for item in body.response.output)
        return MathWithCodeVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=graded.reward,
            expected_answer=body.expected_answer,
            extracted_answer=graded.extracted_answer,
            num_tool_calls=calls,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        return compute_pass_majority_metrics(tasks, answer_key="extracted_answer")[0]

    def get_key_metrics(self, agent_metrics: dict[str, Any]) -> dict[str, Any]:
        return pass_at_k_key_metrics(agent_metrics, leading=(*TOKEN_MEANS, "mean/num_tool_calls"))


def final_text(response: NeMoGymResponse) -> str:
    """The text of the last assistant message (the answer after any tool use); empty when there is none."""
    for item in reversed(response.output):
        if texts := assistant_texts(item):
            return "".join(texts)
    return ""


def _marked(text: str, written: int, cap: int) -> str:
    if written <= cap:
        return text
    return text + f"\n[output truncated: {written} bytes were written, only the first {cap} are shown]"


if __name__ == "__main__":
    MathWithCodeResourcesServer.run_webserver()
