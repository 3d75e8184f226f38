"""NeMo Gym's import path for the single-agent-turn episode shapes; they live in `nemo_gym.wire.episodes`."""

from nemo_gym.wire.episodes import SingleAgentTurnFailure as SingleAgentTurnFailure
from nemo_gym.wire.episodes import SingleAgentTurnRequest as SingleAgentTurnRequest
from nemo_gym.wire.episodes import SingleAgentTurnResponse as SingleAgentTurnResponse
from nemo_gym.wire.episodes import SingleAgentTurnResult as SingleAgentTurnResult
from nemo_gym.wire.episodes import SingleAgentTurnTaskInput as SingleAgentTurnTaskInput
