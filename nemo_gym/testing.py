"""NeMo Gym's import path for `nemo_gym.envkit.testing`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.envkit import testing

sys.modules[__name__] = testing
