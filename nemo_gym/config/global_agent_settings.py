"""Top-level settings that NeMo Gym 0.7 hands to every agent: `skip_verification` and
`skip_verification_reward` are copied into each agent's config that does not set them itself (the
`token_id_capture` block is read where it acts: `nemo_gym.config.token_id_capture`)."""

from __future__ import annotations

from typing import Any

from nemo_gym.config.key_names import (
    AGENT_SERVER_TYPE_KEY_NAME,
    SKIP_VERIFICATION_KEY_NAME,
    SKIP_VERIFICATION_REWARD_KEY_NAME,
)


def apply_global_agent_settings(tree: dict[str, Any]) -> None:
    """Copy the top-level skip_verification settings into the agents (in place)."""
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
