"""NeMo Gym's import path for `nemo_gym.envkit.reward_profile`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.envkit import reward_profile

sys.modules[__name__] = reward_profile
