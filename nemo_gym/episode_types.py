"""NeMo Gym's import path for a rollout's identity (`EpisodeId`, `TaskId`); they live in `nemo_gym.wire.sessions`."""

from nemo_gym.wire.sessions import ROLLOUT_ID_PATTERN as ROLLOUT_ID_PATTERN
from nemo_gym.wire.sessions import EpisodeId as EpisodeId
from nemo_gym.wire.sessions import TaskId as TaskId
