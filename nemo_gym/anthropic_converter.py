"""NeMo Gym's import path for `nemo_gym.serving.anthropic_converter`: the same module under its NeMo Gym name."""

import sys

from nemo_gym.serving import anthropic_converter

sys.modules[__name__] = anthropic_converter
