"""Processes that end with their parent, so no child of a Gym process is left behind when it dies, even
by SIGKILL (when none of its own cleanup runs)."""

from __future__ import annotations

import ctypes
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: signal.Signals) -> bool:
    """Ask Linux to send this process `sig` when the thread that started it ends; False where that cannot
    be asked (the caller then needs another way to notice)."""
    if not sys.platform.startswith("linux"):
        return False
    return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig) == 0
