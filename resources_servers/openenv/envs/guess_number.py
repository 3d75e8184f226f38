"""A number-guessing game written against openenv-core's `Environment` interface (0.1 API).

It is the folder's own environment, so the adapter ships with something runnable without OpenEnv's
git-installed example environments. One episode: the environment holds a secret integer in a range; every
step is one guess, answered "higher", "lower" or "correct". Guessing it pays 1.0 and ends the episode;
running out of guesses ends it with nothing paid.
"""

from dataclasses import dataclass

from openenv_core.env_server import Action, Environment, Observation, State


@dataclass(kw_only=True)
class GuessAction(Action):
    guess: int


@dataclass(kw_only=True)
class GuessObservation(Observation):
    message: str
    guesses_left: int


@dataclass
class GuessState(State):
    low: int = 1
    high: int = 100
    max_guesses: int = 7
    solved: bool = False


class GuessNumberEnvironment(Environment):
    def __init__(self) -> None:
        super().__init__()
        self._state = GuessState()
        self._target = 0

    def reset(
        self, target: int = 42, low: int = 1, high: int = 100, max_guesses: int = 7
    ) -> GuessObservation:
        if not low <= target <= high or max_guesses < 1:
            raise ValueError(f"need low <= target <= high and max_guesses >= 1, got {low}, {target}, {high}")
        self._target = target
        self._state = GuessState(episode_id=None, step_count=0, low=low, high=high, max_guesses=max_guesses)
        return GuessObservation(
            message=f"I am thinking of an integer from {low} to {high}. You have {max_guesses} guesses.",
            guesses_left=max_guesses,
            reward=0.0,
        )

    def step(self, action: GuessAction) -> GuessObservation:  # type: ignore[override]
        state = self._state
        if state.solved or state.step_count >= state.max_guesses:
            raise RuntimeError("the episode is over")
        state.step_count += 1
        left = state.max_guesses - state.step_count
        if action.guess == self._target:
            state.solved = True
            return GuessObservation(
                message=f"{action.guess} is correct.", guesses_left=left, reward=1.0, done=True
            )
        if not state.low <= action.guess <= state.high:
            hint = f"{action.guess} is outside {state.low}..{state.high}."
        else:
            hint = f"{action.guess} is too {'low' if action.guess < self._target else 'high'}: guess {'higher' if action.guess < self._target else 'lower'}."
        if left == 0:
            hint += f" No guesses left; the number was {self._target}."
        return GuessObservation(message=hint, guesses_left=left, reward=0.0, done=left == 0)

    @property
    def state(self) -> GuessState:
        return self._state
