"""Import path kept for environments written for NeMo Gym (`from resources_servers.gymnasium import ...`).

The base lives in the core, `nemo_gym.envkit.gymnasium_server`; this package only re-exports it and is not an
environment itself (no configs, no README).
"""

from nemo_gym.envkit.gymnasium_server import (
    EnvResetRequest,
    EnvResetResponse,
    EnvStepRequest,
    EnvStepResponse,
    GymnasiumServer,
    GymnasiumServerConfig,
    extract_text,
)

__all__ = [
    "EnvResetRequest",
    "EnvResetResponse",
    "EnvStepRequest",
    "EnvStepResponse",
    "GymnasiumServer",
    "GymnasiumServerConfig",
    "extract_text",
]
