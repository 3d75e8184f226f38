"""NeMo Gym 0.7's top-level `token_id_capture` block: whose rollouts have their model calls' training tokens
recorded, and where.

Gym records to files: an environment server asks for capture by calling its agent under
`/ng-rollout/<key>/training-token-capture/`, the agent's model calls carry that prefix on, and each model
server appends one JSON line per call to `<dir>/<key>.jsonl` (`nemo_gym.serving.token_capture`). The block's other
keys (0.7's pluggable sinks, lineage stores, external staging) are accepted for compatibility and have no
effect, which the parse says once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, ValidationError

from nemo_gym.config.discovery import get_first_server_config_dict
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import (
    MODEL_CALL_CAPTURE_DIR_KEY_NAME,
    RESULTS_DIR_KEY_NAME,
    TOKEN_ID_CAPTURE_BLOCK,
)
from nemo_gym.wire.validation_errors import first_problem

logger = logging.getLogger("nemo_gym.global_config")

DEFAULT_CAPTURE_SUBDIR = "token_id_capture"
# The keys Gym acts on; any other key of the block set in a config is reported as having no effect.
EFFECTIVE_KEYS = frozenset({"enabled", "all_agents", "dir"})


class TokenIdCaptureConfig(BaseModel):
    """NeMo Gym 0.7's `token_id_capture` block, key for key."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    all_agents: bool = False
    dir: str | None = None
    sink: str | None = None
    sink_kwargs: dict[str, Any] = {}
    lineage_store: str | None = None
    lineage_store_kwargs: dict[str, Any] = {}
    rebuild_response: bool = True
    allow_unresolved_continuations: bool = False
    delta_records: bool = False
    max_mask_fraction: float | None = None
    mask_fraction_min_samples: int = 50
    external_staging: bool = False
    external_staging_backend: Literal["vllm_worker", "megatron_worker"] = "vllm_worker"
    control_auth_token_env: str = "NEMO_GYM_TOKEN_CAPTURE_CONTROL_TOKEN"

    def agent_opted_in(self, agent_config: Mapping[str, Any]) -> bool:
        """Whether the block covers an agent: every agent, or this one by its own `token_id_capture: true`."""
        return self.all_agents or bool(agent_config.get(TOKEN_ID_CAPTURE_BLOCK, False))


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value


def token_id_capture_config(cfg: Mapping[str, Any], cwd: Path | None = None) -> TokenIdCaptureConfig:
    """The checked block of a merged config (ConfigError naming the problem). When enabled, `dir` is an
    absolute path: the block's own, else `model_call_capture_dir`, else `<results_dir or cwd>/token_id_capture`,
    a relative one taken from `cwd` (default: the current directory)."""
    block = _plain(cfg.get(TOKEN_ID_CAPTURE_BLOCK)) or {}
    try:
        capture = TokenIdCaptureConfig.model_validate(block)
    except ValidationError as error:
        raise ConfigError(f"{TOKEN_ID_CAPTURE_BLOCK}: {first_problem(error)}") from None
    if not capture.enabled:
        return capture
    base = cwd if cwd is not None else Path.cwd()
    chosen = capture.dir or cfg.get(MODEL_CALL_CAPTURE_DIR_KEY_NAME)
    if not chosen:
        chosen = Path(cfg.get(RESULTS_DIR_KEY_NAME) or base) / DEFAULT_CAPTURE_SUBDIR
    return capture.model_copy(update={"dir": str((base / Path(chosen)).resolve())})


def complete_token_id_capture(cfg: DictConfig, cwd: Path) -> None:
    """Check the block of a config being parsed (in place); when enabled, write its directory into it as an
    absolute path, so every server process, whatever its working directory, writes to the same place."""
    if TOKEN_ID_CAPTURE_BLOCK not in cfg:
        return
    capture = token_id_capture_config(cfg, cwd)
    ignored = sorted(capture.model_fields_set - EFFECTIVE_KEYS)
    if ignored:
        logger.warning(
            "%s: %s ha%s no effect in Gym, which records each captured call to <dir>/<rollout key>.jsonl",
            TOKEN_ID_CAPTURE_BLOCK,
            ", ".join(ignored),
            "s" if len(ignored) == 1 else "ve",
        )
    if not capture.enabled:
        return
    if not cfg[TOKEN_ID_CAPTURE_BLOCK].get("dir") and not cfg.get(MODEL_CALL_CAPTURE_DIR_KEY_NAME):
        logger.warning(
            "%s: no dir (nor model_call_capture_dir) set; training tokens are recorded under %s",
            TOKEN_ID_CAPTURE_BLOCK,
            capture.dir,
        )
    cfg[TOKEN_ID_CAPTURE_BLOCK] = capture.model_dump(exclude_unset=True)


def agent_token_capture(cfg: DictConfig, agent_name: str) -> bool:
    """Whether the rollouts of agent instance `agent_name` of a merged config are to be captured."""
    capture = token_id_capture_config(cfg)
    return capture.enabled and capture.agent_opted_in(get_first_server_config_dict(cfg, agent_name))
