"""One rollout's compaction: the view before each model call, the token prefix it may carry, the guards,
and the records a trainer reads back.

Before call k the policy (on the schedule) picks the view. If it only appends to the view of call k-1
plus everything call k-1 generated, the request carries `required_prefix_token_ids` = call k-1's prompt
ids + generation ids, so the model server's prompt starts with exactly the tokens the model saw and
produced (NeMo Gym's definition); otherwise the context was rewritten: that is a compaction, recorded as a
boundary event, and the call starts a new segment without a prefix. The rollout's own output keeps every
item of every call, token ids included, whatever the views left out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from nemo_gym.agents.rollout_agent import Rollout, cookies_after
from nemo_gym.http.client import checked_json
from nemo_gym.http.errors import GymError
from nemo_gym.http.rollout_paths import with_current_rollout_prefix
from responses_api_agents.simple_agent.app import ConversationView
from responses_api_agents.simple_agent_with_compaction.config import ContextHistoryConfig
from responses_api_agents.simple_agent_with_compaction.policy import (
    Origin,
    Piece,
    PolicyOutcome,
    image_parts,
    materialize,
    plan,
    whole,
)

if TYPE_CHECKING:
    from responses_api_agents.simple_agent_with_compaction.app import SimpleAgentWithCompaction

PREFIX_FIELD = "required_prefix_token_ids"


@dataclass(frozen=True)
class Measurements:
    prompt_tokens: int | None
    active_images: int


@dataclass(frozen=True)
class GuardCheck:
    name: str
    value: int
    limit: int

    @property
    def over(self) -> bool:
        return self.value > self.limit


@dataclass
class PreparedCall:
    """The request about to be sent for call `turn`, and how it relates to the last one."""

    turn: int
    outcome: PolicyOutcome
    input_items: list[dict[str, Any]]
    conversation_length: int
    append_compatible: bool  # shows the last call's view and all that call generated, unchanged
    prefix: list[int] | None
    boundary_id: str | None = None

    def body(self, params: dict[str, Any]) -> dict[str, Any]:
        """The request: the caller's parameters with this view as input, and the prefix if there is one."""
        body = {**params, "input": self.input_items}
        if self.prefix is not None:
            body[PREFIX_FIELD] = self.prefix
        return body


def view_digest(descriptor: tuple[str, ...]) -> str:
    return hashlib.sha256(orjson.dumps(descriptor)).hexdigest()[:16]


class CompactingView(ConversationView):
    """The view of one rollout of simple_agent_with_compaction (see the module docstring)."""

    def __init__(self, agent: SimpleAgentWithCompaction, settings: ContextHistoryConfig) -> None:
        self.agent = agent
        self.settings = settings
        self.origins: list[Origin] = []
        self.turn = 0
        self.epoch = 0
        self.pending: PreparedCall | None = None
        self.continuation: tuple[str, ...] | None = None  # last view + what its call generated
        self.last_view: tuple[str, ...] | None = None
        self.last_ids: list[int] | None = None
        self.outputs_of_last_call = 0
        # turn_chunked_recency: the frozen base of the current chunk, the conversation length it covers
        self.chunk_base: PolicyOutcome | None = None
        self.chunk_start = 0
        self.actions_in_chunk = 0
        self.chunk_index = -1
        self.boundary_events: list[dict[str, Any]] = []
        self.guard_records: list[dict[str, Any]] = []
        self.call_records: list[dict[str, Any]] = []
        self.rejected: dict[str, Any] | None = None

    # ---- the loop's hooks -------------------------------------------------------------------------------

    async def request(
        self, params: dict[str, Any], conversation: list[dict[str, Any]], rollout: Rollout
    ) -> dict[str, Any] | None:
        self._note_origins(conversation)
        self.turn += 1
        call = self._prepare(conversation)
        if self.settings.guards.any:
            call = await self._guarded(params, conversation, call, rollout)
            if call is None:
                return None
        if not call.append_compatible and self.last_view is not None:
            call.boundary_id = self._record_boundary(call)
        self.pending = call
        return call.body(params)

    def answered(self, turn: dict[str, Any]) -> None:
        call = self.pending
        assert call is not None, "answered() without a request"
        output = turn.get("output") or []
        generated = range(call.conversation_length, call.conversation_length + len(output))
        self.last_view = call.outcome.descriptor
        self.continuation = self.last_view + tuple(piece.name for piece in whole(generated))
        self.last_ids = _token_ids(output)
        self.outputs_of_last_call = len(output)
        self.call_records.append(
            {
                "turn_id": call.turn,
                "context_epoch": self.epoch,
                "expected_append_compatible": call.append_compatible,
                "required_prefix_token_count": len(call.prefix or []),
                "compaction_event_id": call.boundary_id,
                "input_item_count": len(call.input_items),
                "view_digest": view_digest(call.outcome.descriptor),
                "finish_reason": (turn.get("incomplete_details") or {}).get("reason"),
            }
        )
        if self.settings.schedule.type == "turn_chunked_recency":
            self.actions_in_chunk += 1
            if self.actions_in_chunk == self.settings.schedule.actions_per_chunk:
                self.chunk_base = None
        self.pending = None

    def finished(self, response: dict[str, Any]) -> dict[str, Any]:
        records = {
            "boundary_events": self.boundary_events,
            "guard_records": self.guard_records,
            "model_call_metadata": self.call_records,
        }
        if self.rejected is None:
            return {**response, **records}
        metadata = {
            **(response.get("metadata") or {}),
            "ng_termination_reason": "context_guard",
            "ng_termination_message": self.rejected["message"],
        }
        return {**response, **records, "status": "incomplete", "metadata": metadata}

    # ---- views ------------------------------------------------------------------------------------------

    def _note_origins(self, conversation: list[dict[str, Any]]) -> None:
        """Items new since the last call: what that call generated, then the observations that followed
        it (tool outputs); before the first call, the task's input."""
        new = len(conversation) - len(self.origins)
        by_model = min(self.outputs_of_last_call, new)
        self.origins += [Origin(self.turn, self.turn > 0 and n < by_model) for n in range(new)]

    def _prepare(self, conversation: list[dict[str, Any]]) -> PreparedCall:
        outcome = self._view(conversation)
        continuation = self.continuation
        appends = continuation is not None and outcome.descriptor[: len(continuation)] == continuation
        return PreparedCall(
            self.turn,
            outcome,
            materialize(outcome.pieces, conversation, self._marker()),
            len(conversation),
            appends,
            self.last_ids if appends else None,
        )

    def _view(self, conversation: list[dict[str, Any]]) -> PolicyOutcome:
        policy = self.settings.policy
        if self.settings.schedule.type == "rolling_recency":
            return plan(policy, conversation, self.origins, self.turn)
        if self.chunk_base is None:
            self.chunk_base = plan(policy, conversation, self.origins, self.turn)
            self.chunk_start = len(conversation)
            self.actions_in_chunk = 0
            self.chunk_index += 1
        tail: tuple[Piece, ...] = whole(range(self.chunk_start, len(conversation)))
        base = self.chunk_base
        return PolicyOutcome(base.pieces + tail, base.omitted_reasoning_items, base.omitted_images)

    def _marker(self) -> str | None:
        config = self.settings.policy.config
        images = getattr(config, "images", None)
        return images.omission_marker if images is not None else None

    def _record_boundary(self, call: PreparedCall) -> str:
        self.epoch += 1
        event_id = f"boundary-{call.turn:06d}-{view_digest(call.outcome.descriptor)[:12]}"
        assert self.last_view is not None
        self.boundary_events.append(
            {
                "event_id": event_id,
                "trigger_after_step": call.turn - 1,
                "applies_to_step": call.turn,
                "reason": "history_policy_rewrite",
                "policy_name": self.settings.policy.type,
                "schedule_name": self.settings.schedule.type,
                "chunk_index": self.chunk_index if self.chunk_base is not None else None,
                "previous_view_digest": view_digest(self.last_view),
                "current_view_digest": view_digest(call.outcome.descriptor),
                "retained_item_count": len(call.input_items),
                "omitted_reasoning_item_count": call.outcome.omitted_reasoning_items,
                "omitted_image_count": call.outcome.omitted_images,
            }
        )
        return event_id

    # ---- guards -----------------------------------------------------------------------------------------

    async def _guarded(
        self,
        params: dict[str, Any],
        conversation: list[dict[str, Any]],
        call: PreparedCall,
        rollout: Rollout,
    ) -> PreparedCall | None:
        """`call` if it fits the guards; else, on the chunked schedule with a chunk under way, the call
        after closing that chunk early (compacting now) if that fits; else None, the rollout ends."""
        exceeded = [check for check in self._checks(await self._measure(params, call, rollout)) if check.over]
        if not exceeded:
            return call
        after: dict[str, int] | None = None
        if self.chunk_base is not None and self.actions_in_chunk > 0:
            self.chunk_base = None
            call = self._prepare(conversation)
            after = {
                check.name: check.value for check in self._checks(await self._measure(params, call, rollout))
            }
        rejected = []
        for check in exceeded:
            post = None if after is None else after[check.name]
            admitted = post is not None and post <= check.limit
            if not admitted:
                rejected.append(check.name)
            self.guard_records.append(
                {
                    "applies_to_step": self.turn,
                    "guard_name": check.name,
                    "measured_value": check.value,
                    "configured_limit": check.limit,
                    "early_chunk_close": after is not None,
                    "post_compaction_value": post,
                    "decision": "admit_after_compaction" if admitted else "reject",
                }
            )
        if not rejected:
            return call
        message = f"model call {self.turn} does not fit the context guards ({', '.join(rejected)})"
        if self.turn == 1:
            raise GymError(422, "context_guard", f"{message}: the task's input alone is over the limit")
        self.rejected = {"message": f"{message}, compacted as far as the schedule allows"}
        return None

    async def _measure(self, params: dict[str, Any], call: PreparedCall, rollout: Rollout) -> Measurements:
        images = sum(len(image_parts(item)) for item in call.input_items)
        if self.settings.guards.max_total_tokens is None:
            return Measurements(None, images)
        answer = await self.agent.server_client.post(
            self.agent.config.model_server.name,
            with_current_rollout_prefix("/tokenize"),
            json=call.body(params),
            cookies=rollout.model_cookies,
        )
        rollout.model_cookies = cookies_after(answer, rollout.model_cookies)
        payload = await checked_json(answer)
        tokens = payload.get("tokens") if isinstance(payload, dict) else None
        if not isinstance(tokens, list):
            raise GymError(
                502,
                "invalid_model_response",
                f"model server '{self.agent.config.model_server.name}' /tokenize answered without a "
                "tokens list (guards.max_total_tokens needs a model server with /tokenize, such as "
                "vllm_model_with_compaction)",
            )
        return Measurements(len(tokens), images)

    def _checks(self, measured: Measurements) -> list[GuardCheck]:
        """Every configured guard that could be measured, with the request's value."""
        guards = self.settings.guards
        checks = []
        if guards.max_total_tokens is not None and measured.prompt_tokens is not None:
            total = measured.prompt_tokens + guards.reserved_generation_tokens
            checks.append(GuardCheck("max_total_tokens", total, guards.max_total_tokens))
        if guards.max_active_images is not None:
            checks.append(GuardCheck("max_active_images", measured.active_images, guards.max_active_images))
        if guards.max_vision_tokens is not None:
            vision = measured.active_images * (guards.projected_vision_tokens_per_image or 0)
            checks.append(GuardCheck("max_vision_tokens", vision, guards.max_vision_tokens))
        return checks


def _token_ids(output: list[dict[str, Any]]) -> list[int] | None:
    """The prompt + generation ids of a call, from its last output item (training mode puts them there);
    None when the model server gave none, and then no later call carries a prefix."""
    if not output:
        return None
    last = output[-1]
    prompt, generated = last.get("prompt_token_ids"), last.get("generation_token_ids")
    if not isinstance(prompt, list) or not isinstance(generated, list) or not generated:
        return None
    return [*prompt, *generated]
