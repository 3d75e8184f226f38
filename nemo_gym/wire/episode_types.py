"""NeMo Gym's import path for episode shapes (`EpisodeId`, `TaskId`, requests, responses, failures);
they live in `nemo_gym.wire`."""

from nemo_gym.wire.episodes import BaseEpisodeRequest as BaseEpisodeRequest
from nemo_gym.wire.episodes import BaseEpisodeResponse as BaseEpisodeResponse
from nemo_gym.wire.episodes import EpisodeFailure as EpisodeFailure
from nemo_gym.wire.episodes import FailureStage as FailureStage
from nemo_gym.wire.episodes import MaterializedTask as MaterializedTask
from nemo_gym.wire.episodes import is_materialized_task_row as is_materialized_task_row
from nemo_gym.wire.sessions import ROLLOUT_ID_PATTERN as ROLLOUT_ID_PATTERN
from nemo_gym.wire.sessions import EpisodeId as EpisodeId
from nemo_gym.wire.sessions import TaskId as TaskId
