"""Training-token capture on a model server: the file sink of NeMo Gym 0.7's `token_id_capture` block.

A `/v1/responses`, `/v1/chat/completions` or `/v1/messages` call that arrives under
`/ng-rollout/<key>/training-token-capture/` (an environment server asked for it, see
`nemo_gym.config.token_id_capture`) is recorded as one JSON line appended to `<dir>/<key>.jsonl`: the rollout key, the route, the call's index within the rollout (order of
arrival at this process), the answer's status and the token fields the answer carries, with explicit nulls
and `"token_ids_available": false` when it carries none (an upstream without token data, an error).

The line is written before the answer is sent, so a caller that has its answer finds the line on disk.
Each line goes in one `write` to a file opened for appending, in a worker thread: concurrent calls never
interleave within a line, a crash never leaves a torn line behind a normal write, and the event loop is
not held by the disk.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nemo_gym.http.errors import error_body
from nemo_gym.http.rollout_paths import split_rollout_path

logger = logging.getLogger("nemo_gym.token_capture")

CAPTURED_ROUTES = frozenset(
    {("POST", "/v1/responses"), ("POST", "/v1/chat/completions"), ("POST", "/v1/messages")}
)
# Routes whose answer is recorded in the Responses shape (`/v1/messages` records the Responses answer it
# was made from: the Anthropic message has no place for token ids).
RESPONSES_SHAPED_ROUTES = frozenset({"/v1/responses", "/v1/messages"})
TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
# The Responses output items a model generates (the token fields go on them); others (reasoning) are not.
GENERATED_ITEM_TYPES = frozenset({"message", "function_call"})
# Where a route that answers in Server-Sent Events leaves the whole answer it made them from (a list in the
# request's scope), so the line records it as it records a plain JSON answer.
BUFFERED_ANSWER_KEY = "gym.buffered_answer"
# Rollout keys whose call count is kept; the oldest is forgotten first, so memory stays bounded in a
# long training run (a rollout whose calls are far apart by that much is numbered afresh).
MAX_COUNTED_ROLLOUTS = 65_536


class CaptureFiles:
    """Where captured calls go and how each rollout's calls are numbered."""

    def __init__(self, directory: Path, routes: frozenset[tuple[str, str]]) -> None:
        self.directory = directory
        self.routes = routes
        self._calls: OrderedDict[str, int] = OrderedDict()

    def next_index(self, rollout_key: str) -> int:
        index = self._calls.pop(rollout_key, 0)
        self._calls[rollout_key] = index + 1
        if len(self._calls) > MAX_COUNTED_ROLLOUTS:
            self._calls.popitem(last=False)
        return index

    async def append(self, rollout_key: str, record: dict[str, Any]) -> None:
        line = orjson.dumps(record) + b"\n"
        await asyncio.to_thread(_append_line, self.directory / f"{rollout_key}.jsonl", line)


def _append_line(path: Path, line: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(descriptor, line)
        if written != len(line):  # a full disk: what got out is not a line, so say so rather than go on
            raise OSError(f"wrote {written} of {len(line)} bytes to {path}")
    finally:
        os.close(descriptor)


def keep_buffered_answer(scope: Scope, answer: dict[str, Any]) -> None:
    """Record `answer` as the call's answer (a streamed call: its body is events, not the answer)."""
    buffered = scope.get(BUFFERED_ANSWER_KEY)
    if buffered is not None:
        buffered.append(answer)


def captured_routes(non_generating: list[tuple[str, str]]) -> frozenset[tuple[str, str]]:
    """The routes recorded: both generating routes, less those the server's config calls non-generating."""
    excluded = {(method.upper(), "/" + path.strip("/")) for method, path in non_generating}
    return CAPTURED_ROUTES - excluded


def capture_record(rollout_key: str, route: str, index: int, status: int, body: bytes) -> dict[str, Any]:
    """The line of one call: the token fields of each generated item (Responses) or choice (chat)."""
    answer = _json_object(body) if status < 400 else None
    outputs = None
    if answer is not None and route in RESPONSES_SHAPED_ROUTES:
        outputs = [
            {"type": item.get("type"), **_token_fields(item)}
            for item in answer.get("output") or []
            if isinstance(item, dict) and item.get("type") in GENERATED_ITEM_TYPES
        ]
    elif answer is not None:
        outputs = [
            {"choice_index": choice.get("index"), **_token_fields(choice.get("message") or {})}
            for choice in answer.get("choices") or []
            if isinstance(choice, dict)
        ]
    available = any(output["generation_token_ids"] is not None for output in outputs or [])
    return {
        "rollout_key": rollout_key,
        "route": route,
        "call_index": index,
        "status": status,
        "token_ids_available": available,
        "outputs": outputs,
    }


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return answer if isinstance(answer, dict) else None


def _token_fields(carrier: dict[str, Any]) -> dict[str, Any]:
    return {field: carrier.get(field) for field in TOKEN_FIELDS}


class TokenCaptureMiddleware:
    """Records the captured calls of a model server (outermost, so it sees the answer as sent, error
    bodies included; of a streamed answer, the answer it was made from). The answer is held until its
    line is written (a stream too: it then arrives whole, once the line is on disk); a call whose line cannot be written
    fails with a 500, since a trainer relying on the capture must not get a turn it has no record of."""

    def __init__(self, app: ASGIApp, files: CaptureFiles, server_label: str) -> None:
        self.app = app
        self.files = files
        self.server_label = server_label

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        split = split_rollout_path(scope["path"]) if scope["type"] == "http" else None
        if split is None or not split[1] or (scope["method"], split[2]) not in self.files.routes:
            await self.app(scope, receive, send)
            return
        key, _, route = split
        index = self.files.next_index(key)
        held: list[Message] = []
        buffered: list[dict[str, Any]] = []

        async def hold(message: Message) -> None:
            held.append(message)

        await self.app({**scope, BUFFERED_ANSWER_KEY: buffered}, receive, hold)
        status = next(
            (message["status"] for message in held if message["type"] == "http.response.start"), 500
        )
        body = (
            orjson.dumps(buffered[-1])
            if buffered
            else b"".join(
                message.get("body", b"") for message in held if message["type"] == "http.response.body"
            )
        )
        try:
            await self.files.append(key, capture_record(key, route, index, status, body))
        except OSError as error:
            logger.error(
                "%s: could not record call %d of rollout %s: %s", self.server_label, index, key, error
            )
            held = _error_messages(self.server_label, f"training-token capture failed: {error}")
        for message in held:
            await send(message)


def _error_messages(server_label: str, message: str) -> list[Message]:
    body = orjson.dumps(error_body("token_capture_failed", 500, message, server_label))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return [
        {"type": "http.response.start", "status": 500, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]
