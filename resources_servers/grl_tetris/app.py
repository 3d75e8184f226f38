"""grl_tetris: clear a row of a small Tetris board, a reset/step environment (`base_gymnasium_server`).

The row gives the board size, the piece set and the seed of the piece sequence. Each step plays the moves
of every `<action>` tag of the reply, in order (`<action>Left</action><action>Down</action>`), and shows
the board again. As in GRL, every move costs 0.1 and a cleared row earns 10; the step's reward is the sum
over its moves, so the rollout's reward is the game's cumulative score. Clearing a row ends the episode as
a success, a piece locking in the top row ends it as a failure, and running out of turns truncates it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nemo_gym.envkit.gymnasium_server import (
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    extract_text,
    parse_metadata,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.grl_tetris.tetris import Tetris, parse_actions

MAX_SIDE = 12
RULES = (
    "Tetris on a {width}-wide, {height}-tall board: _ is empty, # a settled block, X the falling piece. "
    "Move the piece with <action>Left</action>, <action>Right</action> or <action>Down</action>; several "
    "tags in one reply are played in order, at most {moves} per turn. A piece settles as soon as it cannot "
    "go down. Fill a whole row to clear it and win; a piece settling in the top row ends the game. Every "
    "move costs 0.1 points, a cleared row earns 10. You have {turns} turn(s)."
)


class EnvConfig(BaseModel):
    """NeMo Gym's `env_config` keys that mean something here: the defaults for rows that do not say."""

    model_config = ConfigDict(extra="forbid")
    dim_x: int = Field(default=4, ge=2, le=MAX_SIDE, description="board width")
    dim_y: int = Field(default=4, ge=2, le=MAX_SIDE, description="board height")
    box_type: int = Field(
        default=3, description="2: dominoes, 3: dominoes and 2x2 squares, else single cells"
    )


class TetrisConfig(GymnasiumServerConfig):
    env_config: EnvConfig = Field(default_factory=EnvConfig)
    max_turns: int = Field(default=10, ge=1, description="steps per episode unless the row sets max_turns")
    max_actions_per_turn: int = Field(default=20, ge=1, description="moves played from one reply at most")


class TetrisTask(BaseModel):
    """NeMo Gym's row fields (`dim_board` is [width, height], an alternative to `dim_x`/`dim_y`)."""

    seed: int = 0
    dim_x: int | None = Field(default=None, ge=2, le=MAX_SIDE)
    dim_y: int | None = Field(default=None, ge=2, le=MAX_SIDE)
    dim_board: tuple[int, int] | None = None
    box_type: int | None = None
    max_turns: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_size(self) -> TetrisTask:
        if self.dim_board is not None:
            if self.dim_x is not None or self.dim_y is not None:
                raise ValueError("dim_board: give the size either as dim_board or as dim_x/dim_y")
            if not all(2 <= side <= MAX_SIDE for side in self.dim_board):
                raise ValueError(f"dim_board: each side is 2 to {MAX_SIDE}")
            self.dim_x, self.dim_y = self.dim_board
        return self


class TetrisServer(GymnasiumServer):
    config: TetrisConfig

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(TetrisTask, metadata)
        defaults = self.config.env_config
        width, height = task.dim_x or defaults.dim_x, task.dim_y or defaults.dim_y
        box_type = defaults.box_type if task.box_type is None else task.box_type
        game = Tetris.new(width, height, box_type, task.seed)
        turns = task.max_turns or self.config.max_turns
        self.episode_state(session_id).update(game=game, turns_left=turns, score=0.0)
        rules = RULES.format(width=width, height=height, moves=self.config.max_actions_per_turn, turns=turns)
        return f"{rules}\n\n{_picture(game)}", {}

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        state = self.episode_state(session_id)
        game: Tetris = state["game"]
        moves, problem = parse_actions(extract_text(action), self.config.max_actions_per_turn)
        reward, played = 0.0, []
        for move in moves:
            gained, outcome = game.move(move)
            reward += gained
            played.append(f"{move} ({outcome})")
            if game.over:
                break
        reward = round(reward, 6)
        state["turns_left"] -= 1
        state["score"] = round(state["score"] + reward, 6)
        info = {
            "moves": played,
            "problem": problem,
            "success": game.success,
            "lines_cleared": game.lines,
            "total_reward": state["score"],
        }
        report = f"Moves: {', '.join(played) or 'none'}." + (f" Note: {problem}." if problem else "")
        if game.over:
            verdict = "Row cleared: you win!" if game.success else "Game over: the stack reached the top."
            return f"{report} {verdict}\n\n{_picture(game)}", reward, True, False, info
        status = f"Score so far: {state['score']:g}. Turns left: {state['turns_left']}."
        return f"{report} {status}\n\n{_picture(game)}", reward, False, state["turns_left"] == 0, info


def _picture(game: Tetris) -> str:
    return "\n".join(game.render())


if __name__ == "__main__":
    TetrisServer.run_webserver()
