"""One call of a user-hosted agent service's `POST /v1/responses`, with every way it can fail named.

The service is outside Gym, so nothing about it is trusted: its address is checked once at start, each call
has its own deadline and a bounded number of attempts, a redirect is never followed, and what comes back
must be a Responses API object. Failures map to statuses a trainer can act on: a refusal (4xx) is terminal
and keeps its status; a service that stays unavailable or answers nonsense is a 502, one too slow a 504.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr, ValidationError

from nemo_gym.http.client import (
    BadResponseError,
    DeadlineExceededError,
    RequestFailedError,
    RetryPolicy,
    get_response_json,
    request,
    response_cookies,
)
from nemo_gym.http.deadlines import bounded
from nemo_gym.http.errors import GymError
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.wire.validation_errors import first_problem

# Answers that say "not now" rather than "never": retried with backoff, honouring Retry-After.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_SHOWN_BODY_CHARS = 500
MASK = "****"


def checked_base_url(url: str) -> str:
    """`agent_base_url` without its trailing slash; refused unless it is an absolute http(s) URL with no
    query, fragment or credentials (`/v1/responses` is appended to it, and it shows up in logs)."""
    normalized = url.strip().rstrip("/")
    parts = urlsplit(normalized)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"agent_base_url must be an absolute http:// or https:// URL, got {url!r}")
    if "?" in normalized or "#" in normalized:
        raise ValueError(
            "agent_base_url must not carry a query string or fragment: /v1/responses is appended"
        )
    if parts.username or parts.password:
        raise ValueError(
            "agent_base_url must not hold credentials (user:pass@host); set agent_api_key instead"
        )
    return normalized


class RemoteService:
    """The remote agent service at `base_url`, called with the auth header and bounds of the config."""

    def __init__(
        self, base_url: str, auth_header: str, api_key: SecretStr | None, policy: RetryPolicy
    ) -> None:
        self.url = f"{base_url}/v1/responses"
        self._api_key = api_key
        self._policy = policy
        self._headers = {}
        if api_key is not None:
            value = api_key.get_secret_value()
            self._headers[auth_header] = (
                f"Bearer {value}" if auth_header.lower() == "authorization" else value
            )

    async def respond(
        self, body: dict[str, Any], cookies: dict[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The service's Response to `body`, and the cookies to send it next (its own, kept per rollout)."""
        allowed_s = bounded(self._policy.deadline_s)  # the rollout may have less left than a call's deadline
        try:
            answer = await request(
                "POST",
                self.url,
                json=body,
                cookies=cookies,
                headers=self._headers,
                retry_policy=self._policy,
                idempotent=True,  # each call carries the whole conversation: sending it again is harmless
                allow_redirects=False,
            )
        except DeadlineExceededError as error:
            limit = (
                f"remote_responses_timeout_secs={self._policy.deadline_s:g}s; raise it if its turns "
                "legitimately take longer"
                if allowed_s >= self._policy.deadline_s
                else f"the {allowed_s:.3g}s the rollout had left of its deadline"
            )
            raise GymError(
                504,
                "remote_agent_timeout",
                f"the remote agent service at {self.url} gave no whole answer within {limit} ({error.reason})",
            ) from error
        except RequestFailedError as error:
            raise GymError(
                502,
                "remote_agent_unreachable",
                f"the remote agent service at {self.url} could not be used after {error.attempts or 1} "
                f"attempt(s): {error.reason}; is it running there?",
            ) from error
        if not 200 <= answer.status < 300:
            raise self._refusal(answer.status, await answer.read(), answer.headers.get("Location"))
        try:
            turn = await get_response_json(answer)
        except BadResponseError as error:
            raise _invalid(f"{self.url} answered something that is not JSON ({error.reason})") from error
        if not isinstance(turn, dict):
            raise _invalid(f"{self.url} answered a JSON {type(turn).__name__}, not a Response object")
        try:
            NeMoGymResponse.model_validate(turn)
        except ValidationError as error:
            raise _invalid(
                f"{self.url} answered an invalid Responses API object: {error.error_count()} problem(s), "
                f"first: {first_problem(error)}"
            ) from error
        return turn, {**cookies, **response_cookies(answer)}

    def _refusal(self, status: int, body: bytes, location: str | None) -> GymError:
        """A non-2xx answer: a redirect (never followed) or a 5xx still there after the retries is a 502; a
        4xx is terminal, keeps its status and carries the service's body (any echo of the key masked)."""
        shown = body.decode("utf-8", errors="replace")
        if self._api_key is not None and (key := self._api_key.get_secret_value()):
            shown = shown.replace(key, MASK)
        shown = shown[:MAX_SHOWN_BODY_CHARS]
        if 300 <= status < 400:
            return GymError(
                502,
                "remote_agent_redirect",
                f"the remote agent service at {self.url} answered HTTP {status} (redirect to {location!r}); "
                "redirects are not followed: set agent_base_url to the final address",
            )
        if status >= 500 or status in RETRYABLE_STATUSES:
            return GymError(
                502 if status != 429 else 429,
                "remote_agent_unavailable",
                f"the remote agent service at {self.url} answered HTTP {status} on every attempt",
                cause=shown,
            )
        return GymError(
            status,
            "remote_agent_refused",
            f"the remote agent service at {self.url} refused the request with HTTP {status}; retrying will not help",
            cause=shown,
        )


def _invalid(message: str) -> GymError:
    return GymError(502, "invalid_remote_response", f"the remote agent service at {message}")
