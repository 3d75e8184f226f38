"""example_multi_turn_gymnasium: a scripted user asks follow-up questions; the last answer is graded.

The smallest reset/step environment (`nemo_gym.envkit.gymnasium_server`): the row's `follow_ups` are asked one
per step, as the observations the agent shows the model next; the step after the last follow-up is the
final answer, rewarded 1.0 if it contains `expected_answer` (ignoring case), and ends the episode.
"""

from typing import Any

from pydantic import BaseModel

from nemo_gym.envkit.gymnasium_server import GymnasiumServer, StepResult, extract_text, parse_metadata
from nemo_gym.openai_utils import NeMoGymResponse


class FollowUpTask(BaseModel):
    follow_ups: list[str] = []
    expected_answer: str


class MultiTurnGymnasiumServer(GymnasiumServer):
    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        """Nothing to add to the row's prompt: the first question is already in it."""
        task = parse_metadata(FollowUpTask, metadata)
        state = self.episode_state(session_id)
        state["follow_ups"] = task.follow_ups
        state["expected_answer"] = task.expected_answer
        state["asked"] = 0
        return None, {}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        if state["asked"] < len(state["follow_ups"]):
            state["asked"] += 1
            return state["follow_ups"][state["asked"] - 1], 0.0, False, False, {}
        found = state["expected_answer"].lower() in extract_text(action).lower()
        return None, 1.0 if found else 0.0, True, False, {}


if __name__ == "__main__":
    MultiTurnGymnasiumServer.run_webserver()
