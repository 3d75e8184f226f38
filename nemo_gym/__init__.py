"""Gym: serve reinforcement-learning environments to LLM trainers (import name kept from NeMo Gym).

The package root carries NeMo Gym's path constants and hands out its most used classes lazily, so
`from nemo_gym import SimpleResourcesServer` works while `import nemo_gym` itself stays light.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

__package_name__ = "nemo-gym"

ROOT_DIR = Path(__file__).resolve().parent
# The repository root for a checkout or editable install, site-packages for a wheel: where the server
# folders (resources_servers/, ...) are found.
PARENT_DIR = ROOT_DIR.parent
WORKING_DIR = PARENT_DIR if (PARENT_DIR / "pyproject.toml").exists() else Path.cwd()
CACHE_DIR = WORKING_DIR / "cache"
RESULTS_DIR = WORKING_DIR / "results"
# More folders holding server folders (NeMo Gym 0.7's variable; `--search-dir` extends it for a command and
# the servers it starts).
EXTRA_ROOTS_ENV_VAR_NAME = "NEMO_GYM_EXTRA_ROOTS"


def extra_roots() -> list[Path]:
    """The folders of NEMO_GYM_EXTRA_ROOTS, in order."""
    listed = os.environ.get(EXTRA_ROOTS_ENV_VAR_NAME, "").split(os.pathsep)
    return [Path(entry).expanduser() for entry in listed if entry]


# name -> module that defines it.
_LAZY_NAMES = {
    **dict.fromkeys(
        (
            "BaseResourcesServerConfig",
            "SimpleResourcesServer",
            "BaseRunRequest",
            "BaseVerifyRequest",
            "BaseVerifyResponse",
            "BaseSeedSessionRequest",
            "BaseSeedSessionResponse",
        ),
        "nemo_gym.base_resources_server",
    ),
    **dict.fromkeys(
        ("BaseResponsesAPIAgentConfig", "SimpleResponsesAPIAgent"), "nemo_gym.base_responses_api_agent"
    ),
    **dict.fromkeys(
        ("BaseResponsesAPIModelConfig", "SimpleResponsesAPIModel"), "nemo_gym.base_responses_api_model"
    ),
    **dict.fromkeys(
        ("ServerClient", "raise_for_status", "get_response_json", "SESSION_ID_KEY"), "nemo_gym.server_utils"
    ),
    **dict.fromkeys(
        (
            "BaseServerConfig",
            "BaseRunServerInstanceConfig",
            "Domain",
            "AggregateMetrics",
            "AggregateMetricsRequest",
            "ModelServerRef",
        ),
        "nemo_gym.config_types",
    ),
    **dict.fromkeys(
        (
            "NeMoGymAsyncOpenAI",
            "NeMoGymResponse",
            "NeMoGymResponseCreateParamsNonStreaming",
            "NeMoGymChatCompletion",
            "NeMoGymChatCompletionCreateParamsNonStreaming",
        ),
        "nemo_gym.openai_utils",
    ),
}


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read from the installed metadata on first use: a scan `import nemo_gym` skips
        from importlib import metadata

        try:
            return metadata.version(__package_name__)
        except metadata.PackageNotFoundError:  # running from a checkout that was never installed
            return "0.0.0"
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'nemo_gym' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY_NAMES, "__version__"])
