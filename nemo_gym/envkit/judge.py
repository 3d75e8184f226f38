"""Calls to an LLM judge that are bounded, shared and typed when they fail.

An environment that grades with a judge model embeds `JudgeConfig` in its config and asks through
`Judge.ask()`. Every judgment has a deadline (queueing, retries and backoff included) and a bounded
number of calls; 429, 5xx, connection failures and timeouts are retried (honouring `Retry-After`),
nothing else is. The HTTP client is told not to retry, so these retries are the only ones on the way to
the judge model server (which may retry upstream on its own). The concurrency cap, the rate limit and
the circuit breaker belong to the judge model server, not to the environment: co-hosted environments
judging with the same server share one of each (per process: forked workers each have their own).
A judgment that cannot be had raises `JudgeFailed` carrying a `JudgeFailure` record, which the
environment puts in its verify answer: a broken judge must never look like a wrong answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import orjson
from pydantic import BaseModel, Field, ValidationError, model_validator

from nemo_gym.config.errors import ConfigError, ServerRefNotFoundError
from nemo_gym.config.server_refs import ModelServerRef
from nemo_gym.http.client import BadResponseError, ConnectionFailedError, RetryPolicy, parse_retry_after
from nemo_gym.serving.servers import ServerClient
from nemo_gym.telemetry import tracing
from nemo_gym.telemetry.metrics import record_breaker_state
from nemo_gym.text.extraction import one_line
from nemo_gym.text.redaction import without_url_passwords
from nemo_gym.wire.responses import (
    NeMoGymEasyInputMessage,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
    NeMoGymResponseOutputMessage,
    assistant_texts,
)

logger = logging.getLogger("nemo_gym.judge")

JudgeFailureKind = Literal["timeout", "rate_limited", "upstream_error", "bad_response", "circuit_open"]
MAX_MESSAGE_CHARS = 300
JUDGE_FAILURE_RATE_KEY = "judge_failure_rate"


class JudgeFailure(BaseModel):
    """Why a judgment could not be had; `attempts` counts the calls that reached the judge model server."""

    kind: JudgeFailureKind
    message: str
    attempts: int


class JudgeEvaluation(BaseModel):
    """One judge call as a verify answer records it: what the judge was asked and what it answered."""

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming
    response: NeMoGymResponse


class JudgeFailed(Exception):
    def __init__(self, failure: JudgeFailure) -> None:
        super().__init__(f"{failure.kind}: {failure.message}")
        self.failure = failure


class JudgeConfig(BaseModel):
    """Judge settings an environment config inherits: flat keys, as in NeMo Gym's judge environments.

    Limits (per judge model server and process): calls in flight, calls started per second (token bucket
    of `judge_rate_limit_burst`), the circuit breaker. Per judgment: deadline, calls, backoff. Null turns a
    limit off. `judge_failure_reward` is the reward of a rollout whose judgment failed.
    """

    judge_model_server: ModelServerRef | None = None
    judge_responses_create_params: NeMoGymResponseCreateParamsNonStreaming = Field(
        default_factory=lambda: NeMoGymResponseCreateParamsNonStreaming(input=[])
    )
    judge_endpoint_max_concurrency: int | None = Field(default=64, ge=1)
    judge_rate_limit_rps: float | None = Field(default=None, gt=0)
    judge_rate_limit_burst: int = Field(default=1, ge=1)
    judge_deadline_s: float = Field(default=300.0, gt=0)
    judge_max_attempts: int = Field(default=3, ge=1)
    judge_backoff_base_s: float = Field(default=1.0, gt=0)
    judge_backoff_max_s: float = Field(default=30.0, gt=0)
    judge_circuit_breaker_failures: int | None = Field(default=20, ge=1)
    judge_circuit_breaker_window_s: float = Field(default=60.0, gt=0)
    judge_circuit_breaker_cooldown_s: float = Field(default=30.0, gt=0)
    judge_failure_reward: float = Field(default=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _backoff_in_order(self) -> JudgeConfig:
        if self.judge_backoff_max_s < self.judge_backoff_base_s:
            raise ValueError("judge_backoff_max_s must be at least judge_backoff_base_s")
        return self


# The settings every environment judging with one model server in one process must agree on.
SHARED_PREFIXES = ("judge_endpoint_", "judge_rate_limit_", "judge_circuit_breaker_")


class TokenBucket:
    """Starts at most `rate` calls a second, `burst` of them back to back; waiters are served in order."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.updated = float(burst), time.monotonic()
        self._turn = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    async def take(self) -> None:
        async with self._turn:
            self._refill()
            while self.tokens < 1:
                await asyncio.sleep((1 - self.tokens) / self.rate)
                self._refill()
            self.tokens -= 1


Admission = Literal["normal", "trial"]
Unusable = Callable[[NeMoGymResponse], str | None]


class CircuitBreaker:
    """Closed: every judgment goes through. `failures` failed judgments within `window_s` open it: judgments
    then fail at once for `cooldown_s`. After that one trial judgment goes through (half-open): success
    closes the circuit, failure opens it for another cool-down."""

    def __init__(
        self, failures: int, window_s: float, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold, self.window_s, self.cooldown_s, self.clock = failures, window_s, cooldown_s, clock
        self.recent_failures: deque[float] = deque()
        self.opened_at: float | None = None
        self.trial_running = False

    def admit(self) -> Admission | None:
        if self.opened_at is None:
            return "normal"
        if self.clock() - self.opened_at < self.cooldown_s or self.trial_running:
            return None
        self.trial_running = True
        return "trial"

    def record(self, admission: Admission, succeeded: bool | None) -> None:
        """`succeeded` is None when the judgment was abandoned (its caller went away): no evidence either way."""
        now = self.clock()
        if admission == "trial":
            self.trial_running = False
            if succeeded is not None:
                self.opened_at = None if succeeded else now
                self.recent_failures.clear()
            return
        if succeeded is not False or self.opened_at is not None:
            return
        self.recent_failures.append(now)
        while self.recent_failures[0] < now - self.window_s:
            self.recent_failures.popleft()
        if len(self.recent_failures) >= self.threshold:
            self.opened_at = now
            self.recent_failures.clear()


class JudgeGate:
    """What the environments judging with one model server share within a process."""

    def __init__(self, config: JudgeConfig) -> None:
        self.limits = {
            key: getattr(config, key) for key in JudgeConfig.model_fields if key.startswith(SHARED_PREFIXES)
        }
        cap, rate = config.judge_endpoint_max_concurrency, config.judge_rate_limit_rps
        self.slots = asyncio.Semaphore(cap) if cap is not None else None
        self.bucket = TokenBucket(rate, config.judge_rate_limit_burst) if rate is not None else None
        self.breaker = None
        if config.judge_circuit_breaker_failures is not None:
            self.breaker = CircuitBreaker(
                config.judge_circuit_breaker_failures,
                config.judge_circuit_breaker_window_s,
                config.judge_circuit_breaker_cooldown_s,
            )


_gates: dict[str, JudgeGate] = {}


def shared_gate(server_name: str, config: JudgeConfig) -> JudgeGate:
    """The process's gate for this judge model server; a second environment must ask for the same limits."""
    gate = _gates.get(server_name)
    if gate is None:
        return _gates.setdefault(server_name, JudgeGate(config))
    for key, theirs in gate.limits.items():
        if getattr(config, key) != theirs:
            raise ConfigError(
                f"{key} is {getattr(config, key)} here but {theirs} for another environment of this process "
                f"judging with model server '{server_name}'; environments sharing a judge must agree on it"
            )
    return gate


@dataclass(frozen=True)
class _Problem:
    kind: JudgeFailureKind
    message: str
    retryable: bool
    retry_after_s: float | None = None


class Judge:
    """Asks the configured judge model server's `/v1/responses` on behalf of one environment."""

    def __init__(self, config: JudgeConfig, server_client: ServerClient, owner: str) -> None:
        if config.judge_model_server is None:
            raise ConfigError("judge_model_server is not set: name the model server that judges")
        self.config, self.server_client, self.owner = config, server_client, owner
        self.server = config.judge_model_server.name
        try:
            server_client.server_base_url(self.server)
        except ServerRefNotFoundError:  # `gym run` refuses such a config; a server started alone may have it
            logger.warning(
                "%s: judge model server '%s' is not in the config: judgments will fail", owner, self.server
            )
        self.gate = shared_gate(self.server, config)
        # When to call again: the HTTP client's schedule, with the judge's attempts and backoff.
        self.schedule = RetryPolicy(
            max_attempts=config.judge_max_attempts,
            backoff_base_s=config.judge_backoff_base_s,
            backoff_max_s=config.judge_backoff_max_s,
        )

    def params_for(self, messages: list[dict[str, str]]) -> NeMoGymResponseCreateParamsNonStreaming:
        """The configured judge settings with `messages` as the input."""
        settings = self.config.judge_responses_create_params.model_dump(mode="json", exclude_unset=True)
        return NeMoGymResponseCreateParamsNonStreaming.model_validate({**settings, "input": messages})

    async def ask(
        self, params: NeMoGymResponseCreateParamsNonStreaming, unusable: Unusable | None = None
    ) -> NeMoGymResponse:
        """One judgment: the judge's response, or `JudgeFailed` (logged here, one line). `unusable(response)`
        says what is wrong with an answer the environment cannot read (a `bad_response`), else None."""
        breaker = self.gate.breaker
        admission = breaker.admit() if breaker is not None else "normal"
        if admission is None:
            message = "circuit open after repeated judge failures: no call made"
            self._fail(JudgeFailure(kind="circuit_open", message=message, attempts=0))
        succeeded: bool | None = None
        try:
            with tracing.span("gym.judge", {"nemo.gym.judge.server": self.server}):
                schedule = (
                    self.schedule.with_overrides(max_attempts=1) if admission == "trial" else self.schedule
                )
                response = await self._judgment(params, schedule, unusable)
            succeeded = True
            return response
        except JudgeFailed:
            succeeded = False
            raise
        finally:
            if breaker is not None and admission is not None:
                was_open = breaker.opened_at is not None
                breaker.record(admission, succeeded)
                if was_open != (breaker.opened_at is not None):
                    state = "opened" if breaker.opened_at is not None else "closed"
                    logger.warning("judge model server '%s': circuit %s", self.server, state)
                    record_breaker_state(self.server, breaker.opened_at is not None)

    async def _judgment(
        self,
        params: NeMoGymResponseCreateParamsNonStreaming,
        schedule: RetryPolicy,
        unusable: Unusable | None,
    ) -> NeMoGymResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.judge_deadline_s
        calls = [0]
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    outcome = await self._call(params, deadline, calls)
                    if isinstance(outcome, NeMoGymResponse):
                        problem = unusable(outcome) if unusable is not None else None
                        if problem is None:
                            return outcome
                        outcome = _Problem("bad_response", _one_line(problem), retryable=False)
                    delay = None
                    if outcome.retryable:
                        delay = schedule.next_delay(calls[0], outcome.retry_after_s, deadline - loop.time())
                    if delay is None:
                        self._fail(
                            JudgeFailure(kind=outcome.kind, message=outcome.message, attempts=calls[0])
                        )
                    await asyncio.sleep(delay)
        except TimeoutError:
            message = f"no judgment within the {self.config.judge_deadline_s:g} s deadline"
            self._fail(JudgeFailure(kind="timeout", message=message, attempts=calls[0]))

    async def _call(
        self, params: NeMoGymResponseCreateParamsNonStreaming, deadline: float, calls: list[int]
    ) -> NeMoGymResponse | _Problem:
        """One call within the shared cap and rate; the HTTP client does not retry (this layer does)."""
        async with self.gate.slots or contextlib.nullcontext():
            if self.gate.bucket is not None:
                await self.gate.bucket.take()
            calls[0] += 1
            policy = RetryPolicy(
                max_attempts=1, deadline_s=max(0.001, deadline - asyncio.get_running_loop().time())
            )
            try:
                answer = await self.server_client.post(
                    self.server, "/v1/responses", json=params, retry_policy=policy
                )
                body = await answer.read()
            except ConnectionFailedError as error:
                return _Problem("upstream_error", _one_line(error.reason), retryable=True)
            except ServerRefNotFoundError:
                return _Problem("upstream_error", f"no model server '{self.server}' in the config", False)
            except BadResponseError as error:
                return _Problem("bad_response", _one_line(error.reason), retryable=True)
        return _classify(answer.status, answer.headers.get("Retry-After"), body)

    def _fail(self, failure: JudgeFailure) -> NoReturn:
        logger.warning(
            "%s: judgment by '%s' failed: %s after %d call(s): %s",
            self.owner, self.server, failure.kind, failure.attempts, failure.message,
        )  # fmt: skip
        raise JudgeFailed(failure)


def _classify(status: int, retry_after: str | None, body: bytes) -> NeMoGymResponse | _Problem:
    if 200 <= status < 300:
        try:
            return NeMoGymResponse.model_validate(orjson.loads(body))
        except (orjson.JSONDecodeError, ValidationError) as error:
            return _Problem(
                "bad_response", _one_line(f"HTTP {status} answer is not a response: {error}"), False
            )
    error_type, detail = _error_detail(body)
    message = _one_line(f"HTTP {status}: {detail}")
    if status == 429:
        return _Problem("rate_limited", message, True, parse_retry_after(retry_after))
    if status >= 500:
        kind: JudgeFailureKind = "upstream_error"
        if error_type == "bad_upstream_response":
            kind = "bad_response"
        elif status == 504 or error_type == "timeout":
            kind = "timeout"
        return _Problem(kind, message, True, parse_retry_after(retry_after))
    return _Problem("upstream_error", message, False)


def _error_detail(body: bytes) -> tuple[str | None, str]:
    """The Gym error type and the innermost error message of an error body (a model server's error
    nests its upstream's as `cause`); the raw text when the body is not such an error."""
    try:
        error: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, body[:MAX_MESSAGE_CHARS].decode("utf-8", errors="replace")
    error_type, detail = None, ""
    while isinstance(error, Mapping):
        inner = error.get("error", error)
        if not isinstance(inner, Mapping):
            break
        error_type = error_type or (inner.get("type") if isinstance(inner.get("type"), str) else None)
        detail = inner["message"] if isinstance(inner.get("message"), str) else detail
        error = inner.get("cause")
    return error_type, detail or "no error message"


def _one_line(text: str) -> str:
    return one_line(without_url_passwords(text), MAX_MESSAGE_CHARS, ellipsis="")


def last_assistant_text(response: NeMoGymResponse) -> str:
    """The text parts of the last assistant message, joined by newlines and stripped ("" if none): the
    answer a judge is shown, and the judge's own answer."""
    for item in reversed(response.output):
        if (
            isinstance(item, NeMoGymResponseOutputMessage | NeMoGymEasyInputMessage)
            and item.role == "assistant"
        ):
            return "\n".join(assistant_texts(item)).strip()
    return ""


def judge_failure_metrics(tasks: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """`judge_failure_rate` (share of rollouts whose judgment failed) and `judge_failures/<kind>` counts."""
    rollouts = [rollout for task in tasks for rollout in task]
    kinds = [
        str(failure.get("kind"))
        for rollout in rollouts
        if isinstance(failure := rollout.get("judge_failure"), Mapping)
    ]
    metrics = {JUDGE_FAILURE_RATE_KEY: len(kinds) / len(rollouts) if rollouts else 0.0}
    metrics.update({f"judge_failures/{kind}": count for kind, count in sorted(Counter(kinds).items())})
    return metrics
