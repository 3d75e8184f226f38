"""NeMo Gym's import path for `nemo_gym.wire.task_materialization`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.wire import task_materialization

sys.modules[__name__] = task_materialization
