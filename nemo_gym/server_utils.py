"""NeMo Gym's import path for `nemo_gym.serving.servers`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import servers

sys.modules[__name__] = servers
