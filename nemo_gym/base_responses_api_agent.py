"""NeMo Gym's import path for `nemo_gym.serving.agent_server`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import agent_server

sys.modules[__name__] = agent_server
