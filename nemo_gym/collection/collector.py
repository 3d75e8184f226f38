"""`gym collect` end to end: materialize (or resume), run what is missing through a bounded pipeline,
append each result or failure as it completes, aggregate, report."""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
from omegaconf import DictConfig

from nemo_gym.collection.aggregation import aggregate_results, scored_as_zero
from nemo_gym.collection.config import RolloutCollectionConfig, settings_without_effect
from nemo_gym.collection.dispatch_budget import DispatchBudget
from nemo_gym.collection.ledger import CollectionLedger
from nemo_gym.collection.materialize import materialize
from nemo_gym.collection.paths import CollectionPaths, refuse_to_replace
from nemo_gym.collection.progress import CollectionProgress, CollectionSummary
from nemo_gym.collection.records import (
    FAILURE_TERMINAL_KEY,
    NO_PERSIST_KEY,
    agent_name_of,
    max_rollout_attempts,
)
from nemo_gym.collection.rollout_health import check_after_run
from nemo_gym.collection.routing import agent_for_task_source, agents_of
from nemo_gym.collection.runner import NOT_STARTED, RolloutRunner
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, LineAppender, drop_torn_tail, iter_jsonl, rollout_key
from nemo_gym.config.key_names import ATTEMPT_INDEX_KEY_NAME
from nemo_gym.config.settings import command_settings, locate_data_file
from nemo_gym.exporters import export_results, open_exporters
from nemo_gym.http.client import RequestFailedError
from nemo_gym.serving.servers import ServerClient, configure_http_client_from, head_server_config_from
from nemo_gym.telemetry import tracing

logger = logging.getLogger("nemo_gym.collection")


class RolloutCollector:
    """`gym collect`: materialize, run what is missing through a bounded pipeline, aggregate."""

    def __init__(self, config: RolloutCollectionConfig, helper: RolloutRunner) -> None:
        self.config = config
        self.helper = helper
        self.paths = CollectionPaths.for_output(config.output_jsonl_fpath)
        self._already_done = 0

    async def collect(self) -> CollectionSummary:
        input_path = locate_data_file(self.config.input_jsonl_fpath, "input_jsonl_fpath")
        self.paths.output.parent.mkdir(parents=True, exist_ok=True)
        max_attempts = max_rollout_attempts()
        ledger = CollectionLedger()
        try:
            resuming = (
                self.config.resume_from_cache
                and self.paths.materialized.exists()
                and self.paths.output.exists()
            )
            if self.config.resume_from_cache and not resuming:
                print("resume_from_cache: no earlier materialized inputs and results here; starting afresh.")
            if resuming:
                agents = self._load_earlier_run(ledger)
            else:
                refuse_to_replace(self.paths, self.config.overwrite)
                for path in (
                    self.paths.output,
                    self.paths.failures,
                    self.paths.aggregate_metrics,
                    self.paths.materialized,
                ):
                    path.unlink(missing_ok=True)
                deployed = agents_of(self.helper.server_client.global_config_dict)
                _, agents = materialize(
                    self.config,
                    input_path,
                    self.paths,
                    ledger,
                    lambda source: agent_for_task_source(source, deployed),
                )
                self.paths.output.touch()
                self.paths.failures.touch()
            for agent in sorted(agents):
                self.helper.check_agent(agent)  # before anything runs
            progress = await self._run_missing(ledger, max_attempts)
            summary = CollectionSummary(
                self.paths,
                progress.total,
                self._already_done,
                progress,
                ledger.unresolved_failures(),
                [],
                retryable=ledger.retryable_unresolved(max_attempts),
                required=self._line_count(self.paths.materialized) if self.config.require_complete else None,
            )
            if not self.config.disable_aggregation:
                if self.helper.balancer is not None:
                    self.helper.balancer.route_to_live(self.helper.server_client)
                try:
                    summary.aggregates = await aggregate_results(
                        (result for _, _, _, result in iter_jsonl(self.paths.output)),
                        self._unresolved_for_aggregation(ledger),
                        self.helper.server_client,
                        self.paths.aggregate_metrics,
                    )
                except (RequestFailedError, aiohttp.ClientError, ValueError) as error:
                    summary.aggregation_error = str(error)
        finally:
            ledger.close()
        return summary

    def _load_earlier_run(self, ledger: CollectionLedger) -> set[str]:
        drop_torn_tail(self.paths.output)
        drop_torn_tail(self.paths.failures)
        for _, _, _, result in iter_jsonl(self.paths.output):
            if ledger.mark_done(rollout_key(result)):
                self._already_done += 1
        for _, _, _, failure in iter_jsonl(self.paths.failures):
            ledger.record_failure(
                rollout_key(failure),
                agent_name_of(failure),
                failure[FAILURE_CLASS_KEY],
                bool(failure.get(FAILURE_TERMINAL_KEY)),
            )
        ledger.commit()
        return {
            agent for _, _, _, row in iter_jsonl(self.paths.materialized) if (agent := agent_name_of(row))
        }

    @staticmethod
    def _line_count(path: Path) -> int:
        with path.open("rb") as lines:
            return sum(1 for _ in lines)

    def _unresolved_for_aggregation(self, ledger: CollectionLedger) -> Iterator[dict[str, Any]]:
        """The failure records, those of `count_failure_classes_as_zero` scored 0; and with
        `count_missing_rollouts_as_zero` the rollouts never run, scored 0."""
        zero_classes = set(self.config.count_failure_classes_as_zero)
        for record in ledger.unresolved_failure_records():
            failure_class = record[FAILURE_CLASS_KEY]
            yield scored_as_zero(record, failure_class) if failure_class in zero_classes else record
        if self.config.count_missing_rollouts_as_zero:
            for _, _, _, row in iter_jsonl(self.paths.materialized):
                key = rollout_key(row)
                if not ledger.is_done(key) and not ledger.failed_attempts(key)[0]:
                    yield scored_as_zero(row, "missing")

    def _runnable(self, ledger: CollectionLedger, max_attempts: int) -> Iterator[dict[str, Any]]:
        for _, _, _, row in iter_jsonl(self.paths.materialized):
            key = rollout_key(row)
            if ledger.is_done(key):
                continue
            attempts, terminal = ledger.failed_attempts(key)
            if terminal or attempts >= max_attempts:
                continue
            # NeMo Gym 0.7 numbers a re-dispatched rollout's attempt (a retry gets its own capture key).
            yield {**row, ATTEMPT_INDEX_KEY_NAME: attempts} if attempts else row

    async def _run_missing(self, ledger: CollectionLedger, max_attempts: int) -> CollectionProgress:
        total = sum(1 for _ in self._runnable(ledger, max_attempts))
        progress = CollectionProgress(total=total)
        results = LineAppender(self.paths.output)
        failures = LineAppender(self.paths.failures)
        budget = DispatchBudget(self.config.dispatch_budget_s, self.config.drain_margin_s)

        def record_lost_attempt(record: dict[str, Any]) -> None:
            """An attempt a lost shard replica took with it: kept, as any failure; the row runs again."""
            failures.append(record)
            ledger.record_failure(
                rollout_key(record), agent_name_of(record), record[FAILURE_CLASS_KEY], False
            )
            progress.lost_attempts += 1

        self.helper.on_lost_attempt = record_lost_attempt
        try:
            rows = self._runnable(ledger, max_attempts)
            attempt_of = lambda row: ledger.failed_attempts(rollout_key(row))[0] + 1  # noqa: E731
            async for row, result in self.helper.run_rows(
                rows, attempt_of, budget if budget.limited else None
            ):
                if result is NOT_STARTED:
                    progress.not_started += 1
                    continue
                key = rollout_key(row)
                if FAILURE_CLASS_KEY in result:
                    failures.append(result)
                    ledger.record_failure(
                        key,
                        agent_name_of(row),
                        result[FAILURE_CLASS_KEY],
                        bool(result.get(FAILURE_TERMINAL_KEY)),
                    )
                elif ledger.mark_done(key) and not result.get(NO_PERSIST_KEY):
                    results.append(result)
                progress.add(result)
                if progress.finished % 1000 == 0:
                    ledger.commit()
        finally:
            self.helper.on_lost_attempt = None
            results.close()
            failures.close()
            progress.close()
        return progress


async def collect_rollouts(overrides: list[str], server_client: ServerClient | None = None) -> int:
    """`gym collect`: the exit code is 0 when every rollout has a result and aggregation succeeded.
    `server_client` reaches the deployment (default: the one whose head server the config names)."""
    cfg = parse_global_config_dict(overrides)
    config = command_settings(RolloutCollectionConfig, cfg)
    if config.rollout_collection_driver:
        await custom_driver(config.rollout_collection_driver)(config, cfg)
        return 0
    summary = await run_collection(config, cfg, server_client)
    for line in summary.lines():
        print(line)
    if not config.disable_aggregation:  # NeMo Gym 0.7 checks rollouts as part of aggregating them
        check_after_run([summary.paths.output], summary.paths.output.parent, config)
    return summary.exit_code


def custom_driver(spec: str) -> Callable[[RolloutCollectionConfig, DictConfig], Awaitable[Any]]:
    """The coroutine function `rollout_collection_driver` names as `module.path:function`."""
    module_name, colon, name = spec.partition(":")
    if not (colon and module_name and name):
        raise ConfigError(f"rollout_collection_driver={spec!r}: write it as 'module.path:function'")
    try:
        driver = getattr(importlib.import_module(module_name), name)
    except ImportError as error:
        raise ConfigError(
            f"rollout_collection_driver={spec!r}: cannot import {module_name} ({error})"
        ) from None
    except AttributeError:
        raise ConfigError(f"rollout_collection_driver={spec!r}: {module_name} has no {name}") from None
    if not inspect.iscoroutinefunction(driver):
        raise ConfigError(
            f"rollout_collection_driver={spec!r}: must be an async function (config, global config)"
        )
    return driver


async def run_collection(
    config: RolloutCollectionConfig, cfg: DictConfig, server_client: ServerClient | None = None
) -> CollectionSummary:
    """One collection as `config` says, against the deployment of `cfg` (or `server_client`'s)."""
    configure_http_client_from(cfg)
    for line in settings_without_effect(cfg):
        logger.warning(line)
    try:
        helper = RolloutRunner(
            server_client,
            head_server_config=head_server_config_from(cfg),
            max_in_flight=config.num_samples_in_parallel,
            rollout_timeout_s=config.rollout_timeout_s,
            routing=config,
        )
    except ValueError as error:
        raise ConfigError(str(error)) from error
    tracing.export_to_environment(cfg)
    tracing.start("collector")
    try:
        with open_exporters(cfg, helper.server_client.global_config_dict):
            with tracing.span("gym.job", {"nemo.gym.job.output": str(config.output_jsonl_fpath)}):
                summary = await RolloutCollector(config, helper).collect()
            export_results(
                summary.aggregates,
                lambda: (result for _, _, _, result in iter_jsonl(summary.paths.output)),
                config.uploads_rollouts,
            )
    finally:
        tracing.flush()
    return summary
