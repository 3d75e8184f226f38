"""NeMo Gym's import path for `nemo_gym.serving.responses_streaming`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import responses_streaming

sys.modules[__name__] = responses_streaming
