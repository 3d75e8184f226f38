"""RolloutRunner: rows through agents' `/run`, each answer classified as a result or a failure
record; what `gym collect` runs (trainers use NeMo Gym's `RolloutCollectionHelper`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import aiohttp
import orjson

from nemo_gym.collection.config import DEFAULT_MAX_IN_FLIGHT
from nemo_gym.collection.dispatch_budget import DispatchBudget
from nemo_gym.collection.environments import (
    ENVIRONMENT_SERVER_FAILURE_CLASS,
    EnvironmentRouter,
    EpisodeFailedError,
)
from nemo_gym.collection.pipeline import completed_in_any_order
from nemo_gym.collection.records import (
    DEFAULT_MAX_ATTEMPTS,
    error_message,
    failure_record,
    status_failure_class,
)
from nemo_gym.collection.shard_balancer import (
    SHARD_LOST_FAILURE_CLASS,
    SHARD_REPLICA_KEY,
    ShardBalancer,
    ShardLostError,
)
from nemo_gym.config.errors import ConfigError, ServerRefNotFoundError
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.key_names import ATTEMPT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME
from nemo_gym.config.server_instances import BaseServerConfig
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.http.client import (
    DeadlineExceededError,
    RequestFailedError,
    RetryPolicy,
    default_retry_policy,
    request,
)
from nemo_gym.http.rollout_paths import episode_id_of
from nemo_gym.serving.servers import ServerClient
from nemo_gym.telemetry import tracing

# The agent's own rollout deadline defaults to the global HTTP deadline; the collector waits a little
# longer, so the agent's structured 504 arrives before the collector gives up on its own.
COLLECTOR_DEADLINE_MARGIN_S = 30.0
# The result of a row the dispatch budget did not let start: nothing is written for it.
NOT_STARTED: dict[str, Any] = {"_ng_not_started": True}
ResultT = TypeVar("ResultT")


def rollout_span_attributes(row: dict[str, Any]) -> dict[str, Any]:
    """What identifies a rollout on its `gym.rollout` span."""
    agent_ref = row.get(AGENT_REF_KEY)
    return {
        tracing.TASK_INDEX_ATTRIBUTE: row.get(TASK_INDEX_KEY),
        tracing.ROLLOUT_INDEX_ATTRIBUTE: row.get(ROLLOUT_INDEX_KEY),
        tracing.ROLLOUT_ID_ATTRIBUTE: episode_id_of(row)["rollout_id"],
        tracing.AGENT_NAME_ATTRIBUTE: agent_ref.get("name") if isinstance(agent_ref, dict) else None,
    }


async def traced_rollout(row: dict[str, Any], run: Awaitable[ResultT]) -> ResultT:
    """`run` (one rollout of `row`) inside its `gym.rollout` span when tracing is on."""
    if not tracing.is_on():
        return await run
    with tracing.rollout_span(rollout_span_attributes(row)) as span:
        result = await run
        failure_class = result.get(FAILURE_CLASS_KEY) if isinstance(result, dict) else None
        if failure_class is not None:
            span.set_attribute("nemo.gym.failure.class", str(failure_class))
        return result


class RolloutRunner:
    """Runs rows through agents' `/run` with a bounded number in flight; usable from a trainer process.

    Every row yields `(row, result)`: the agent's answer stamped with the row's indices and agent_ref, or a
    failure record (it has `_ng_failure_class`) — never an exception for a failed rollout.
    """

    def __init__(
        self,
        server_client: ServerClient | None = None,
        *,
        head_server_config: BaseServerConfig | None = None,
        max_in_flight: int | None = None,
        rollout_timeout_s: float | None = None,
        routing: Any = None,
    ) -> None:
        """`routing`: an object with the `environment_*` routing keys (a collection config), or None."""
        self.server_client = server_client or ServerClient.load_from_global_config(head_server_config)
        self.router = EnvironmentRouter.for_deployment(self.server_client.global_config_dict, routing)
        self.max_in_flight = max_in_flight or DEFAULT_MAX_IN_FLIGHT
        self.rollout_timeout_s = rollout_timeout_s or (
            default_retry_policy().deadline_s + COLLECTOR_DEADLINE_MARGIN_S
        )
        self.balancer = ShardBalancer.for_deployment(self.server_client.head_server_config)
        # Told of each attempt a lost shard replica took with it (the row then runs on a live replica).
        self.on_lost_attempt: Callable[[dict[str, Any]], None] | None = None

    def _note_lost_attempt(self, row: dict[str, Any], lost: ShardLostError, attempt: int) -> None:
        if self.on_lost_attempt is not None:
            self.on_lost_attempt(failure_record(row, SHARD_LOST_FAILURE_CLASS, str(lost), attempt))

    def check_agent(self, agent: str) -> None:
        """A config error unless rows of `agent` have an environment server (or are run by it directly)."""
        try:
            target = self.router.target({AGENT_REF_KEY: {"name": agent}})
            self.server_client.server_base_url(target.server)
        except ValueError as error:
            raise ConfigError(f"agent_ref {agent!r}: {error}") from error

    async def run_one(self, row: dict[str, Any], attempt: int = 1) -> dict[str, Any]:
        """One `/run` of the row's environment server, classified: the stamped result, or a failure record."""
        return await traced_rollout(row, self._run_one(row, attempt))

    async def _run_one(self, row: dict[str, Any], attempt: int) -> dict[str, Any]:
        try:
            target = self.router.target(row)
            base_url = self.server_client.server_base_url(target.server)
            body = self.router.request_body(row, target)
        except (ServerRefNotFoundError, ValueError) as error:
            return failure_record(row, "invalid_request", str(error), attempt)
        agent = target.server
        policy = RetryPolicy(
            max_attempts=DEFAULT_MAX_ATTEMPTS,
            deadline_s=self.rollout_timeout_s,
            connect_timeout_s=min(default_retry_policy().connect_timeout_s, self.rollout_timeout_s),
        )

        async def post(base_url: str) -> tuple[int, bytes]:
            async with asyncio.timeout(self.rollout_timeout_s):
                response = await request(
                    "POST",
                    base_url + "/run",
                    json=body,
                    retry_policy=policy,
                    idempotent=False,
                    _internal=True,
                )
                return response.status, await response.read()

        replica = None
        try:
            if self.balancer is not None and self.balancer.serves(agent):
                (status, answer), replica = await self.balancer.dispatch(
                    agent,
                    row.get(TASK_INDEX_KEY),
                    post,
                    lambda lost: self._note_lost_attempt(row, lost, attempt),
                )
            else:
                status, answer = await post(base_url)
        except ShardLostError as error:
            return failure_record(row, SHARD_LOST_FAILURE_CLASS, str(error), attempt)
        except (DeadlineExceededError, TimeoutError):
            return failure_record(
                row, "timeout", f"no answer from {agent} within {self.rollout_timeout_s:g}s", attempt
            )
        except (RequestFailedError, aiohttp.ClientError, OSError) as error:
            return failure_record(row, "connection", f"{agent}: {error}", attempt)
        if not 200 <= status < 300:
            return failure_record(row, status_failure_class(status), error_message(answer), attempt, status)
        try:
            result = self.router.result_of(target, orjson.loads(answer))
        except orjson.JSONDecodeError as error:
            return failure_record(row, "invalid_response", f"{agent} answered non-JSON ({error})", attempt)
        except EpisodeFailedError as failure:
            return failure_record(
                row, ENVIRONMENT_SERVER_FAILURE_CLASS, failure.message, attempt, terminal=failure.terminal
            )
        except ValueError as error:
            return failure_record(row, "invalid_response", f"{agent}: {error}", attempt)
        reward = result.get("reward") if isinstance(result, dict) else None
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            return failure_record(
                row, "invalid_response", f"{agent} answered without a numeric reward", attempt
            )
        result[TASK_INDEX_KEY] = row.get(TASK_INDEX_KEY)
        result[ROLLOUT_INDEX_KEY] = row.get(ROLLOUT_INDEX_KEY)
        result[AGENT_REF_KEY] = row.get(AGENT_REF_KEY)
        for key in (ATTEMPT_INDEX_KEY_NAME, ROLLOUT_ID_KEY_NAME):
            if key in row:
                result[key] = row[key]
        if replica is not None:
            result[SHARD_REPLICA_KEY] = replica.label
        return result

    async def run_rows(
        self,
        rows: Iterable[dict[str, Any]] | AsyncIterable[dict[str, Any]],
        attempt_of: Callable[[dict[str, Any]], int] | None = None,
        budget: DispatchBudget | None = None,
    ) -> AsyncIterator[tuple[dict[str, Any], dict[str, Any]]]:
        """`(row, result)` in completion order. Rows are pulled only as slots free up, so `rows` may be a
        lazy iterator over any number of rows; stopping the iteration cancels what is in flight.
        `attempt_of(row)` numbers the attempt recorded in a failure (default 1). A row the `budget` no
        longer lets start gives `NOT_STARTED` as its result."""

        async def run(row: dict[str, Any]) -> dict[str, Any]:
            if budget is not None and not budget.may_start():
                return NOT_STARTED
            started = time.monotonic()
            result = await self.run_one(row, attempt_of(row) if attempt_of else 1)
            if budget is not None:
                budget.finished(time.monotonic() - started)
            return result

        async with contextlib.aclosing(completed_in_any_order(rows, run, self.max_in_flight)) as pairs:
            async for pair in pairs:
                yield pair
