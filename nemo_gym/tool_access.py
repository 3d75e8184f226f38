"""NeMo Gym's import path for `nemo_gym.wire.tool_access`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.wire import tool_access

sys.modules[__name__] = tool_access
