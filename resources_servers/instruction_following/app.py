"""instruction_following: IFEval-style verifiable instructions ("answer in 4 paragraphs", "no commas", ...).

Each row lists instruction ids with their kwargs; every instruction is checked by a deterministic rule
on the final message (checks.py), so no judge model is involved. The rules scan model text of any
length, so they run in the CPU pool under a deadline; past it nothing counts as followed.
"""

import logging
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
from resources_servers.instruction_following.checks import grade

logger = logging.getLogger("instruction_following")

Kwargs = list[dict[str, Any] | None]
MAX_WARNED = 1000
"""Instruction ids whose problems a server logs (once each): odd ids sent in bulk must not flood the log."""


class InstructionFollowingConfig(BaseResourcesServerConfig):
    """Only base settings: `grading_timeout_s` bounds checking one reply's instructions."""


class InstructionFollowingVerifyRequest(BaseVerifyRequest):
    id: int | str | None = None
    instruction_id_list: list[str]
    prompt: str
    kwargs: Kwargs
    grading_mode: Literal["binary", "fraction"] = "binary"

    @model_validator(mode="after")
    def _one_kwargs_entry_per_instruction(self) -> "InstructionFollowingVerifyRequest":
        if len(self.kwargs) != len(self.instruction_id_list):
            raise ValueError(
                f"kwargs has {len(self.kwargs)} entries for {len(self.instruction_id_list)} instruction ids"
            )
        return self


class InstructionFollowingVerifyResponse(BaseVerifyResponse):
    instruction_id_list: list[str]
    prompt: str
    kwargs: Kwargs
    follow_all_instructions: bool
    follow_instruction_list: list[bool]


def final_text(response: NeMoGymResponse) -> str:
    """The first text of the last output item: a trailing tool call or reasoning item means no answer."""
    texts = assistant_texts(response.output[-1]) if response.output else []
    return texts[0] if texts else ""


class InstructionFollowingResourcesServer(SimpleResourcesServer):
    config: InstructionFollowingConfig
    key_metric_patterns = ("mean/*", "instruction_level_accuracy")
    _warned: set[str] = PrivateAttr(default_factory=set)

    async def verify(self, body: InstructionFollowingVerifyRequest) -> InstructionFollowingVerifyResponse:
        followed = await self.follow_list(final_text(body.response), body.instruction_id_list, body.kwargs)
        if body.grading_mode == "binary":
            reward = float(all(followed))
        else:
            reward = statistics.fmean(followed) if followed else 0.0
        return InstructionFollowingVerifyResponse(
            **body.model_dump(
                include={"responses_create_params", "response", "instruction_id_list", "prompt", "kwargs"}
            ),
            reward=reward,
            follow_all_instructions=all(followed),
            follow_instruction_list=followed,
        )

    async def follow_list(self, text: str, instruction_ids: list[str], kwargs: Kwargs) -> list[bool]:
        """One verdict per instruction; past the deadline, none is followed."""
        if not instruction_ids:
            return []
        timed_out = [(False, None)] * len(instruction_ids)  # past the deadline, nothing is followed
        outcomes = await run_cpu_bound(
            grade,
            text,
            instruction_ids,
            kwargs,
            timeout_s=self.config.grading_timeout_s,
            on_timeout=timed_out,
        )
        for instruction_id, (_, problem) in zip(instruction_ids, outcomes, strict=True):
            if problem is not None and instruction_id not in self._warned and len(self._warned) < MAX_WARNED:
                self._warned.add(instruction_id)
                logger.warning("%s counted as not followed: %s", instruction_id, problem[:300])
        return [followed for followed, _ in outcomes]

    def compute_metrics(self, tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        """IFEval's instruction-level accuracy: followed instructions over all instructions, pooled."""
        verdicts = [
            verdict
            for rollouts in tasks
            for rollout in rollouts
            if isinstance(rollout.get("follow_instruction_list"), list)
            for verdict in rollout["follow_instruction_list"]
            if isinstance(verdict, bool)
        ]
        return {"instruction_level_accuracy": statistics.fmean(verdicts)} if verdicts else {}


if __name__ == "__main__":
    InstructionFollowingResourcesServer.run_webserver()
