"""NeMo Gym's import path for `nemo_gym.serving.environment_server`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import environment_server

sys.modules[__name__] = environment_server
