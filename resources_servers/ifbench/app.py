"""ifbench: AllenAI's IFBench out-of-distribution verifiable instructions, scored strict and loose.

Each row lists instruction ids with their kwargs; every instruction is checked by a deterministic rule
on the final message (checks.py), no judge model. The row is validated before grading: an unknown or
unsupported id, or kwargs that do not fit the instruction, is a 422 naming the instruction, so a typo in a
dataset never turns into a quiet zero. The checks scan model text of any length, so they run in the CPU
pool under a deadline; past it the rollout is marked as not measured (`mask_sample`).
"""

import statistics
from typing import Any, Literal

from pydantic import PrivateAttr, model_validator

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse, assistant_texts
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.ifbench.checks import grade, validated_arguments

Kwargs = list[dict[str, Any] | None]
GradingMode = Literal["binary", "fraction"]


class IFBenchConfig(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds checking one reply's instructions."""


class IFBenchVerifyRequest(BaseVerifyRequest):
    id: int | str | None = None
    instruction_id_list: list[str]
    prompt: str
    kwargs: Kwargs
    grading_mode: GradingMode = "fraction"
    _arguments: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _every_instruction_is_checkable(self) -> "IFBenchVerifyRequest":
        if len(self.kwargs) != len(self.instruction_id_list):
            raise ValueError(
                f"kwargs has {len(self.kwargs)} entries for {len(self.instruction_id_list)} instruction ids"
            )
        self._arguments = [
            validated_arguments(instruction_id, entry)
            for instruction_id, entry in zip(self.instruction_id_list, self.kwargs, strict=True)
        ]
        return self


class IFBenchVerifyResponse(BaseVerifyResponse):
    id: int | str | None = None
    instruction_id_list: list[str]
    prompt: str
    kwargs: Kwargs
    grading_mode: GradingMode
    follow_all_instructions: bool
    follow_instruction_list: list[bool]
    follow_all_instructions_loose: bool
    follow_instruction_list_loose: list[bool]
    reward_loose: float


def final_text(response: NeMoGymResponse) -> str:
    """The first text of the last output item: a trailing tool call or reasoning item means no answer."""
    texts = assistant_texts(response.output[-1]) if response.output else []
    return texts[0] if texts else ""


def reward_of(followed: list[bool], grading_mode: GradingMode) -> float:
    """`fraction` (IFBench's default): share followed, 0 for no instruction; `binary`: all followed."""
    if grading_mode == "binary":
        return float(all(followed))
    return statistics.fmean(followed) if followed else 0.0


class IFBenchResourcesServer(SimpleResourcesServer):
    config: IFBenchConfig
    key_metric_patterns = ("mean/*", "instruction_level_accuracy*")

    async def verify(self, body: IFBenchVerifyRequest) -> IFBenchVerifyResponse:
        ids = body.instruction_id_list
        verdicts = await run_cpu_bound(
            grade,
            final_text(body.response),
            ids,
            body._arguments,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=[(False, False)] * len(ids),
        )
        strict = [verdict for verdict, _ in verdicts]
        loose = [verdict for _, verdict in verdicts]
        return IFBenchVerifyResponse(
            **body.model_dump(
                include={
                    "responses_create_params",
                    "response",
                    "id",
                    "instruction_id_list",
                    "prompt",
                    "kwargs",
                }
            ),
            grading_mode=body.grading_mode,
            reward=reward_of(strict, body.grading_mode),
            follow_all_instructions=all(strict),
            follow_instruction_list=strict,
            reward_loose=reward_of(loose, body.grading_mode),
            follow_all_instructions_loose=all(loose),
            follow_instruction_list_loose=loose,
        )

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """Instruction-level accuracy, strict and loose: followed instructions over all, pooled."""
        metrics = {}
        for suffix in ("", "_loose"):
            verdicts = [
                verdict
                for rollouts in tasks
                for rollout in rollouts
                if not rollout.get("mask_sample")
                and isinstance(rollout.get(f"follow_instruction_list{suffix}"), list)
                for verdict in rollout[f"follow_instruction_list{suffix}"]
                if isinstance(verdict, bool)
            ]
            if verdicts:
                metrics[f"instruction_level_accuracy{suffix}"] = statistics.fmean(verdicts)
        return metrics


if __name__ == "__main__":
    IFBenchResourcesServer.run_webserver()
