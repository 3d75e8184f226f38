"""NeMo Gym 0.7 puts a rollout's identity in the URL: `/ng-rollout/<key>[/training-token-capture]/<path>`.

Every Gym server takes such a call as a call of `<path>`: the middleware strips the prefix before routing
and keeps the key (and whether training-token capture was asked) on the request, where
`rollout_key_of(request)` reads it, and in the context of the call's handling, so that calls made while
handling it can carry it on (`with_current_rollout_prefix`: an agent's model calls). A prefix whose key is not a valid
rollout key is left alone (a 404). An agent whose rollouts are captured and whose `/run` came without a
prefix takes the key from the body (`capture_key_of_run`, `enter_rollout`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.key_names import ATTEMPT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME
from nemo_gym.config.server_refs import ROLLOUT_PATH_PREFIX, TOKEN_CAPTURE_PATH_SEGMENT
from nemo_gym.wire.sessions import ROLLOUT_ID_PATTERN, EpisodeId

_PREFIX = f"/{ROLLOUT_PATH_PREFIX}/"
_CAPTURE = f"{TOKEN_CAPTURE_PATH_SEGMENT}/"
_KEY = re.compile(ROLLOUT_ID_PATTERN)
ROLLOUT_KEY_STATE = "ng_rollout_key"
TOKEN_CAPTURE_STATE = "ng_training_token_capture"
# (rollout key, training-token capture asked) of the call being handled; None outside a prefixed call.
_current: ContextVar[tuple[str, bool] | None] = ContextVar("gym_rollout_key", default=None)


class RolloutPrefixMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        split = split_rollout_path(scope["path"]) if scope["type"] == "http" else None
        if split is None:
            await self.app(scope, receive, send)
            return
        key, capture, path = split
        state = {**scope.get("state", {}), ROLLOUT_KEY_STATE: key, TOKEN_CAPTURE_STATE: capture}
        token = _current.set((key, capture))
        try:
            await self.app({**scope, "path": path, "raw_path": path.encode(), "state": state}, receive, send)
        finally:
            _current.reset(token)


def split_rollout_path(path: str) -> tuple[str, bool, str] | None:
    """(rollout key, training-token capture asked, the path under the prefix) of a prefixed path; None for
    a path without a valid prefix."""
    if not path.startswith(_PREFIX):
        return None
    key, slash, rest = path[len(_PREFIX) :].partition("/")
    if not slash or not _KEY.match(key):
        return None
    capture = rest.startswith(_CAPTURE)
    return key, capture, "/" + (rest[len(_CAPTURE) :] if capture else rest)


def episode_id_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The episode a run row stands for: its explicit `_ng_rollout_id`, else `<task index>-<rollout index>`,
    and its attempt (NeMo Gym 0.7's identity of a rollout)."""
    rollout_id = row.get(ROLLOUT_ID_KEY_NAME) or f"{row.get(TASK_INDEX_KEY)}-{row.get(ROLLOUT_INDEX_KEY)}"
    return {"rollout_id": str(rollout_id), "attempt": int(row.get(ATTEMPT_INDEX_KEY_NAME) or 0)}


def capture_key_of_run(body: Any) -> str | None:
    """The capture key of a `/run` body that came without a rollout prefix, or None when the body names no
    rollout (no `_ng_rollout_id` and no task and rollout indices)."""
    if not isinstance(body, Mapping):
        return None
    named = body.get(ROLLOUT_ID_KEY_NAME) is not None or all(
        isinstance(body.get(key), int) for key in (TASK_INDEX_KEY, ROLLOUT_INDEX_KEY)
    )
    if not named:
        return None
    try:
        return EpisodeId.model_validate(episode_id_of(body)).capture_key
    except (ValidationError, ValueError, TypeError):
        return None


def enter_rollout(key: str, *, token_capture: bool) -> None:
    """Carry rollout `key` (and whether to capture) on the calls the current request's handling makes, as
    if the request had come under its prefix."""
    _current.set((key, token_capture))


def rollout_key_of(request: Request) -> str | None:
    """The rollout key the call's URL carried, or None."""
    return getattr(request.state, ROLLOUT_KEY_STATE, None)


def rollout_path_prefix(rollout_id: str | None, *, token_capture: bool = False) -> str:
    """`/ng-rollout/<id>` (+ `/training-token-capture`): the path prefix NeMo Gym 0.7 puts a rollout's
    identity in; empty without an id."""
    if not rollout_id:
        return ""
    prefix = f"/{ROLLOUT_PATH_PREFIX}/{rollout_id}"
    return f"{prefix}/{TOKEN_CAPTURE_PATH_SEGMENT}" if token_capture else prefix


def with_current_rollout_prefix(path: str) -> str:
    """`path` under the prefix the call being handled came with (unchanged outside a prefixed call)."""
    current = _current.get()
    if current is None:
        return path
    key, capture = current
    return rollout_path_prefix(key, token_capture=capture) + path
