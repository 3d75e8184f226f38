"""Weights & Biases: one run per collection holding the masked config, the metrics and a rollouts table.
`wandb` is imported in `setup` only, so a run without W&B keys never loads it."""

from __future__ import annotations

from typing import Any, ClassVar

from nemo_gym.config.cli_models import WANDBConfig
from nemo_gym.config.settings import command_settings
from nemo_gym.exporters.base import BaseExporter, ExporterUnavailable
from nemo_gym.exporters.records import RolloutTable

ROLLOUTS_TABLE_KEY = "rollouts"


class WandbExporter(BaseExporter):
    display_name: ClassVar[str] = "W&B"

    def setup(self) -> None:
        settings = command_settings(WANDBConfig, self.global_config_dict)
        try:
            import wandb
        except ImportError:
            raise ExporterUnavailable(
                "wandb_project/wandb_name/wandb_api_key are set but the wandb package is not installed; "
                "install it with `pip install 'nemo-gym[wandb]'` or unset those keys"
            ) from None
        self._wandb = wandb
        self._run = wandb.init(
            project=settings.wandb_project,
            name=settings.wandb_name,
            # No system metadata: it includes the command line, which may carry `+wandb_api_key=...`.
            settings=wandb.Settings(api_key=settings.wandb_api_key, silent=True, x_disable_meta=True),
        )

    def export_config(self) -> None:
        self._run.config.update(self.masked_config())

    def export_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        if metrics:
            self._run.log(metrics, step=step)

    def export_rollouts(self, table: RolloutTable) -> None:
        logged = self._wandb.Table(columns=table.columns)
        for row in table.rows:
            logged.add_data(*row)
        self._run.log({ROLLOUTS_TABLE_KEY: logged})

    def teardown(self) -> None:
        self._run.finish()
