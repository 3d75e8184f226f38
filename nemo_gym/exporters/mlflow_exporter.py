"""MLflow: one explicit run (experiment `mlflow_experiment_name`, run `mlflow_run_name`) per command run,
through `MlflowClient`, so nothing depends on MLflow's process-wide active run. The masked config is the
artifact `global_config.json` and the run's params; metrics (numbers) and tags (strings) go in batches;
rollouts are the artifact `rollouts.json` in MLflow's table layout, appended to on every export.
`mlflow` is imported in `setup` only, so a run without MLflow keys never loads it."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from itertools import islice
from typing import Any, ClassVar

from nemo_gym.config.cli_models import MLFlowConfig
from nemo_gym.config.settings import command_settings
from nemo_gym.exporters.base import BaseExporter, ExporterUnavailable
from nemo_gym.exporters.records import MAX_TABLE_ROWS, RolloutTable

CONFIG_ARTIFACT = "global_config.json"
ROLLOUTS_ARTIFACT = "rollouts.json"
# MLflow's HTTP defaults (120 s per request, 7 retries with doubling backoff) would hold a finished run for
# many minutes behind an unreachable server; a user's own MLFLOW_HTTP_* variables still win.
HTTP_DEADLINE_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
# MLflow's limits: names up to 250 characters; per `log_batch` call at most 1000 metrics and 100 params
# plus tags; values up to 6000 (param) and 8000 (tag) characters.
MAX_NAME_CHARS = 250
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_OR_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE_CHARS = 6000
MAX_TAG_VALUE_CHARS = 8000


def flattened(config: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, value as text) for every leaf of a config; lists are one JSON value."""
    if isinstance(config, dict):
        for key, value in config.items():
            yield from flattened(value, f"{prefix}{key}.")
    elif prefix:
        yield prefix[:-1], config if isinstance(config, str) else json.dumps(config)


def batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


class MLflowExporter(BaseExporter):
    display_name: ClassVar[str] = "MLflow"

    def setup(self) -> None:
        settings = command_settings(MLFlowConfig, self.global_config_dict)
        try:
            from mlflow import MlflowClient
            from mlflow.entities import Metric, Param, RunTag
            from mlflow.utils.validation import path_not_unique, validate_param_and_metric_name
        except ImportError:
            raise ExporterUnavailable(
                "mlflow_tracking_uri/mlflow_experiment_name/mlflow_run_name are set but the mlflow package "
                "is not installed; install it with `pip install 'nemo-gym[mlflow]'` or unset those keys"
            ) from None
        self._metric, self._param, self._tag = Metric, Param, RunTag
        self._name_checks = (validate_param_and_metric_name, path_not_unique)
        for name, value in HTTP_DEADLINE_DEFAULTS.items():
            os.environ.setdefault(name, value)
        self._token_set_here = bool(settings.mlflow_tracking_token)
        if settings.mlflow_tracking_token:
            # MLflow reads the bearer token from this variable on every request; it has no client argument.
            # Set for this run only, so processes started after it do not inherit it.
            os.environ["MLFLOW_TRACKING_TOKEN"] = settings.mlflow_tracking_token
        try:
            self._client = MlflowClient(tracking_uri=settings.mlflow_tracking_uri)
            experiment = self._client.get_experiment_by_name(settings.mlflow_experiment_name)
            experiment_id = (
                experiment.experiment_id
                if experiment is not None
                else self._client.create_experiment(settings.mlflow_experiment_name)
            )
            self._run_id = self._client.create_run(
                experiment_id, run_name=settings.mlflow_run_name
            ).info.run_id
        except Exception:
            self._forget_token()
            raise
        self._rollout_rows: list[list[Any]] = []

    def valid_name(self, name: str) -> bool:
        """A name MLflow accepts (its own checks); others are dropped rather than failing a whole batch:
        `pass@1/accuracy`, say, since `@` is not allowed."""
        allowed_characters, resolves_elsewhere = self._name_checks
        return len(name) <= MAX_NAME_CHARS and bool(allowed_characters(name)) and not resolves_elsewhere(name)

    def export_config(self) -> None:
        config = self.masked_config()
        self._client.log_dict(self._run_id, config, CONFIG_ARTIFACT)
        params = [
            self._param(key, value[:MAX_PARAM_VALUE_CHARS])
            for key, value in flattened(config)
            if self.valid_name(key)
        ]
        for batch in batches(params, MAX_PARAMS_OR_TAGS_PER_BATCH):
            self._client.log_batch(self._run_id, params=batch)

    def export_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        """Numbers (booleans as 0/1) are metrics; strings, which MLflow metrics cannot hold, are tags."""
        timestamp_ms = int(time.time() * 1000)
        numbers = [
            self._metric(key, float(value), timestamp_ms, step or 0)
            for key, value in metrics.items()
            if isinstance(value, bool | int | float) and self.valid_name(key)
        ]
        texts = [
            self._tag(key, value[:MAX_TAG_VALUE_CHARS])
            for key, value in metrics.items()
            if isinstance(value, str) and self.valid_name(key)
        ]
        for batch in batches(numbers, MAX_METRICS_PER_BATCH):
            self._client.log_batch(self._run_id, metrics=batch)
        for batch in batches(texts, MAX_PARAMS_OR_TAGS_PER_BATCH):
            self._client.log_batch(self._run_id, tags=batch)

    def export_rollouts(self, table: RolloutTable) -> None:
        room = MAX_TABLE_ROWS - len(self._rollout_rows)
        self._rollout_rows.extend(table.rows[:room])
        self._client.log_dict(
            self._run_id, {"columns": table.columns, "data": self._rollout_rows}, ROLLOUTS_ARTIFACT
        )

    def teardown(self) -> None:
        try:
            self._client.set_terminated(self._run_id)
        finally:
            self._forget_token()

    def _forget_token(self) -> None:
        if self._token_set_here:
            os.environ.pop("MLFLOW_TRACKING_TOKEN", None)
