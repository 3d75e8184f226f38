"""NeMo Gym's import path for `nemo_gym.collection.rollout_health`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.collection import rollout_health

sys.modules[__name__] = rollout_health
