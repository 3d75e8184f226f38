"""Top-level settings that NeMo Gym 0.7 hands to every agent: `skip_verification` and
`skip_verification_reward` are copied into each agent's config that does not set them itself, and the
`token_id_capture` block is checked (its keys are NeMo Gym's; Gym does not capture through it)."""

from __future__ import annotations

import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import (
    AGENT_SERVER_TYPE_KEY_NAME,
    SKIP_VERIFICATION_KEY_NAME,
    SKIP_VERIFICATION_REWARD_KEY_NAME,
    TOKEN_ID_CAPTURE_BLOCK,
)
from nemo_gym.validation_errors import first_problem

logger = logging.getLogger("nemo_gym.global_config")


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


def apply_global_agent_settings(tree: dict[str, Any]) -> None:
    """Copy the top-level skip_verification settings into the agents (in place); check token_id_capture."""
    pushed = {
        key: tree[key]
        for key in (SKIP_VERIFICATION_KEY_NAME, SKIP_VERIFICATION_REWARD_KEY_NAME)
        if key in tree
    }
    if pushed:
        for instance in tree.values():
            implementations = instance.get(AGENT_SERVER_TYPE_KEY_NAME) if isinstance(instance, dict) else None
            for inner in (implementations or {}).values():
                if isinstance(inner, dict):
                    for key, value in pushed.items():
                        inner.setdefault(key, value)
    block = tree.get(TOKEN_ID_CAPTURE_BLOCK)
    if block is None:
        return
    try:
        capture = TokenIdCaptureConfig.model_validate(block)
    except ValidationError as error:
        raise ConfigError(f"{TOKEN_ID_CAPTURE_BLOCK}: {first_problem(error)}") from None
    if capture.enabled:
        logger.warning(
            "%s.enabled: Gym does not capture training tokens through this block; a model server in training "
            "mode (return_token_id_information: true) returns each turn's token ids and log-probs instead",
            TOKEN_ID_CAPTURE_BLOCK,
        )
