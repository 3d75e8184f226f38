"""grl_sokoban: push every box onto a goal, a reset/step environment (`nemo_gym.envkit.gymnasium_server`).

The row gives the level in the usual Sokoban notation. Each step plays the moves of the reply's last
`<action>` tag (e.g. `<action>up, left, left</action>`) and shows the board again; solving the level within
`max_turns` steps earns 1.0 and ends the episode, running out of turns ends it truncated with 0.0.
"""

from typing import Any

from pydantic import BaseModel, Field, field_validator

from nemo_gym.envkit.gymnasium_server import (
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    extract_text,
    parse_metadata,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.grl_sokoban.sokoban import Board, parse_moves

RULES = (
    "Sokoban: push every box ($) onto a goal (.). # is a wall, @ is you (+ on a goal), * is a box on a goal. "
    "You push a box by walking into it, one box at a time, and cannot pull. Reply with your moves in one "
    "tag, e.g. <action>up, left, left</action>; moves are up, down, left and right. You have {turns} "
    "turn(s) of at most {moves} moves each."
)


class SokobanConfig(GymnasiumServerConfig):
    max_turns: int = Field(default=10, ge=1, description="steps per episode unless the row sets max_turns")
    max_moves_per_turn: int = Field(default=20, ge=1, description="moves played from one reply at most")


class SokobanTask(BaseModel):
    level: list[str]
    max_turns: int | None = Field(default=None, ge=1)

    @field_validator("level")
    @classmethod
    def _playable(cls, level: list[str]) -> list[str]:
        Board.parse(level)
        return level


class SokobanServer(GymnasiumServer):
    config: SokobanConfig

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(SokobanTask, metadata)
        board = Board.parse(task.level)
        turns = task.max_turns or self.config.max_turns
        self.episode_state(session_id).update(board=board, turns_left=turns)
        rules = RULES.format(turns=turns, moves=self.config.max_moves_per_turn)
        return f"{rules}\n\n{_picture(board)}", {}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        board: Board = state["board"]
        moves, problem = parse_moves(extract_text(action), self.config.max_moves_per_turn)
        played = []
        for move in moves:
            played.append(f"{move} ({board.move(move)})")
            if board.solved():
                break
        state["turns_left"] -= 1
        info = {"moves": played, "problem": problem, "solved": board.solved()}
        report = f"Moves: {', '.join(played) or 'none'}." + (f" Note: {problem}." if problem else "")
        if board.solved():
            return f"{report} Solved!\n\n{_picture(board)}", 1.0, True, False, info
        done = sum(box in board.goals for box in board.boxes)
        status = f"Boxes on goals: {done}/{len(board.goals)}. Turns left: {state['turns_left']}."
        return f"{report} {status}\n\n{_picture(board)}", 0.0, False, state["turns_left"] == 0, info


def _picture(board: Board) -> str:
    return "\n".join(board.render())


if __name__ == "__main__":
    SokobanServer.run_webserver()
