"""NeMo Gym's import path for `nemo_gym.envkit.judge`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.envkit import judge

sys.modules[__name__] = judge
