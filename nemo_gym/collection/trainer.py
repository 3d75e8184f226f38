"""NeMo Gym's `RolloutCollectionHelper`: the Python API NeMo RL, verl and TRL collect rollouts with.

    rch = RolloutCollectionHelper()
    for task in rch.run_examples(examples=rows, head_server_config=head):
        row, result = await task          # completion order; raises for a failed /run

`result` is exactly the agent's `/run` answer. A failed `/run` raises from its awaitable: `HTTPStatusError`
(an aiohttp `ClientResponseError`: int `.status`, `.response_content`) for an error answer, and
`RolloutTimeoutError` (`.status` 504) when no answer came within the rollout deadline, so a trainer's
retry logic can classify every failure by status. Unlike NeMo Gym, every rollout has that deadline and a
connection that cannot be made is retried a bounded number of times. With `route_failures_to_sidecar`
a failure is a row (NeMo Gym's failure keys) instead of an exception. `gym collect` uses its own runner
(`nemo_gym.collection.runner`), which writes failure records.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp
import orjson
from omegaconf import DictConfig
from pydantic import BaseModel, Field

from nemo_gym.collection.collector import run_collection
from nemo_gym.collection.config import RolloutCollectionConfig
from nemo_gym.collection.dispatch_budget import DispatchBudget
from nemo_gym.collection.environments import EnvironmentRouter, EpisodeFailedError, RunTarget
from nemo_gym.collection.records import DEFAULT_MAX_ATTEMPTS, NO_PERSIST_KEY
from nemo_gym.collection.routing import preprocessed_rows, resolve_agent_refs
from nemo_gym.collection.runner import COLLECTOR_DEADLINE_MARGIN_S, traced_rollout
from nemo_gym.collection.shard_balancer import ShardBalancer
from nemo_gym.config.global_config import get_global_config_dict
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, TASK_INDEX_KEY, iter_jsonl
from nemo_gym.config.server_instances import BaseServerConfig
from nemo_gym.http.client import (
    DeadlineExceededError,
    HTTPStatusError,
    RequestFailedError,
    RetryPolicy,
    default_retry_policy,
    request,
)
from nemo_gym.serving.servers import ServerClient, configure_http_client_from
from nemo_gym.telemetry import tracing

DISPATCH_DRAINED_KEY = "_ng_dispatch_drained"
FAILURE_TYPE_KEY = "_ng_failure_type"
FAILURE_MESSAGE_KEY = "_ng_failure_message"
FAILURE_HTTP_STATUS_KEY = "_ng_failure_http_status"
FAILURE_RESPONSE_BODY_KEY = "_ng_failure_response_body"
AGENT_REQUEST_FAILED_FAILURE_CLASS = "agent_request_failed"
AGENT_RUN_ERROR_FAILURE_CLASS = "agent_run_error"
CANCELLED_FAILURE_CLASS = "cancelled"
MAX_FAILURE_BODY_CHARS = 2000

Outcome = tuple[dict[str, Any], dict[str, Any]]


class RolloutTimeoutError(DeadlineExceededError):
    """No answer to `/run` within the rollout deadline; `.status` is 504, as a gateway would report it."""

    status = 504


class RolloutCollectionHelper(BaseModel):
    """Runs rows through the deployment's agents; needs nothing to construct.

    `rollout_deadline_s` (Gym's own setting) bounds each `/run`; default: the deployment's HTTP deadline
    (`global_http_deadline_s`) plus a margin, so that the agent's own deadline answer comes first.
    """

    rollout_deadline_s: float | None = Field(default=None, gt=0)

    def setup_server_client(self, head_server_config: BaseServerConfig | None = None) -> ServerClient:
        """A client of the deployment whose head server is `head_server_config` (default: this process's
        config's head server)."""
        client = ServerClient.load_from_global_config(head_server_config)
        configure_http_client_from(client.global_config_dict)  # the deployment's pool limits, here too
        tracing.start("trainer")  # when this process's environment asks for it (RunHelper's launcher does)
        return client

    def preprocess_examples(
        self,
        examples: Iterable[Mapping[str, Any]],
        *,
        agent_map: Mapping[str, str] | None = None,
        fan_out: Mapping[str, Sequence[str]] | None = None,
        num_repeats: int = 1,
        num_repeats_add_seed: bool = False,
        global_config_dict: DictConfig | None = None,
    ) -> list[dict[str, Any]]:
        """Rows ready for `run_examples`: routed (`agent_map`: by agent or task_source, `_default` for the
        rest; `fan_out`: once per listed agent), every row given an agent of the deployment, repeated
        `num_repeats` times with `_ng_task_index` / `_ng_rollout_index`, seeded per rollout if asked."""
        rows = preprocessed_rows(
            examples,
            agent_map=agent_map,
            fan_out=fan_out,
            num_repeats=num_repeats,
            num_repeats_add_seed=num_repeats_add_seed,
        )
        self.resolve_task_sources(rows, global_config_dict or get_global_config_dict())
        return rows

    async def run_from_config(self, config: RolloutCollectionConfig) -> list[dict[str, Any]]:
        """`gym collect` as `config` says, against this process's deployment (its config's head server):
        results and failure records written next to `config.output_jsonl_fpath`, the results returned."""
        summary = await run_collection(config, get_global_config_dict())
        for line in summary.lines():
            print(line)
        return [result for *_, result in iter_jsonl(summary.paths.output)]

    @staticmethod
    def resolve_task_sources(examples: Sequence[dict[str, Any]], cfg: DictConfig) -> None:
        """Give each row without an `agent_ref` the agent its `task_source` stands for (in place); raise
        ValueError naming every row that has no agent of `cfg`."""
        resolve_agent_refs(examples, cfg)

    def run_examples(
        self,
        examples: Iterable[dict[str, Any]],
        head_server_config: BaseServerConfig | None = None,
        semaphore: AbstractAsyncContextManager[Any] | None = None,
        route_failures_to_sidecar: bool = False,
        environment_server_name: str | None = None,
        *,
        max_resident_tasks: int | None = None,
        dispatch_budget_s: float | None = None,
        drain_margin_s: float | None = None,
    ) -> Iterator[Awaitable[Outcome]]:
        """One awaitable per row, each giving the next `(row, result)` to complete. Rows are started in
        the given order once the iterator is first advanced (inside the caller's event loop); at most
        `max_resident_tasks` run at once when set. With `dispatch_budget_s`, rows not started within the
        budget (less `drain_margin_s`, by default adaptive: see `nemo_gym.collection.dispatch_budget`) are not
        run: their awaitables give a `cancelled` failure row.
        Every row is given its agent and environment server first (`resolve_task_sources`): one
        unroutable row fails the batch. `environment_server_name` sends every row to that environment
        server."""
        rows = list(examples)
        server_client = self.setup_server_client(head_server_config)
        self.resolve_task_sources(rows, server_client.global_config_dict)
        router = EnvironmentRouter(
            server_client.global_config_dict,
            mode="legacy" if environment_server_name else "agent",
            server_name=environment_server_name,
        )
        targets = {id(row): router.target(row) for row in rows}
        deadline_s = (
            self.rollout_deadline_s or default_retry_policy().deadline_s + COLLECTOR_DEADLINE_MARGIN_S
        )
        balancer = ShardBalancer.for_deployment(server_client.head_server_config)
        dispatcher = _Dispatcher(
            rows,
            lambda row: traced_rollout(
                row,
                _run_one(
                    server_client,
                    router,
                    targets[id(row)],
                    row,
                    semaphore,
                    deadline_s,
                    route_failures_to_sidecar,
                    balancer,
                ),
            ),
            max_resident_tasks,
            DispatchBudget(dispatch_budget_s, drain_margin_s),
        )
        return iter(dispatcher)


async def _run_one(
    server_client: ServerClient,
    router: EnvironmentRouter,
    target: RunTarget,
    row: dict[str, Any],
    semaphore: AbstractAsyncContextManager[Any] | None,
    deadline_s: float,
    route_failures_to_sidecar: bool,
    balancer: ShardBalancer | None = None,
) -> Outcome:
    agent = target.server
    policy = RetryPolicy(
        max_attempts=DEFAULT_MAX_ATTEMPTS,
        deadline_s=deadline_s,
        connect_timeout_s=min(default_retry_policy().connect_timeout_s, deadline_s),
    )

    async def post(base_url: str) -> tuple[aiohttp.ClientResponse, bytes]:
        url = base_url + "/run"
        try:
            response = await request(
                "POST",
                url,
                json=router.request_body(row, target),
                retry_policy=policy,
                idempotent=False,
                _internal=True,
            )
            return response, await response.read()
        except DeadlineExceededError as error:
            raise RolloutTimeoutError(
                "POST",
                url,
                error.attempts,
                error.elapsed_s,
                None,
                f"no answer from {agent} within {deadline_s:g}s",
            ) from None

    try:
        async with semaphore or contextlib.nullcontext():
            # With shards, a rollout a lost replica took with it runs again on a live one.
            if balancer is not None and balancer.serves(agent):
                (response, body), _ = await balancer.dispatch(agent, row.get(TASK_INDEX_KEY), post)
            else:
                response, body = await post(server_client.server_base_url(agent))
        if not response.ok:
            raise HTTPStatusError(response, body)
        answer = orjson.loads(body)
        if not target.typed:
            return row, answer  # exactly the /run answer
        try:
            return row, router.result_of(target, answer, stamp=False)
        except EpisodeFailedError as failure:
            if not route_failures_to_sidecar:
                raise
            return row, {**row, **failure.sidecar_fields()}
    except (RequestFailedError, aiohttp.ClientError, orjson.JSONDecodeError) as error:
        if not route_failures_to_sidecar:
            raise
        return row, _failure_row(row, error)


def _failure_row(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """NeMo Gym's sidecar row for a failed `/run`: `agent_request_failed` when nothing ran (no answer),
    `agent_run_error` when the agent answered with an error."""
    status = getattr(error, "status", None)
    answered = isinstance(error, HTTPStatusError)
    failure = {
        FAILURE_CLASS_KEY: AGENT_RUN_ERROR_FAILURE_CLASS if answered else AGENT_REQUEST_FAILED_FAILURE_CLASS,
        FAILURE_TYPE_KEY: type(error).__name__,
        FAILURE_MESSAGE_KEY: str(error),
        FAILURE_HTTP_STATUS_KEY: status if isinstance(status, int) else None,
    }
    if answered:
        failure[FAILURE_RESPONSE_BODY_KEY] = error.response_content.decode("utf-8", "replace")[
            :MAX_FAILURE_BODY_CHARS
        ]
    return {**row, **failure}


def _drained_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        FAILURE_CLASS_KEY: CANCELLED_FAILURE_CLASS,
        NO_PERSIST_KEY: True,
        DISPATCH_DRAINED_KEY: True,
        "error_message": "not started: the dispatch budget ran out",
    }


class _Dispatcher:
    """Starts rows as tasks of the running loop and hands out their outcomes in completion order.

    A task never ends with an exception of its own: its outcome (result or error) goes to a queue, so a
    caller that stops early leaves no "exception never retrieved" behind.
    """

    def __init__(
        self,
        rows: list[dict[str, Any]],
        run: Callable[[dict[str, Any]], Awaitable[Outcome]],
        max_resident: int | None,
        budget: DispatchBudget,
    ) -> None:
        if max_resident is not None and max_resident < 1:
            raise ValueError(f"max_resident_tasks must be at least 1, got {max_resident}")
        self._rows = rows
        self._run = run
        self._max_resident = max_resident or len(rows) or 1
        self._budget = budget
        self._pending = iter(rows)
        self._done: asyncio.Queue[tuple[Outcome | None, BaseException | None]] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def __iter__(self) -> Iterator[Awaitable[Outcome]]:
        for _ in self._rows:
            yield self._next_outcome()

    async def _next_outcome(self) -> Outcome:
        if self._done is None:
            self._done = asyncio.Queue()
            self._start_more()
        outcome, error = await self._done.get()
        if error is not None:
            raise error
        assert outcome is not None
        return outcome

    def _start_more(self) -> None:
        assert self._done is not None
        while len(self.tasks) < self._max_resident:
            row = next(self._pending, None)
            if row is None:
                return
            if not self._budget.may_start():
                self._done.put_nowait(((row, _drained_row(row)), None))
                continue
            self.tasks.add(asyncio.get_running_loop().create_task(self._settle(row)))

    async def _settle(self, row: dict[str, Any]) -> None:
        """Run one row, queue its outcome, and start the next row in the freed slot."""
        assert self._done is not None
        started = time.monotonic()
        try:
            self._done.put_nowait((await self._run(row), None))
            self._budget.finished(time.monotonic() - started)
        except Exception as error:
            self._done.put_nowait((None, error))
        finally:
            self.tasks.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._start_more()
