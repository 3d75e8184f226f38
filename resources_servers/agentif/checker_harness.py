"""Runs INSIDE the sandbox (never imported by the server): loads a task row's `check_following` from
checker.py, calls it on the response read from stdin and prints one JSON line {"result": ...} or
{"error": ...}. AgentIF's checker sources sometimes omit `def` before `check_following(`; it is added."""

import json
import re
import sys


def main() -> None:
    source = open("checker.py", encoding="utf-8").read()
    if not re.search(r"^\s*def\s+check_following\s*\(", source, re.MULTILINE):
        source = re.sub(r"^(\s*)check_following\s*\(", r"\1def check_following(", source, count=1, flags=re.M)
    response = sys.stdin.read()
    namespace: dict = {"__name__": "checker"}
    try:
        exec(compile(source, "checker.py", "exec"), namespace)
        check = namespace.get("check_following")
        if not callable(check):
            print(json.dumps({"error": "the checker defines no check_following"}))
            return
        result = check(response)
    except BaseException as error:  # the checker's own failure is reported, never raised
        print(json.dumps({"error": f"{type(error).__name__}: {error}"[:300]}))
        return
    if isinstance(result, bool):
        print(json.dumps({"result": result}))
    else:
        print(json.dumps({"error": f"check_following returned {type(result).__name__}, not a bool"}))


main()
