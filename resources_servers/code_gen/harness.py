"""Runs INSIDE the sandbox (standard library only): the candidate program against each test input.

Reads `solution.py` and `tests.json` (`inputs`, `fn_name`, `timeout`, `output_caps`) from the work dir
and writes one JSON line per test to its stdout as it goes, so the grader keeps what finished if the
sandbox is killed. It never sees the expected outputs: comparing is the grader's job, outside.

stdin mode (`fn_name` null): the program runs as `__main__` once per test, with the test input as its
real stdin (fd 0, so `input()`, `sys.stdin.buffer` and `open(0)` all work) and its fd 1 captured.
Call mode: the module runs once; then `Solution().<fn_name>` (or a module-level `<fn_name>`) is called
with one JSON value per input line, and its return value is reported as JSON.
Statuses: ok, timeout (the per-test alarm), error (an exception), compile_error; it stops at the first
test that is not ok.
"""

import builtins
import io
import json
import os
import signal
import sys
import time

STDIN_FILE = os.path.abspath("harness_stdin")
STDOUT_FILE = os.path.abspath("harness_stdout")


class TestTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise TestTimeout


def _describe(error):
    return f"{type(error).__name__}: {error}"


def _jsonable(value):
    for method in ("tolist", "item"):
        if callable(getattr(value, method, None)):
            return getattr(value, method)()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _open_as(target, path, flags):
    """Open `path` as file descriptor `target` (the program may have closed it, e.g. with `open(0)`)."""
    fd = os.open(path, flags, 0o600)
    if fd != target:
        os.dup2(fd, target)
        os.close(fd)


class Redirected:
    """Points fd 0 at `stdin_text` and fd 1 at a capture file, and sys.stdin/stdout at them."""

    def __init__(self, stdin_text):
        with open(STDIN_FILE, "w", encoding="utf-8") as stream:
            stream.write(stdin_text)

    def __enter__(self):
        _open_as(0, STDIN_FILE, os.O_RDONLY)
        _open_as(1, STDOUT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        return self

    def __exit__(self, *exc):
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        sys.stdout, sys.stdin = sys.__stdout__, sys.__stdin__
        return False

    def captured(self, cap):
        with open(STDOUT_FILE, "rb") as stream:
            return stream.read(cap).decode("utf-8", errors="replace")


def _run(timeout, function, *args):
    """(status, error, seconds, returned value) of `function(*args)` under the per-test alarm."""
    started, value = time.perf_counter(), None
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        value = function(*args)
        status, error = "ok", None
    except TestTimeout:
        status, error = "timeout", "the test ran longer than its time limit"
    except SystemExit as exit_:
        ok = exit_.code in (None, 0)
        status, error = ("ok", None) if ok else ("error", f"SystemExit: {exit_.code}")
    except BaseException as error_:
        status, error = "error", _describe(error_)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return status, error, time.perf_counter() - started, value


def run_stdin_tests(code, spec, report):
    for test_input, cap in zip(spec["inputs"], spec["output_caps"], strict=True):
        program = {"__name__": "__main__", "__builtins__": builtins}
        with Redirected(test_input) as streams:
            status, error, seconds, _ = _run(spec["timeout"], exec, code, program)
        report({"status": status, "error": error, "seconds": seconds, "output": streams.captured(cap)})
        if status != "ok":
            return


def _solution_method(namespace, fn_name):
    """`Solution().<fn_name>` (LeetCode style), else a module-level function of that name."""
    if isinstance(namespace.get("Solution"), type):
        return getattr(namespace["Solution"](), fn_name)
    return namespace[fn_name]


def run_call_tests(code, spec, report):
    namespace, method = {"__name__": "solution", "__builtins__": builtins}, None
    with Redirected(""):
        status, error, _, _ = _run(spec["timeout"], exec, code, namespace)
        if status == "ok":
            status, error, _, method = _run(spec["timeout"], _solution_method, namespace, spec["fn_name"])
    if status != "ok" or not callable(method):
        report({"status": "compile_error", "error": error or f"{spec['fn_name']!r} is not callable"})
        return
    for test_input, cap in zip(spec["inputs"], spec["output_caps"], strict=True):
        try:
            args = [json.loads(line) for line in test_input.split("\n") if line.strip()]
        except ValueError as error_:
            report({"status": "error", "error": f"unreadable test input: {error_}", "seconds": 0.0})
            return
        with Redirected(""):
            status, error, seconds, value = _run(spec["timeout"], method, *args)
        line = {"status": status, "error": error, "seconds": seconds}
        if status == "ok":
            try:
                line["value"] = json.loads(json.dumps(value, default=_jsonable)[:cap])
            except (TypeError, ValueError, RecursionError):
                line["unserializable"] = repr(value)[:cap]
        report(line)
        if status != "ok":
            return


def main():
    with open("tests.json", encoding="utf-8") as stream:
        spec = json.load(stream)
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")

    def report(line):
        channel.write(json.dumps(line, ensure_ascii=False) + "\n")
        channel.flush()

    signal.signal(signal.SIGALRM, _alarm)
    try:
        with open("solution.py", encoding="utf-8", errors="replace") as stream:
            code = compile(stream.read(), "solution.py", "exec")
    except BaseException as error:
        report({"status": "compile_error", "error": _describe(error)})
        return
    if spec["fn_name"] is None:
        run_stdin_tests(code, spec, report)
    else:
        run_call_tests(code, spec, report)


if __name__ == "__main__":
    main()
