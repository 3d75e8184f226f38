"""NeMo Gym's import path for `nemo_gym.serving.resources_server`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import resources_server

sys.modules[__name__] = resources_server
