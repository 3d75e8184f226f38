"""Code extraction and the comparison of the sandbox's reports with the expected outputs (server side)."""

from __future__ import annotations

import json
import math
from typing import Any

REPORT = "@@report "
PASS, FAIL, TIMEOUT = "pass", "fail", "timeout"
SHOWN_CHARS = 300


def extract_code_strict(text: str, language: str = "python", strip: bool = True) -> str:
    """The last fenced block, a ```python fence preferred over a bare one; "" when no fence closes it."""
    text = text.replace("\r", "")
    opener = f"```{language}"
    start = text.rfind(opener)
    if start == -1:
        opener = "```"
        start = text.rfind(opener)
    if start == -1:
        return ""
    body = text[start + len(opener) :]
    end = body.find("```")
    if end == -1:
        return ""
    return body[:end].strip() if strip else body[:end]


def parse_reports(stdout: str) -> list[dict[str, Any]]:
    reports = []
    for line in stdout.splitlines():
        if line.startswith(REPORT):
            try:
                reports.append(json.loads(line[len(REPORT) :]))
            except ValueError:
                continue
    return reports


def same(got: Any, want: Any, atol: float) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want if isinstance(got, bool) and isinstance(want, bool) else False
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, float) or isinstance(got, float):
            return math.isclose(got, want, rel_tol=0.0, abs_tol=atol) or got == want
        return got == want
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w, atol) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[key], want[key], atol) for key in want)
    return got == want


def shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def grade_group(
    reports: list[dict[str, Any]],
    group: str,
    inputs: list[list[Any]],
    expected: list[Any],
    atol: float,
    sandbox_ended: str | None,
) -> tuple[str, dict[str, Any] | None]:
    """(status, details of the first failing input or None): pass, fail or timeout, as EvalPlus names them."""
    load = next((report for report in reports if report.get("stage") == "load"), None)
    if load is not None:
        status = TIMEOUT if load["error"] == "timeout" else FAIL
        return status, {"stage": "load", "error": load["error"]}
    calls = {
        report["index"]: report for report in reports if report.get("group") == group and "index" in report
    }
    for index, (args, want) in enumerate(zip(inputs, expected, strict=True)):
        report = calls.get(index)
        case = {"index": index, "input": shown(args)}
        if report is None:
            if sandbox_ended == "timeout":
                return TIMEOUT, {**case, "error": "the run was stopped at the sandbox deadline"}
            return FAIL, {**case, "error": f"no result: {sandbox_ended or 'the run ended early'}"}
        if "error" in report:
            return (TIMEOUT if report["error"] == "timeout" else FAIL), {**case, "error": report["error"]}
        if not same(report.get("value"), want, atol):
            return FAIL, {**case, "expected": shown(want), "got": shown(report.get("value"))}
    return PASS, None
