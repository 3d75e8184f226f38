"""NeMo Gym's import path for `nemo_gym.config.global_config`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.config import global_config

sys.modules[__name__] = global_config
