"""NeMo Gym's import path for `nemo_gym.datasets.prompts`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.datasets import prompts

sys.modules[__name__] = prompts
