"""Weights & Biases logging of a rollout collection, active only when `wandb_project`, `wandb_name` and
`wandb_api_key` are all set. `wandb` is imported only then, so a run without W&B never pays for it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omegaconf import DictConfig, OmegaConf

from nemo_gym.config_types import AGENT_REF_KEY, ConfigError, WANDBConfig
from nemo_gym.global_config import command_settings, mask_secrets

# W&B renders tables of at most this many rows well; the full results stay in the JSONL file.
MAX_TABLE_ROWS = 10_000
ROLLOUT_TABLE_COLUMNS = ["task", "rollout", "agent", "reward", "final_text"]


def final_text(result: dict[str, Any]) -> str:
    """The text of the last assistant message of a rollout ("" when it ended on a tool call)."""
    for item in reversed((result.get("response") or {}).get("output") or []):
        if item.get("type") == "message" and item.get("role", "assistant") == "assistant":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


def primitive_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metrics.items() if isinstance(value, bool | int | float | str)}


class WandbRun:
    """One W&B run for one collection: the masked config at start, then metrics and a rollouts table."""

    def __init__(self, run: Any, wandb_module: Any) -> None:
        self._run = run
        self._wandb = wandb_module

    @classmethod
    def start_if_configured(cls, cfg: DictConfig, deployment: DictConfig | None = None) -> WandbRun | None:
        """Start a run when configured; its config is `cfg` (plus the deployment's, under `deployment`),
        secrets masked."""
        settings = command_settings(WANDBConfig, cfg)
        if not settings.is_active:
            return None
        try:
            import wandb
        except ImportError as error:
            raise ConfigError(
                "wandb_project/wandb_name/wandb_api_key are set but the wandb package is not installed; "
                "install it with `pip install 'nemo-gym[wandb]'` or unset those keys"
            ) from error
        run = wandb.init(
            project=settings.wandb_project,
            name=settings.wandb_name,
            config=mask_secrets(
                {
                    **OmegaConf.to_container(cfg, resolve=False),
                    **(
                        {"deployment": OmegaConf.to_container(deployment, resolve=False)}
                        if deployment
                        else {}
                    ),
                }
            ),
            # No system metadata: it includes the command line, which may carry `+wandb_api_key=...`.
            settings=wandb.Settings(api_key=settings.wandb_api_key, silent=True, x_disable_meta=True),
        )
        return cls(run, wandb)

    def log_aggregates(self, entries: list[dict[str, Any]]) -> None:
        """`<agent>/<metric>` for every primitive agent metric and `key_metrics/<agent>/<metric>`."""
        logged: dict[str, Any] = {}
        for entry in entries:
            agent = entry[AGENT_REF_KEY]["name"]
            logged.update(
                {f"{agent}/{key}": value for key, value in primitive_metrics(entry["agent_metrics"]).items()}
            )
            logged.update(
                {
                    f"key_metrics/{agent}/{key}": value
                    for key, value in primitive_metrics(entry["key_metrics"]).items()
                }
            )
        if logged:
            self._run.log(logged)

    def log_rollouts(self, results: Iterable[dict[str, Any]]) -> None:
        """A table of the first MAX_TABLE_ROWS rollouts: task, rollout, agent, reward, final text."""
        table = self._wandb.Table(columns=ROLLOUT_TABLE_COLUMNS)
        for count, result in enumerate(results):
            if count >= MAX_TABLE_ROWS:
                break
            agent = (result.get(AGENT_REF_KEY) or {}).get("name")
            table.add_data(
                result.get("_ng_task_index"), result.get("_ng_rollout_index"), agent, result.get("reward"),
                final_text(result),
            )  # fmt: skip
        self._run.log({"rollouts": table})

    def finish(self) -> None:
        self._run.finish()
