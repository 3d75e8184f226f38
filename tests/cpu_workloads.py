"""Module-level functions for tests of nemo_gym.serving.cpu_pool (worker processes import them by name)."""

import os


def square(value: int) -> tuple[int, int]:
    return value * value, os.getpid()


def spin_forever() -> None:
    while True:
        pass


def fail(message: str) -> None:
    raise ValueError(message)


def spin_inside_a_catch_all() -> str:
    """Like a library that wraps its work in `except Exception` and keeps going."""
    while True:
        try:
            while True:
                pass
        except Exception:
            continue
