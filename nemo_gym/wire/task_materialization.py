"""NeMo Gym's import path for turning a flat task row into an episode's task; see `nemo_gym.wire.episodes`."""

from nemo_gym.wire.episodes import is_materialized_task_row as is_materialized_task_row
from nemo_gym.wire.episodes import materialize_task as materialize_task
