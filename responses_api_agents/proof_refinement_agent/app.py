"""ProofRefinementAgent: attempt, verify, and on failure try again with the verifier's feedback.

Compatible with NeMo Gym 0.7's proof_refinement_agent (same folder, config keys `max_correction_turns` and
`include_all_attempts`, verify-driven rule and result shape): after each attempt the resources server's
verify answer decides. If it says `needs_correction` and gives a `correction_prompt`, and turns remain,
that prompt becomes the next attempt's input; otherwise the rollout ends and the last verify answer is the
result, with `total_turns` and (by default) every attempt in `all_attempts`.

Servers that do not speak that protocol (every proof environment shipped here) can still drive the loop:
with `feedback_fields` set, a verify answer without `needs_correction` is judged by its reward against
`success_reward`, and the named fields of the answer become the feedback message of the next attempt. The
plumbing (model calls, cookies, usage sums, deadline, concurrency cap, verify, metrics proxy) is the core's
`nemo_gym.agents.rollout_agent`.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request, Response
from pydantic import Field

from nemo_gym.agents.rollout_agent import (
    Rollout,
    RolloutAgent,
    RolloutAgentConfig,
    RolloutRunRequest,
    summed_usage,
)
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming

ProofRefinementRunRequest = RolloutRunRequest
DEFAULT_FEEDBACK_TEMPLATE = (
    "Your previous answer was checked and is not accepted yet (reward {reward}). "
    "The checker's feedback:\n\n{feedback}\n\n"
    "Write a corrected, complete answer in the same format as before."
)


class ProofRefinementAgentConfig(RolloutAgentConfig):
    max_correction_turns: int = Field(
        default=0, ge=0, description="attempts after the first; 0 = one attempt, no correction (NeMo Gym)"
    )
    include_all_attempts: bool = Field(
        default=True, description="put every attempt's record in the result's `all_attempts` (NeMo Gym)"
    )
    feedback_fields: list[str] = Field(
        default=[],
        description="for servers without `needs_correction`: verify-answer fields whose text is the "
        "feedback of the next attempt; empty = only NeMo Gym's protocol",
    )
    success_reward: float = Field(
        default=1.0, description="with `feedback_fields`: a reward below this asks for a correction"
    )
    feedback_template: str = Field(
        default=DEFAULT_FEEDBACK_TEMPLATE,
        description="with `feedback_fields`: the feedback message; {feedback} and {reward} are filled in",
    )


class ProofRefinementAgent(RolloutAgent):
    config: ProofRefinementAgentConfig

    async def responses(
        self, request: Request, response: Response, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        """One attempt: a single model call, no verify; the model server's cookies are set on the answer."""
        params = _with_message_input(body.model_dump(mode="json", exclude_unset=True))
        rollout = Rollout.starting(dict(request.cookies))
        turn, cookies = await self.as_rollout(
            self.model_turn(self.config.model_server.name, params, rollout.model_cookies)
        )
        for name, value in cookies.items():
            response.set_cookie(name, value)
        return NeMoGymResponse.model_validate(turn)

    async def run(self, request: Request, body: ProofRefinementRunRequest) -> Response:
        """Seed the session, then attempt and verify until success, no feedback, or no attempt left."""
        return Response(await self.as_rollout(self._run(request, body)), media_type="application/json")

    async def _run(self, request: Request, body: ProofRefinementRunRequest) -> bytes:
        row = body.model_dump(mode="json", exclude_unset=True)
        rollout = await self.seeded_rollout(request, row)
        task_params = _with_message_input(row["responses_create_params"])
        params = task_params
        attempts: list[dict[str, Any]] = []
        usage: dict[str, Any] | None = None
        for turn_index in range(self.config.max_correction_turns + 1):
            turn, rollout.model_cookies = await self.model_turn(
                self.config.model_server.name, params, rollout.model_cookies
            )
            usage = summed_usage(usage, turn.get("usage"))
            verdict = _verify_answer(await self.verified({**row, "turn_index": turn_index}, turn, rollout))
            feedback = self._feedback(verdict)
            attempts.append(_attempt_record(turn_index, params, turn, verdict, feedback))
            if feedback is None or turn_index == self.config.max_correction_turns:
                break
            params = {**task_params, "input": self._next_input(params, turn, verdict, feedback)}
        result = {**verdict, "total_turns": len(attempts), "total_usage": usage}
        result["all_attempts"] = attempts if self.config.include_all_attempts else None
        return orjson.dumps(result)

    def _feedback(self, verdict: dict[str, Any]) -> str | None:
        """The text of the next attempt's feedback, or None when the rollout is over.

        NeMo Gym's rule first: a verify answer that has `needs_correction` decides alone (falsy: done; truthy
        without a `correction_prompt`: done). Otherwise, with `feedback_fields` configured, a reward below
        `success_reward` asks for a correction with the text of those fields (none present: done)."""
        if "needs_correction" in verdict:
            prompt = verdict.get("correction_prompt")
            return str(prompt) if verdict["needs_correction"] and prompt else None
        if not self.config.feedback_fields or _reward(verdict) >= self.config.success_reward:
            return None
        parts = [
            _as_text(verdict[name])
            for name in self.config.feedback_fields
            if verdict.get(name) not in (None, "", [], {})
        ]
        return "\n\n".join(parts) or None

    def _next_input(
        self, params: dict[str, Any], turn: dict[str, Any], verdict: dict[str, Any], feedback: str
    ) -> list[dict[str, Any]]:
        """A server's `correction_prompt` replaces the conversation with one user message (NeMo Gym); our
        own feedback continues it: the attempt's input, its assistant messages, then the feedback."""
        if "needs_correction" in verdict:
            return [{"role": "user", "content": feedback, "type": "message"}]
        answered = [item for item in turn.get("output") or [] if item.get("type") == "message"]
        message = self.config.feedback_template.format(feedback=feedback, reward=_reward(verdict))
        return [*params["input"], *answered, {"role": "user", "content": message, "type": "message"}]


def _with_message_input(params: dict[str, Any]) -> dict[str, Any]:
    if isinstance(params.get("input"), str):
        return {**params, "input": [{"role": "user", "content": params["input"], "type": "message"}]}
    return params


def _verify_answer(body: bytes) -> dict[str, Any]:
    verdict = orjson.loads(body)
    if not isinstance(verdict, dict):
        raise GymError(
            502, "invalid_verify_response", "the resources server's /verify answer is not an object"
        )
    return verdict


def _reward(verdict: dict[str, Any]) -> float:
    reward = verdict.get("reward", 0.0)
    return float(reward) if isinstance(reward, int | float) else 0.0


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _generation(turn: dict[str, Any]) -> str:
    """The text of the attempt's last output_text part ("" if none)."""
    texts = [
        part.get("text", "")
        for item in turn.get("output") or []
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    ]
    return texts[-1] if texts else ""


def _attempt_record(
    turn_index: int,
    params: dict[str, Any],
    turn: dict[str, Any],
    verdict: dict[str, Any],
    feedback: str | None,
) -> dict[str, Any]:
    """One attempt as NeMo Gym records it; without a server `correction_prompt`, the feedback built for a
    next attempt (None when the verdict asks for none)."""
    return {
        "turn_index": turn_index,
        "input": params,
        "response": turn,
        "generation": _generation(turn),
        "proof_status": verdict.get("proof_status", "unknown"),
        "reward": verdict.get("reward", 0.0),
        "error_feedback": verdict.get("error_feedback"),
        "correction_prompt": verdict.get("correction_prompt", feedback),
    }


if __name__ == "__main__":
    ProofRefinementAgent.run_webserver()
