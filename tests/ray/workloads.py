"""Module-level functions the Ray tests run as tasks: a Ray worker imports them by name, through the
PYTHONPATH the `ray` backend of nemo_gym.serving.cpu_pool hands it. Ray is imported inside them: the test process
must not load Ray before the cluster fixture has set the cluster's environment (Ray reads it on import)."""

import os
import signal
from pathlib import Path


def square_and_node(value: int) -> tuple[int, str]:
    """The square of `value` and the node that computed it."""
    import ray

    return value * value, ray.get_runtime_context().get_node_id()


def ignore_the_deadline_and_spin(pid_file: str) -> None:
    """Work the in-worker deadline cannot interrupt (as C code that never returns to Python): only
    cancelling the task stops it. Publishes its worker's pid first, whole (written aside, then renamed)."""
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    aside = Path(f"{pid_file}.partial")
    aside.write_text(str(os.getpid()))
    aside.rename(pid_file)
    while True:
        pass
