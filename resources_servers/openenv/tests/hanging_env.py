"""A guessing game whose steps take far longer than the test's deadline, to exercise the adapter's."""

import threading

from resources_servers.openenv.envs.guess_number import GuessAction, GuessNumberEnvironment, GuessObservation

# Set by nobody: a step waits out its full minute, well past any deadline the test configures.
NEVER = threading.Event()


class HangingGuessEnvironment(GuessNumberEnvironment):
    def step(self, action: GuessAction) -> GuessObservation:  # type: ignore[override]
        NEVER.wait(60)
        return super().step(action)
