"""Runs INSIDE the sandbox (standard library only): one SciCodePile task against the model's code.

Reads from stdin a token line, then the task as JSON (`setup_code`, `code`, `test`, `entry_point`): on
stdin, so no file holds the test for the model's code to read its expected values from (the runner's
memory still does; see below). `setup_code`, the
model's `code` and the task's `test` are compiled and run as three separate units in one shared module
namespace (a real module in `sys.modules`, so dataclasses, pickling and `__file__` behave), then
`check(<entry_point>)` is called. Separate units matter: in one concatenated source a decorator left at
the end of the model's code would wrap the test's own `check` (and `from __future__` imports would not
be first).

It writes JSON lines to a private copy of its stdout: {"status": "started"} before any task code runs,
then the verdict {"status": "pass" | "fail" | "entry_point_missing" | "error", "details": {...}}. Errors
name their `phase` (`setup`, `model`, `test`); only `model` is the model's doing, the other phases carry
`harness_fault: true`. The task's own prints go to /dev/null.

Each line carries the token the server passed on stdin, and the server reads only lines with it, so a
program that writes a verdict of its own to the channel is not believed. That raises the bar, no more:
code running in this process could still dig the token out of the runner's frames. The sandbox, not
this, is what protects the host.
"""

import json
import os
import sys
import types

MODULE_NAME = "__scicodepile__"
MESSAGE_CHARS = 500


def _phase_error(reason, error, phase):
    details = {"reason": reason, "type": type(error).__name__, "message": str(error)[:MESSAGE_CHARS]}
    details["phase"] = phase
    if phase != "model":
        details["harness_fault"] = True
    return {"status": "error", "details": details}


def _run_unit(source, filename, namespace, phase):
    """None when the unit ran, else the error verdict."""
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as error:
        return _phase_error("syntax_error", error, phase)
    try:
        exec(code, namespace)
    except BaseException as error:
        return _phase_error("exec_failed", error, phase)
    return None


def run_task(task):
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = os.path.join(os.getcwd(), MODULE_NAME + ".py")
    sys.modules[MODULE_NAME] = module
    namespace = module.__dict__
    if (task.get("setup_code") or "").strip():
        failed = _run_unit(task["setup_code"], "<scicodepile_setup>", namespace, "setup")
        if failed:
            return failed
    failed = _run_unit(task["code"], "<scicodepile_solution>", namespace, "model")
    if failed:
        return failed
    try:
        return _check(namespace, task["test"], task["entry_point"])
    except BaseException as error:  # the model's code may have broken what the runner relies on
        return _phase_error("runner_crashed", error, "model")


def _check(namespace, test, entry_point):
    candidate = namespace.get(entry_point)
    if candidate is None:
        return {"status": "entry_point_missing", "details": {"entry_point": entry_point}}
    failed = _run_unit(test, "<scicodepile_test>", namespace, "test")
    if failed:
        return failed
    check = namespace.get("check")
    if not callable(check):
        return {
            "status": "error",
            "details": {"reason": "test_defines_no_check", "phase": "test", "harness_fault": True},
        }
    try:
        check(candidate)
    except BaseException as error:
        return {
            "status": "fail",
            "details": {"type": type(error).__name__, "message": str(error)[:MESSAGE_CHARS]},
        }
    return {"status": "pass", "details": {}}


def main():
    token = sys.stdin.readline().strip()
    task = json.loads(sys.stdin.read())
    channel = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")

    def report(line):
        os.write(channel, (json.dumps({**line, "token": token}) + "\n").encode())

    report({"status": "started"})
    report(run_task(task))
    # Not a normal exit: threads or atexit hooks the task left behind must not hold a written verdict
    # until the wall limit.
    os._exit(0)


if __name__ == "__main__":
    main()
