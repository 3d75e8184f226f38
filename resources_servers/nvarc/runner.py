"""Runs INSIDE the sandbox (standard library only): the model's `transform()` on the test input.

Reads `solution.py` and `task.json` (`test_input`, `timeout`) from the work dir and writes one JSON line to
its stdout, {"status": "running"}, before the program starts, then {"status": "ok", "result": ...} or
{"status": "error" | "timeout", "error": ...} when it is done. What the
program prints goes nowhere. (A program that wrote a report of its own gains nothing: the expected grid
never enters the sandbox, so a forged result is no better than a returned one.)

The program runs with some builtins removed and some modules refused at import, as NeMo Gym's NVARC does.
That is not what keeps the host safe (the sandbox is); it keeps the task what NeMo Gym's is, e.g. a
program may not read files or start processes to find its answer.
"""

import builtins
import json
import os
import signal
import sys

REFUSED_MODULES = frozenset(
    {
        "asyncio", "builtins", "codecs", "concurrent", "ctypes", "fcntl", "fileinput", "ftplib", "http",
        "importlib", "marshal", "multiprocessing", "os", "pathlib", "pickle", "pkgutil", "pty", "requests",
        "resource", "shelve", "shutil", "signal", "smtplib", "socket", "subprocess", "syslog", "tempfile",
        "threading", "urllib",
    }
)  # fmt: skip
REMOVED_BUILTINS = frozenset(
    {
        "breakpoint", "copyright", "credits", "dir", "exit", "globals", "help", "input", "license",
        "locals", "open", "quit", "vars",
    }
)  # fmt: skip
ERROR_CHARS = 500


class TransformTimeout(BaseException):
    """A BaseException, so a bare `except Exception` in the program does not swallow the alarm."""


def _alarm(signum, frame):
    raise TransformTimeout


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.partition(".")[0] in REFUSED_MODULES:
        raise ImportError(f"import of {name!r} is not allowed here")
    return builtins.__import__(name, globals, locals, fromlist, level)


def _program_builtins():
    allowed = {name: value for name, value in vars(builtins).items() if name not in REMOVED_BUILTINS}
    allowed["__import__"] = _guarded_import
    return allowed


def plain(value, depth=0):
    """The result as JSON values: arrays (numpy, torch) as lists, numpy scalars as numbers."""
    if depth > 3:
        raise TypeError("the result is nested deeper than a grid")
    for method in ("detach", "cpu"):
        if callable(getattr(value, method, None)) and callable(getattr(value, "tolist", None)):
            value = getattr(value, method)()
    if not isinstance(value, (bool, int, float, str, list, tuple)) and callable(
        getattr(value, "tolist", None)
    ):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [plain(item, depth + 1) for item in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    raise TypeError(f"{type(value).__name__} is not a grid value")


def _describe(error):
    return f"{type(error).__name__}: {error}"[:ERROR_CHARS]


def main():
    with open("task.json", encoding="utf-8") as stream:
        task = json.load(stream)
    with open("solution.py", encoding="utf-8", errors="replace") as stream:
        source = stream.read()
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")

    def report(**line):
        channel.write(json.dumps(line) + "\n")
        channel.flush()

    report(status="running")  # the program starts: from here on, an abrupt end is the program's doing
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, task["timeout"])
    try:
        namespace = {"__builtins__": _program_builtins(), "__name__": "__main__"}
        exec(compile(source, "solution.py", "exec"), namespace)
        transform = namespace.get("transform")
        if not callable(transform):
            report(status="error", error="the program defines no transform() function")
            return
        result = plain(transform(task["test_input"]))
        signal.setitimer(signal.ITIMER_REAL, 0)
        report(status="ok", result=result)
    except TransformTimeout:
        report(status="timeout", error=f"the program ran longer than {task['timeout']} s")
    except BaseException as error:
        signal.setitimer(signal.ITIMER_REAL, 0)
        report(status="error", error=_describe(error))


if __name__ == "__main__":
    main()
