"""Token-tracking client: an `openai.AsyncOpenAI` stand-in for trainers (the shape Verifiers reads).

`client.chat.completions.create(...)` goes to a Gym model server in training mode (`/chat/completions`
with `return_token_id_information: true`) and returns an `openai` `ChatCompletion` that also carries
`prompt_token_ids`, `choices[0].token_ids` and `choices[0].logprobs.content[j]` (`token`, `token_id`,
`logprob`). The caller keeps sending plain chat messages; this client remembers the assistant turns it
produced with their token data and puts that data back on them, so the server continues each prompt
token for token instead of re-tokenising the history. One client state is one rollout: `reset()` starts
the next, `copy()` shares the current one (with its cookies, which pin the rollout to one replica).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from nemo_gym.http_client import (
    checked_json,
    default_retry_policy,
    request,
    response_cookies,
)

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
TOKEN_ID_PREFIX = "token_id:"

MessageKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class _RecordedTurn:
    """An assistant message this client returned, where it sits in the conversation, and its token data."""

    position: int
    key: MessageKey
    token_fields: dict[str, list[Any]]


@dataclass
class RolloutState:
    """What the calls of one rollout share: the assistant turns produced so far and the server's cookies."""

    turns: list[_RecordedTurn] = field(default_factory=list)
    cookies: dict[str, str] = field(default_factory=dict)

    def clear(self) -> None:
        self.turns.clear()
        self.cookies.clear()


def _as_dict(message: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """Callers pass dicts or the SDK's message objects, as AsyncOpenAI accepts both."""
    if isinstance(message, BaseModel):
        return message.model_dump(mode="json", exclude_none=True)
    return dict(message)


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return str(content or "")


def message_key(message: Mapping[str, Any]) -> MessageKey:
    """What identifies an assistant turn when it comes back: its text and its calls (not the call ids,
    which callers may rewrite, nor optional fields they may drop)."""
    calls = tuple(
        (str(call["function"]["name"]), str(call["function"]["arguments"]))
        for call in message.get("tool_calls") or []
    )
    return _text_of(message.get("content")), calls


def with_token_fields(messages: list[dict[str, Any]], turns: Iterable[_RecordedTurn]) -> list[dict[str, Any]]:
    """The messages with each recorded turn's token data put back on it, when it is still where it was
    and unchanged; an edited or moved turn goes without, and the server tokenises it afresh."""
    tracked = list(messages)
    for turn in turns:
        if turn.position >= len(tracked):
            continue
        message = tracked[turn.position]
        if message.get("role") == "assistant" and message_key(message) == turn.key:
            tracked[turn.position] = {**message, **turn.token_fields}
    return tracked


def to_tracked_completion(answer: dict[str, Any]) -> tuple[ChatCompletion, dict[str, list[Any]]]:
    """The server's training answer reshaped as the SDK's completion with the trainer's fields, and the
    token data to remember for the generated message."""
    choice = answer["choices"][0]
    message = choice["message"]
    token_fields = {name: message.pop(name) for name in TOKEN_FIELDS}
    generated, log_probs = token_fields["generation_token_ids"], token_fields["generation_log_probs"]
    choice["token_ids"] = generated
    choice["logprobs"] = {
        "content": [
            {
                "token": f"{TOKEN_ID_PREFIX}{token_id}",
                "token_id": token_id,
                "logprob": log_prob,
                "top_logprobs": [],
            }
            for token_id, log_prob in zip(generated, log_probs, strict=True)
        ]
    }
    answer["prompt_token_ids"] = token_fields["prompt_token_ids"]
    return ChatCompletion.model_validate(answer), token_fields


class GymTokenClient:
    """AsyncOpenAI-compatible client that records token data across the turns of one rollout."""

    def __init__(
        self,
        base_url: str,
        api_key: str = "unused",
        model: str | None = None,
        *,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        state: RolloutState | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.state = state if state is not None else RolloutState()
        self.closed = False
        self.chat = _Chat(self)

    def reset(self) -> None:
        """Start a new rollout: no recorded turns, no cookies (so it may land on another replica). Copies
        share the state and start over too."""
        self.state.clear()

    def copy(self) -> GymTokenClient:
        """Another client on the same rollout, e.g. for a helper that must continue the same tokens."""
        return GymTokenClient(
            self.base_url,
            self.api_key,
            self.model,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            state=self.state,
        )

    async def close(self) -> None:
        """The HTTP pool is the process's, so closing only ends this client's use; safe to repeat."""
        self.closed = True

    async def __aenter__(self) -> GymTokenClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def post_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """One bounded call to the server's chat route, keeping its session cookies for the rollout."""
        if self.closed:
            raise RuntimeError("GymTokenClient is closed")
        policy = default_retry_policy()
        policy = policy.with_overrides(
            max_attempts=self.max_retries or policy.max_attempts,
            deadline_s=self.timeout_s or policy.deadline_s,
        )
        response = await request(
            "POST",
            f"{self.base_url}/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {self.api_key}"},
            cookies=dict(self.state.cookies),
            retry_policy=policy,
        )
        self.state.cookies.update(response_cookies(response))
        return await checked_json(response)


class _Completions:
    def __init__(self, client: GymTokenClient) -> None:
        self._client = client

    async def create(
        self,
        *,
        messages: Iterable[Mapping[str, Any] | BaseModel],
        model: str | None = None,
        n: int | None = None,
        stream: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ChatCompletion:
        """`params` are the chat body's fields (max_tokens or max_completion_tokens, temperature, top_p,
        tools, stop, ...); None values are left out, as the SDK leaves out unset ones."""
        if n not in (None, 1):
            raise ValueError("GymTokenClient generates one choice per call (n=1): token data is per rollout")
        if stream:
            raise ValueError("GymTokenClient does not stream: the token data comes with the whole answer")
        client = self._client
        sent = [_as_dict(message) for message in messages]
        body = {key: value for key, value in params.items() if value is not None}
        body.update(extra_body or {})
        body["messages"] = with_token_fields(sent, client.state.turns)
        if model or client.model:
            body["model"] = model or client.model
        completion, token_fields = to_tracked_completion(await client.post_chat(body))
        returned = completion.choices[0].message.model_dump(mode="json")
        client.state.turns.append(_RecordedTurn(len(sent), message_key(returned), token_fields))
        return completion


class _Chat:
    def __init__(self, client: GymTokenClient) -> None:
        self.completions = _Completions(client)
