"""NeMo Gym's import path for `nemo_gym.serving.model_server`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import model_server

sys.modules[__name__] = model_server
