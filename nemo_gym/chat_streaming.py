"""NeMo Gym's import path for `nemo_gym.serving.chat_streaming`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import chat_streaming

sys.modules[__name__] = chat_streaming
