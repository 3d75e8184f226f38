"""A loopback relay between a CLI agent's CLI and the model server, recording the token ids of each call.

A CLI (claude, codex) speaks its own wire format to the model server (Anthropic Messages, streamed
Responses), and what it prints afterwards has no token ids. So each run's CLI is pointed at this relay
instead: `http://127.0.0.1:<port>/<ticket>/...` is forwarded to the model server's address for the run
(under the rollout's prefix), the answer goes back to the CLI unchanged (status, content type, bytes),
and the training-token fields the answer carries (`prompt_token_ids`, `generation_token_ids`,
`generation_log_probs`; in a JSON body or in the `data:` of its Server-Sent Events) are kept per call, in
order, for the agent to put on the trajectory.

The relay listens on 127.0.0.1 on a port of its own, one per agent process, so a CLI always reaches the
process that started it whatever the agent's worker count; a ticket is a random token that lives as long as
its run, and an unknown one gets a 404. Calls are forwarded with `nemo_gym.http.client` (its deadline,
cut to what is left of the run, and bounded retries); the model server answers a whole stream at once, so
nothing is lost by passing it on in one piece.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from nemo_gym.http.client import RequestFailedError, request
from nemo_gym.http.deadlines import budget
from nemo_gym.serving.token_capture import TOKEN_FIELDS

# Headers of the CLI's request that are the connection's, not the call's: the relay sets its own.
HOP_HEADERS = frozenset(
    {"host", "content-length", "connection", "transfer-encoding", "accept-encoding", "keep-alive"}
)
ANSWER_HEADERS = ("content-type", "cache-control", "retry-after", "request-id", "x-request-id")
# How much of an answer is searched for token fields (a bigger one is passed on all the same).
MAX_SCANNED_BYTES = 64 * 1024 * 1024


@dataclass
class RelayedRun:
    """One CLI run's way to the model server and what its calls answered."""

    target: str
    ends_at: float
    # Whether `target` is Gym's own model server, which alone is told the run's deadline in its header.
    to_gym_server: bool = False
    # Per model call, in order: its token fields, or None when its answer carried none.
    calls: list[dict[str, Any] | None] = field(default_factory=list)


class ModelCallRelay:
    """The relay of one agent process, started on first use."""

    def __init__(self) -> None:
        self._runs: dict[str, RelayedRun] = {}
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._starting = asyncio.Lock()

    @asynccontextmanager
    async def relayed(
        self, target: str, timeout_s: float, to_gym_server: bool = False
    ) -> AsyncIterator[tuple[str, RelayedRun]]:
        """For the duration of a run: the base URL its CLI uses in place of `target`, and its record."""
        async with self._starting:
            if self._runner is None:
                await self._start()
        ticket = secrets.token_urlsafe(16)
        run = RelayedRun(target.rstrip("/"), time.monotonic() + timeout_s, to_gym_server)
        self._runs[ticket] = run
        try:
            yield f"http://127.0.0.1:{self._port}/{ticket}", run
        finally:
            del self._runs[ticket]

    async def _start(self) -> None:
        app = web.Application(client_max_size=MAX_SCANNED_BYTES)
        app.router.add_route("*", "/{ticket}/{tail:.*}", self._relay)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        await web.SockSite(runner, listener).start()
        self._port = listener.getsockname()[1]
        self._runner = runner

    async def _relay(self, incoming: web.Request) -> web.StreamResponse:
        run = self._runs.get(incoming.match_info["ticket"])
        if run is None:
            return web.json_response({"error": {"message": "unknown relay ticket"}}, status=404)
        url = f"{run.target}/{incoming.match_info['tail']}"
        if incoming.query_string:
            url += f"?{incoming.query_string}"
        headers = {name: value for name, value in incoming.headers.items() if name.lower() not in HOP_HEADERS}
        try:
            with budget(max(0.0, run.ends_at - time.monotonic())):
                answer = await request(
                    incoming.method,
                    url,
                    data=await incoming.read(),
                    headers=headers,
                    _internal=run.to_gym_server,
                )
                body = await answer.read()
        except RequestFailedError as error:
            run.calls.append(None)
            return web.json_response({"error": {"message": str(error), "type": "relay_failed"}}, status=502)
        run.calls.append(token_fields_of(body[:MAX_SCANNED_BYTES]) if answer.status < 400 else None)
        kept = {name: answer.headers[name] for name in ANSWER_HEADERS if name in answer.headers}
        return web.Response(status=answer.status, body=body, headers=kept)


def token_fields_of(body: bytes) -> dict[str, Any] | None:
    """The token fields of a model call's answer: on the last object carrying `generation_token_ids`
    (the model servers put them on the turn's last output item), in a JSON body or an SSE stream."""
    found = None
    for document in _documents(body):
        for carrier in _objects(document):
            if isinstance(carrier.get("generation_token_ids"), list):
                found = {name: carrier.get(name) for name in TOKEN_FIELDS}
    return found


def _documents(body: bytes) -> Iterator[Any]:
    stripped = body.lstrip()
    payloads = [stripped] if stripped[:1] in (b"{", b"[") else []
    if not payloads:  # Server-Sent Events: one JSON document per `data:` line
        payloads = [line[5:].strip() for line in body.splitlines() if line.startswith(b"data:")]
    for payload in payloads:
        try:
            yield orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue  # `[DONE]`, or a line that is not JSON


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object in `value`, depth first in document order."""
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _objects(child)
    elif isinstance(value, list):
        for child in value:
            yield from _objects(child)
