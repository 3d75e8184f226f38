"""NeMo Gym's import path for `nemo_gym.wire.episode_types`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.wire import episode_types

sys.modules[__name__] = episode_types
