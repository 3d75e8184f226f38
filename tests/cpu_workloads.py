"""Module-level functions for tests of nemo_gym.cpu_pool (worker processes import them by name)."""

import os


def square(value: int) -> tuple[int, int]:
    return value * value, os.getpid()


def spin_forever() -> None:
    while True:
        pass


def fail(message: str) -> None:
    raise ValueError(message)
