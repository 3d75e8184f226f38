"""NeMo Gym's import path for `nemo_gym.datasets.benchmarks`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.datasets import benchmarks

sys.modules[__name__] = benchmarks
