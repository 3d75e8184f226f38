"""wordle: guess the row's secret word with three tools, a reset/step environment (`base_gymnasium_server`).

The model plays through function calls: `submit_guess` (uses a turn, answers the G/Y/_ feedback),
`check_word_validity` and `get_game_state` (both free). Each `/step` runs the calls of one reply in order
and hands their outputs back through `info["tool_outputs"]`; the episode ends when the game is won or
lost, or when a reply calls no tool (the game is then incomplete). The reward comes at the end: a win earns
2.0 - 0.2 x (turns - 1) (a first-guess win counts as three turns) less the penalties for play that ignored
the feedback, at least 0.1; a loss or an incomplete game earns 0.0.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, Field, ValidationError, model_validator

from nemo_gym.envkit.gymnasium_server import (
    GymnasiumServer,
    GymnasiumServerConfig,
    StepResult,
    parse_metadata,
)
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.wordle.game import Game, check_word

TOOLS = ("submit_guess", "check_word_validity", "get_game_state")


class WordleConfig(GymnasiumServerConfig):
    pass


class WordleTask(BaseModel):
    """NeMo Gym's row fields: the target is pinned, so every rollout of a row plays the same word."""

    custom_target: str = Field(min_length=1)
    word_length: int = Field(default=5, ge=2, le=15)
    max_turns: int = Field(default=6, ge=1, le=30)

    @model_validator(mode="after")
    def _playable_target(self) -> WordleTask:
        problem = check_word(self.custom_target.lower(), self.word_length)
        if problem is not None:
            raise ValueError(f"custom_target: {problem}")
        return self


class GuessArguments(BaseModel):
    guess: str


class WordArguments(BaseModel):
    word: str


class WordleServer(GymnasiumServer):
    config: WordleConfig

    async def reset(self, metadata: dict[str, Any], session_id: str) -> tuple[str | None, dict[str, Any]]:
        task = parse_metadata(WordleTask, metadata)
        game = Game(target=task.custom_target.lower(), max_turns=task.max_turns)
        self.episode_state(session_id)["game"] = game
        return (
            f"A secret {task.word_length}-letter word has been chosen; you have {task.max_turns} guesses. "
            "Play with the tools: submit_guess answers G (right letter, right place), Y (in the word, "
            "elsewhere) or _ (not in the word) per letter; check_word_validity and get_game_state are free.",
            {},
        )

    async def step(self, action: NeMoGymResponse, metadata: dict[str, Any], session_id: str) -> StepResult:
        game: Game = self.episode_state(session_id)["game"]
        calls = [item for item in action.output if getattr(item, "type", None) == "function_call"]
        outputs = []
        for call in calls:
            if game.over:
                break
            answer = _run_tool(game, call.name, call.arguments)
            outputs.append({"call_id": call.call_id, "output": orjson.dumps(answer).decode()})
        info: dict[str, Any] = {"tool_outputs": outputs, **_summary(game)}
        if game.over or not calls:
            return None, game.reward(), True, False, info
        return None, 0.0, False, False, info


def _run_tool(game: Game, name: str, arguments: str) -> dict[str, Any]:
    """One tool call's answer; a wrong name or malformed arguments is reported to the model, not raised."""
    try:
        if name == "submit_guess":
            return game.guess(GuessArguments.model_validate_json(arguments).guess)
        if name == "check_word_validity":
            word = WordArguments.model_validate_json(arguments).word.strip().lower()
            problem = check_word(word, len(game.target))
            return {"valid": problem is None, "reason": problem or f"{word!r} can be guessed"}
        if name == "get_game_state":
            return game.state()
    except ValidationError as error:
        return {"error": f"bad arguments for {name}: {error.errors()[0]['msg']} ({error.errors()[0]['loc']})"}
    return {"error": f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}"}


def _summary(game: Game) -> dict[str, Any]:
    """The step's info: the game so far, and NeMo Gym's numeric outcome fields (win rate, turns to win)."""
    return {
        "game_outcome": game.outcome,
        "turns_used": game.turns,
        "guesses": list(game.guesses),
        "penalties": dict(game.penalties),
        "won": 1.0 if game.won else 0.0,
        "turns_if_won": float(game.turns) if game.won else 0.0,
    }


if __name__ == "__main__":
    WordleServer.run_webserver()
