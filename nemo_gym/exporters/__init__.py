"""Where a run's config, metrics and rollouts go besides its own files: W&B and MLflow.

Each backend is opened only when its keys make it available (`ExporterConfig.is_available`) and imports
its package only then, so a run without them pays one settings check. A backend that cannot start, or
fails later, costs a one-line warning and nothing else: the run and its files never depend on it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from omegaconf import DictConfig

from nemo_gym.config.cli_models import ExporterConfig, MLFlowConfig, WANDBConfig
from nemo_gym.config.errors import first_line
from nemo_gym.config.masking import MIN_SCRUBBED_SECRET_CHARS
from nemo_gym.config.settings import command_settings
from nemo_gym.exporters.base import BaseExporter, ExporterUnavailable
from nemo_gym.exporters.mlflow_exporter import MLflowExporter
from nemo_gym.exporters.records import aggregate_metric_values, rollout_table
from nemo_gym.exporters.wandb_exporter import WandbExporter
from nemo_gym.text.redaction import MASKED_VALUE, without_url_passwords

__all__ = [
    "EXPORTERS",
    "BaseExporter",
    "ExporterUnavailable",
    "export_metrics",
    "export_results",
    "export_rollouts",
    "get_exporters",
    "open_exporters",
    "setup_exporters",
    "teardown_exporters",
]

logger = logging.getLogger("nemo_gym.exporters")

EXPORTERS: dict[str, tuple[type[ExporterConfig], type[BaseExporter]]] = {
    "wandb": (WANDBConfig, WandbExporter),
    "mlflow": (MLFlowConfig, MLflowExporter),
}

_active: list[BaseExporter] = []
_secrets: list[str] = []


def setup_exporters(cfg: DictConfig, deployment: DictConfig | None = None) -> list[BaseExporter]:
    """Open every available backend and log the config to it; `deployment` is the running deployment's
    config, exported under `deployment`. Returns the backends now open."""
    for config_model, exporter_class in EXPORTERS.values():
        settings = command_settings(config_model, cfg)
        if not settings.is_available:
            continue
        _secrets.extend(
            value
            for key, field in config_model.model_fields.items()
            if not field.repr and len(value := getattr(settings, key) or "") >= MIN_SCRUBBED_SECRET_CHARS
        )
        exporter = exporter_class(cfg, deployment)
        if not _guarded(exporter, "cannot start", exporter.setup):
            continue
        _active.append(exporter)
        if not _guarded(exporter, "cannot log the config", exporter.export_config):
            _guarded(exporter, "cannot close its run", exporter.teardown)
    return get_exporters()


def get_exporters() -> list[BaseExporter]:
    return list(_active)


def export_metrics(metrics: dict[str, Any], step: int | None = None) -> None:
    for exporter in get_exporters():
        _guarded(exporter, "cannot log metrics", exporter.export_metrics, metrics, step)


def export_rollouts(rollouts: Iterable[dict[str, Any]]) -> None:
    """A table of the first rollouts (see `records.rollout_table`), read once for every backend."""
    if not _active:
        return
    table = rollout_table(rollouts)
    for exporter in get_exporters():
        _guarded(exporter, "cannot log the rollouts", exporter.export_rollouts, table)


@contextmanager
def open_exporters(cfg: DictConfig, deployment: DictConfig | None = None) -> Iterator[list[BaseExporter]]:
    """The available backends, open for the block and closed after it (also when it fails)."""
    setup_exporters(cfg, deployment)
    try:
        yield get_exporters()
    finally:
        teardown_exporters()


def export_results(
    aggregates: list[dict[str, Any]], results: Callable[[], Iterable[dict[str, Any]]], upload_rollouts: bool
) -> None:
    """What a command that produced results exports: the aggregate metrics, then (with `upload_rollouts`)
    the rollouts table; `results` is called only when a backend is open."""
    export_metrics(aggregate_metric_values(aggregates))
    if upload_rollouts and _active:
        export_rollouts(results())


def teardown_exporters() -> None:
    for exporter in get_exporters():
        _guarded(exporter, "cannot close its run", exporter.teardown)
    _active.clear()
    _secrets.clear()


def _guarded(exporter: BaseExporter, failing_to: str, action: Callable[..., None], *args: Any) -> bool:
    """Run `action(*args)`; on failure warn in one line (secrets masked) and drop the backend."""
    try:
        action(*args)
    except Exception as error:
        reason = first_line(error)
        for secret in _secrets:
            reason = reason.replace(secret, MASKED_VALUE)
        logger.warning(
            "%s exporter %s: %s; the run goes on without it", exporter.display_name, failing_to,
            without_url_passwords(reason),
        )  # fmt: skip
        if exporter in _active:
            _active.remove(exporter)
        return False
    return True
