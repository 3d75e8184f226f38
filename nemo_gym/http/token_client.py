"""Token-tracking client: an `openai.AsyncOpenAI` stand-in for trainers (the shape Verifiers reads).

`client.chat.completions.create(...)` goes to a Gym model server in training mode (`/chat/completions`
with `return_token_id_information: true`) and returns an `openai` `ChatCompletion` that also carries
`prompt_token_ids`, `choices[0].token_ids` and `choices[0].logprobs.content[j]` (`token`, `token_id`,
`logprob`); the message itself keeps `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`.

The caller may send plain chat messages back: the client finds each assistant turn it produced and puts
its token data back on it, so the server continues the prompt token for token instead of re-tokenising.
A turn is found by the whole conversation that ends with it, so any number of rollouts can share one
client, as AsyncOpenAI is shared. Two rollouts whose texts coincide but whose ids differ cannot be told
apart by text: the tool-call ids decide, and when even they do not, the turn goes without token data and
the answer is flagged (`token_continuity`) instead of guessed, as it is when a generation comes back
edited.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import openai
import orjson
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from nemo_gym.http.client import (
    DeadlineExceededError,
    HTTPStatusError,
    RequestFailedError,
    checked_json,
    default_retry_policy,
    request,
    response_cookies,
)
from nemo_gym.http.upstream import RATE_LIMIT_ERROR_CODES
from nemo_gym.text.extraction import content_text

try:  # the HTTP library of the installed openai: httpx2 from openai 3, httpx before
    import httpx2 as openai_httpx
except ImportError:  # pragma: no cover - depends on the installed openai
    import httpx as openai_httpx  # type: ignore[no-redef]

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
TOKEN_ID_PREFIX = "token_id:"
DEFAULT_MAX_REMEMBERED_TURNS = 100_000
# chat_template_kwargs reach the template only through metadata (a server forwards top-level ones only
# when configured to), which every Gym model server reads.
METADATA_CHAT_TEMPLATE_KWARGS = "chat_template_kwargs"
STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


@dataclass(frozen=True)
class _RecordedTurn:
    """The token data of one generated assistant message, with its tool-call ids to tell twins apart
    and a digest of the data (made once, so lookups compare digests, not id lists)."""

    call_ids: tuple[str, ...]
    token_fields: dict[str, list[Any]]
    fingerprint: bytes

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> _RecordedTurn:
        token_fields = {name: message[name] for name in TOKEN_FIELDS}
        data = orjson.dumps([token_fields[name] for name in TOKEN_FIELDS])
        return cls(_call_ids(message), token_fields, hashlib.sha256(data).digest())


@dataclass
class RolloutState:
    """What the clients sharing it remember: generated turns by conversation, and session cookies by
    conversation start (so each rollout keeps its replica). Both are bounded, least recently used first."""

    max_turns: int = DEFAULT_MAX_REMEMBERED_TURNS
    turns: OrderedDict[str, list[_RecordedTurn]] = field(default_factory=OrderedDict)
    # Conversations this client asked the model to continue: a different assistant message after one
    # of them is a generation edited on its way back.
    continued: OrderedDict[str, None] = field(default_factory=OrderedDict)
    cookies: OrderedDict[str, dict[str, str]] = field(default_factory=OrderedDict)

    def clear(self) -> None:
        self.turns.clear()
        self.continued.clear()
        self.cookies.clear()

    def remember(self, history_key: str, key: str, turn: _RecordedTurn) -> None:
        """`turn` was generated after the conversation `history_key`, making the conversation `key`."""
        recorded = self.turns.setdefault(key, [])
        if all(
            turn.fingerprint != known.fingerprint or turn.call_ids != known.call_ids for known in recorded
        ):
            recorded.append(turn)
        self.turns.move_to_end(key)
        self.continued[history_key] = None
        self.continued.move_to_end(history_key)
        _trim(self.turns, self.max_turns)
        _trim(self.continued, self.max_turns)

    def token_fields_for(self, key: str, call_ids: tuple[str, ...]) -> dict[str, list[Any]] | None:
        """The token data of the turn a conversation ends with, or None: unknown, or twins it cannot
        tell apart."""
        candidates = self.turns.get(key, [])
        if len({turn.fingerprint for turn in candidates}) > 1:
            candidates = [turn for turn in candidates if turn.call_ids == call_ids]
        if not candidates or len({turn.fingerprint for turn in candidates}) > 1:
            return None
        self.turns.move_to_end(key)
        return candidates[0].token_fields

    def cookies_for(self, key: str) -> dict[str, str]:
        jar = self.cookies.setdefault(key, {})
        self.cookies.move_to_end(key)
        _trim(self.cookies, self.max_turns)
        return jar


def _trim(entries: OrderedDict[str, Any], limit: int) -> None:
    while len(entries) > limit:
        entries.popitem(last=False)


def _as_dict(message: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """Callers pass dicts or the SDK's message objects, as AsyncOpenAI accepts both."""
    if isinstance(message, BaseModel):
        return message.model_dump(mode="json", exclude_none=True)
    return dict(message)


def _calls_of(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [call.get("function") or {} for call in message.get("tool_calls") or []]


def _call_ids(message: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(call.get("id", "")) for call in message.get("tool_calls") or [])


def _identity(message: Mapping[str, Any]) -> bytes:
    """What a message says, as the conversation key reads it: role, text and calls. Not the call ids (a
    caller may rewrite them) nor optional fields a caller may drop (reasoning, names)."""
    calls = [[str(call.get("name")), str(call.get("arguments"))] for call in _calls_of(message)]
    return orjson.dumps([message.get("role"), content_text(message.get("content")), calls])


@dataclass
class TrackedConversation:
    """The messages of one call, read once: with their token data put back, the `token_continuity`
    flag of the first generated turn that could not get its data, the key of the conversation start
    (its cookies) and the running digest of the whole conversation (the key of what it ends with)."""

    messages: list[dict[str, Any]]
    lost: dict[str, Any] | None
    start_key: str
    digest: Any  # hashlib's sha256 state

    def key_with(self, message: Mapping[str, Any]) -> str:
        """The key of this conversation continued by `message`."""
        digest = self.digest.copy()
        digest.update(_identity(message) + b"\n")
        return digest.hexdigest()


def with_token_fields(messages: list[dict[str, Any]], state: RolloutState) -> TrackedConversation:
    """Each assistant turn this client generated gets its token data again (a turn that already carries
    it, an SDK message sent back as returned, keeps its own). A turn is found by the digest of the
    conversation up to and including it, so it is never another conversation's."""
    tracked, lost, assistant_number = [], None, 0
    digest = hashlib.sha256()
    start_key = None
    for message in messages:
        history_key = digest.hexdigest()
        digest.update(_identity(message) + b"\n")
        if message.get("role") == "assistant":
            start_key = start_key or history_key
            assistant_number += 1
            key = digest.hexdigest()
            if "generation_token_ids" not in message:
                token_fields = state.token_fields_for(key, _call_ids(message))
                if token_fields is not None:
                    message = {**message, **token_fields}
                elif lost is None and not _is_blank(message):
                    lost = _lost_turn_flag(state, key, history_key, assistant_number)
        tracked.append(message)
    return TrackedConversation(tracked, lost, start_key or digest.hexdigest(), digest)


def _is_blank(message: Mapping[str, Any]) -> bool:
    """A turn the model generated nothing for (its prompt did not fit) has no token data to lose."""
    return not (content_text(message.get("content")).strip() or message.get("tool_calls"))


def _lost_turn_flag(state: RolloutState, key: str, history_key: str, number: int) -> dict[str, Any] | None:
    """Why a turn goes without token data, when the client knows it stands where a generation stood."""
    if key in state.turns:
        reason = "another conversation with the same text generated other ids, and nothing tells them apart"
    elif history_key in state.continued:
        reason = "it differs from what the model generated there (edited or re-serialised on its way back)"
    else:
        return None  # never generated after this history: the caller's own message
    return {
        "broken_at_turn": number,
        "reason": f"assistant turn {number} carries no token ids: {reason}, so its text was re-tokenised",
    }


def to_tracked_completion(answer: dict[str, Any]) -> ChatCompletion:
    """The server's training answer as the SDK's completion, with the trainer's fields added: the
    top-level `prompt_token_ids`, each choice's `token_ids` and per-token `logprobs`. A choice the model
    generated nothing for (the prompt did not fit) comes without them: there is nothing to train on."""
    for choice in answer["choices"]:
        message = choice["message"]
        if "generation_token_ids" not in message:
            continue
        generated, log_probs = message["generation_token_ids"], message["generation_log_probs"]
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
    first = answer["choices"][0]["message"] if answer["choices"] else {}
    if "prompt_token_ids" in first:
        answer["prompt_token_ids"] = first["prompt_token_ids"]
    return ChatCompletion.model_validate(answer)


def earliest_flag(*flags: dict[str, Any] | None) -> dict[str, Any] | None:
    """Of the server's and the client's `token_continuity`, the one at the earlier turn."""
    found = [flag for flag in flags if flag]
    return min(found, key=lambda flag: flag["broken_at_turn"], default=None)


def openai_error(error: HTTPStatusError | RequestFailedError, url: str) -> openai.OpenAIError:
    """A failed call as the error AsyncOpenAI raises for it, so a trainer's except clauses still catch it."""
    sent = openai_httpx.Request("POST", url)
    if isinstance(error, DeadlineExceededError):
        return openai.APITimeoutError(request=sent)
    if isinstance(error, RequestFailedError):
        return openai.APIConnectionError(message=str(error), request=sent)
    try:
        body = orjson.loads(error.response_content)
    except orjson.JSONDecodeError:
        body = error.response_content.decode("utf-8", errors="replace")
    details = body.get("error") if isinstance(body, dict) else None
    message = details.get("message") if isinstance(details, dict) else None
    response = openai_httpx.Response(error.status, request=sent, content=error.response_content)
    kind = STATUS_ERRORS.get(
        error.status, openai.InternalServerError if error.status >= 500 else openai.APIStatusError
    )
    return kind(f"Error code: {error.status} - {message or body}", response=response, body=body)


class GymTokenClient:
    """AsyncOpenAI-compatible client that records token data across the turns of its conversations.

    Like AsyncOpenAI, it retries a busy or unreachable server (429, 502, 503, 504, 520) with backoff, and
    `max_retries` counts retries after the first attempt (0 = one attempt; None = Gym's default attempts)."""

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
        """Forget every recorded turn and cookie (clients sharing the state forget them too)."""
        self.state.clear()

    def copy(self) -> GymTokenClient:
        """Another client that shares what this one remembers, e.g. for a helper of the same rollout."""
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

    async def post_chat(self, body: dict[str, Any], cookies: dict[str, str]) -> dict[str, Any]:
        """One bounded call to the server's chat route; `cookies` (the conversation's) are sent and
        updated. Failures are raised as openai's own error types."""
        if self.closed:
            raise RuntimeError("GymTokenClient is closed")
        policy = default_retry_policy()
        policy = policy.with_overrides(
            max_attempts=policy.max_attempts if self.max_retries is None else self.max_retries + 1,
            deadline_s=self.timeout_s or policy.deadline_s,
            retry_statuses=RATE_LIMIT_ERROR_CODES,
        )
        url = f"{self.base_url}/chat/completions"
        try:
            response = await request(
                "POST",
                url,
                json=body,
                headers={"Authorization": f"Bearer {self.api_key}"},
                cookies=dict(cookies),
                retry_policy=policy,
            )
            cookies.update(response_cookies(response))
            return await checked_json(response)
        except (HTTPStatusError, RequestFailedError) as error:
            raise openai_error(error, url) from error


def request_body(params: Mapping[str, Any], extra_body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The chat body: the SDK's parameters (None left out, as the SDK leaves out unset ones) with
    `extra_body` merged at the top level as AsyncOpenAI merges it, except `chat_template_kwargs`, which
    travels in `metadata` where the server always reads it."""
    body = {key: value for key, value in params.items() if value is not None}
    extra = dict(extra_body or {})
    template_kwargs = extra.pop(METADATA_CHAT_TEMPLATE_KWARGS, None)
    body.update(extra)
    if template_kwargs is not None:
        metadata = dict(body.get("metadata") or {})
        metadata[METADATA_CHAT_TEMPLATE_KWARGS] = orjson.dumps(template_kwargs).decode()
        body["metadata"] = metadata
    return body


class _Completions:
    def __init__(self, client: GymTokenClient) -> None:
        self._client = client

    async def create(
        self,
        *,
        messages: Iterable[Mapping[str, Any] | BaseModel],
        model: str | None = None,
        stream: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> ChatCompletion:
        """`params` are the chat body's fields (max_tokens or max_completion_tokens, temperature, top_p,
        tools, stop, n, ...); `extra_body` carries vLLM's own (top_k, min_p, repetition_penalty,
        chat_template_kwargs, ...)."""
        if stream:
            raise ValueError("GymTokenClient does not stream: the token data comes with the whole answer")
        client = self._client
        state = client.state
        sent = [_as_dict(message) for message in messages]
        body = request_body(params, extra_body)
        conversation = with_token_fields(sent, state)
        body["messages"] = conversation.messages
        if model or client.model:
            body["model"] = model or client.model
        answer = await client.post_chat(body, state.cookies_for(conversation.start_key))
        flag = earliest_flag(answer.get("token_continuity"), conversation.lost)
        if flag is not None:
            answer["token_continuity"] = flag
        completion = to_tracked_completion(answer)
        history_key = conversation.digest.hexdigest()
        for choice in completion.choices:
            returned = choice.message.model_dump(mode="json", exclude_none=True)
            if "generation_token_ids" not in returned:
                continue
            state.remember(history_key, conversation.key_with(returned), _RecordedTurn.of(returned))
        return completion


class _Chat:
    def __init__(self, client: GymTokenClient) -> None:
        self.completions = _Completions(client)
