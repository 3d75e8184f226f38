"""Environment servers (NeMo Gym 0.7) run episodes: a collector POSTs one attempt at one task to `/run`
and gets back exactly one of a result or a failure, always with HTTP 200 once the body is valid.

The base does what every episode needs around the environment's own `run()`: an optional admission limit
(episodes wait their turn for at most `queue_timeout_seconds`), a deadline, cleanup callbacks that always
run (last registered first, within `cleanup_timeout_seconds` in total, even when the episode failed, timed
out or was cancelled), and the check that the answer names the episode and task it was asked about.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from fastapi import FastAPI
from pydantic import ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from nemo_gym.config.metrics_bodies import AggregateMetrics as AggregateMetrics
from nemo_gym.config.metrics_bodies import AggregateMetricsRequest as AggregateMetricsRequest
from nemo_gym.config.server_instances import BaseRunServerInstanceConfig
from nemo_gym.http.client import default_retry_policy
from nemo_gym.http.deadlines import budget, detached_budget
from nemo_gym.http.errors import GymError
from nemo_gym.serving.servers import SimpleServer, new_app
from nemo_gym.wire.episodes import (
    BaseEpisodeRequest,
    BaseEpisodeResponse,
    EpisodeFailure,
    shortened_reason,
)
from nemo_gym.wire.sessions import EpisodeId

logger = logging.getLogger("nemo_gym.environment_server")

CleanupCallback = Callable[[], Awaitable[Any]]
CALL_BUDGET_MARGIN_S = 1.0
EPISODE_TIMED_OUT = EpisodeFailure(failure_reason="Episode timed out", terminal=False)


class BaseEnvironmentServerConfig(BaseRunServerInstanceConfig):
    model_config = ConfigDict(extra="forbid")

    max_concurrent_episodes: PositiveInt | None = Field(
        default=None, description="episodes run at once; null = no limit"
    )
    queue_timeout_seconds: PositiveFloat | None = Field(
        default=None, description="how long an episode may wait for a slot (required with a limit)"
    )
    default_episode_timeout_seconds: PositiveFloat | None = Field(
        default=None, description="an episode's deadline; null = the deployment's global_http_deadline_s"
    )
    cleanup_timeout_seconds: PositiveFloat = Field(
        description="total time the cleanup of one episode may take"
    )

    @model_validator(mode="after")
    def _queue_timeout_with_limit(self) -> BaseEnvironmentServerConfig:
        if self.max_concurrent_episodes is not None and self.queue_timeout_seconds is None:
            raise ValueError("queue_timeout_seconds is required when max_concurrent_episodes is set")
        return self


class HandledEpisodeError(Exception):
    """Raise inside `run()` to end the episode with this failure (HTTP 200, `failure` set)."""

    def __init__(self, failure: EpisodeFailure) -> None:
        super().__init__(failure.failure_reason)
        self.failure = failure


class CleanupHandle:
    """One registered cleanup step; `close()` runs it now (once), bounded by the cleanup timeout."""

    def __init__(self, context: CleanupContext, name: str, callback: CleanupCallback) -> None:
        self.context = context
        self.name = name
        self._callback = callback
        self._run: asyncio.Task[Any] | None = None

    @property
    def done(self) -> bool:
        return self._run is not None

    async def close(self) -> Any:
        """Run the step if it has not run, within the cleanup timeout; its result (or its error)."""
        if self._run is None:
            self._run = asyncio.ensure_future(self._bounded())
        return await asyncio.shield(self._run)

    async def _bounded(self) -> Any:
        timeout_s = self.context.cleanup_timeout_seconds
        with detached_budget(timeout_s):
            async with asyncio.timeout(timeout_s):
                return await self._callback()


class CleanupContext:
    """The cleanup steps of one episode, run last-registered first by `aclose()`."""

    def __init__(self, episode_id: EpisodeId, cleanup_timeout_seconds: float) -> None:
        self.episode_id = episode_id
        self.cleanup_timeout_seconds = cleanup_timeout_seconds
        self._handles: list[CleanupHandle] = []

    def register_cleanup(self, name: str, callback: CleanupCallback) -> CleanupHandle:
        handle = CleanupHandle(self, name, callback)
        self._handles.append(handle)
        return handle

    async def aclose(self) -> None:
        """Run every step not run yet, LIFO, all within one cleanup timeout; failures are logged only."""
        try:
            async with asyncio.timeout(self.cleanup_timeout_seconds):
                for handle in reversed(self._handles):
                    await self._logged(handle)
        except TimeoutError:
            logger.warning(
                "episode %s: cleanup did not finish within %gs",
                self.episode_id.capture_key,
                self.cleanup_timeout_seconds,
            )

    async def _logged(self, handle: CleanupHandle) -> None:
        if handle.done:
            return
        try:
            await handle.close()
        except Exception as error:  # noqa: BLE001 - one failed step must not stop the others
            logger.warning(
                "episode %s: cleanup step %r failed: %s: %s",
                self.episode_id.capture_key,
                handle.name,
                type(error).__name__,
                error,
            )


class BaseEnvironmentServer(SimpleServer):
    """Subclass, set `request_model` / `response_model`, and write `run()` and `aggregate_metrics()`."""

    config: BaseEnvironmentServerConfig
    request_model: ClassVar[type[BaseEpisodeRequest]]
    response_model: ClassVar[type[BaseEpisodeResponse]]
    _slots: asyncio.Semaphore | None = None

    def setup_webserver(self) -> FastAPI:
        if self.config.max_concurrent_episodes is not None:
            self._slots = asyncio.Semaphore(self.config.max_concurrent_episodes)
        app = new_app()
        app.post("/run")(_with_body_type(self.run_request, self.request_model))
        app.post("/aggregate_metrics")(self.aggregate_metrics)
        return app

    async def run(self, request: Any, cleanup: CleanupContext) -> BaseEpisodeResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement run()")

    async def aggregate_metrics(self, body: AggregateMetricsRequest) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement aggregate_metrics()")

    def failure_response(self, request: BaseEpisodeRequest, failure: EpisodeFailure) -> BaseEpisodeResponse:
        return self.response_model(
            episode_id=request.episode_id,
            task_id=request.task.task_id,
            failure=failure.model_dump(mode="json"),
        )

    async def run_request(self, request: BaseEpisodeRequest) -> BaseEpisodeResponse:
        """One episode: admitted, run within its deadline, cleaned up, its answer checked."""
        cleanup = CleanupContext(request.episode_id, self.config.cleanup_timeout_seconds)
        try:
            async with self._admission() as admitted:
                if not admitted:
                    return self.failure_response(
                        request,
                        EpisodeFailure(
                            failure_reason="Episode admission timed out", terminal=False, stage="admission"
                        ),
                    )
                response = await self._run_within_deadline(request, cleanup)
        finally:
            await asyncio.shield(cleanup.aclose())
        response = self.response_model.model_validate(response)
        self.validate_response_identity(request, response)
        return response

    @contextlib.asynccontextmanager
    async def _admission(self):
        if self._slots is None:
            yield True
            return
        try:
            async with asyncio.timeout(self.config.queue_timeout_seconds):
                await self._slots.acquire()
        except TimeoutError:
            yield False
            return
        try:
            yield True
        finally:
            self._slots.release()

    async def _run_within_deadline(
        self, request: BaseEpisodeRequest, cleanup: CleanupContext
    ) -> BaseEpisodeResponse:
        deadline_s = self.config.default_episode_timeout_seconds or default_retry_policy().deadline_s
        timer = asyncio.timeout(deadline_s)
        try:
            async with timer:
                # The calls get a little more than the episode, so that its own timer ends it first.
                with budget(deadline_s + CALL_BUDGET_MARGIN_S):
                    return await self.run(request, cleanup)
        except HandledEpisodeError as handled:
            return self.failure_response(request, handled.failure)
        except TimeoutError as error:
            if not timer.expired():
                return self.failure_response(request, _unhandled(error))
            return self.failure_response(request, EPISODE_TIMED_OUT)
        except Exception as error:  # noqa: BLE001 - an episode's failure is an answer, not a crash
            logger.exception("episode %s failed", request.episode_id.capture_key)
            return self.failure_response(request, _unhandled(error))

    @staticmethod
    def validate_response_identity(request: BaseEpisodeRequest, response: BaseEpisodeResponse) -> None:
        if response.episode_id != request.episode_id or response.task_id != request.task.task_id:
            raise GymError(
                500,
                "episode_identity_mismatch",
                f"the answer names episode {response.episode_id.capture_key!r} / task "
                f"{response.task_id.task_id!r}, not the one asked for",
            )


def _unhandled(error: BaseException) -> EpisodeFailure:
    return EpisodeFailure(
        failure_reason=shortened_reason(
            f"Unhandled environment server error: {type(error).__name__}: {error}"
        ),
        terminal=True,
    )


def _with_body_type(handler: Callable[[Any], Awaitable[Any]], body_type: type) -> Callable[..., Any]:
    """`handler` as a route whose JSON body is validated as `body_type` (known only on the subclass)."""

    async def route(body: Any) -> Any:
        return await handler(body)

    route.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=body_type)]
    )
    return route
