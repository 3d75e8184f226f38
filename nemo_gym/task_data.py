"""NeMo Gym's import path for `nemo_gym.datasets.task_data`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.datasets import task_data

sys.modules[__name__] = task_data
