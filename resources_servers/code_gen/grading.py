"""Grading of code_gen answers outside the sandbox: code extraction, and the harness's reports compared
with the expected outputs (LiveCodeBench result codes and messages).

`grade_reports` is module-level and takes only plain values, so it can run in the CPU worker pool:
comparing megabytes of output token by token must not stall the event loop.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

PASSED = True
GLOBAL_TIMEOUT, WRONG_ANSWER, TIME_LIMIT, RUNTIME_ERROR = -1, -2, -3, -4
FENCE = "```"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SHOWN_CHARS = 300
"""How much of an input, output or expected output the failure metadata shows."""
REL_TOL, ABS_TOL = 1e-6, 1e-9


def extract_code(text: str) -> str | None:
    """The lines strictly between the last two lines that contain a triple backtick."""
    lines = text.split("\n")
    fences = [index for index, line in enumerate(lines) if FENCE in line]
    if len(fences) < 2:
        return None
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])


def reasoning_format_violation(final_text: str, reasoning_summaries: list[str]) -> bool:
    """A think tag left in the answer, or reasoning that opens or closes thinking more than once."""
    if THINK_OPEN in final_text or THINK_CLOSE in final_text:
        return True
    reasoning = "".join(reasoning_summaries)
    return reasoning.count(THINK_OPEN) > 1 or reasoning.count(THINK_CLOSE) > 1


def output_caps(outputs: list[str]) -> list[int]:
    """How much output the harness keeps per test: anything longer cannot match (whitespace aside)."""
    return [2 * len(expected.encode(errors="surrogatepass")) + 4096 for expected in outputs]


def shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} characters)"


def grade_reports(
    report_lines: str, inputs: list[str], outputs: list[str], fn_name: str | None, sandbox_ended: str | None
) -> tuple[list[bool | int], dict[str, Any]]:
    """(result, metadata) from the harness's JSON lines. `sandbox_ended` says why the sandbox stopped
    early, if it did: "timeout" (the run's deadline) or a description of the crash."""
    reports = _parse(report_lines)
    results: list[bool | int] = []
    total_seconds = 0.0
    for index, (test_input, expected) in enumerate(zip(inputs, outputs, strict=True)):
        report = reports[index] if index < len(reports) else None
        if report is None:
            return results + [_unfinished_code(sandbox_ended)], _unfinished(
                sandbox_ended, test_input, expected
            )
        if report.get("status") == "compile_error":
            return [RUNTIME_ERROR], _failure(RUNTIME_ERROR, f"Error during testing: {report.get('error')}")
        failure = _test_failure(report, test_input, expected, fn_name)
        if failure is not None:
            return results + [failure["error_code"]], failure
        results.append(PASSED)
        total_seconds += float(report.get("seconds") or 0.0)
    return results, {"execution time": total_seconds}


def _parse(report_lines: str) -> list[dict[str, Any]]:
    """The harness's reports, up to the first line that is not one (the program may write to the
    channel too, or the output may have been cut)."""
    reports = []
    for line in report_lines.splitlines():
        try:
            report = orjson.loads(line)
        except orjson.JSONDecodeError:
            break
        if not isinstance(report, dict):
            break
        reports.append(report)
    return reports


def _unfinished_code(sandbox_ended: str | None) -> int:
    return GLOBAL_TIMEOUT if sandbox_ended == "timeout" else RUNTIME_ERROR


def _unfinished(sandbox_ended: str | None, test_input: str, expected: str) -> dict[str, Any]:
    if sandbox_ended == "timeout":
        return _failure(GLOBAL_TIMEOUT, "Global Timeout")
    crash = sandbox_ended or "the program ended the test run"
    return _failure(
        RUNTIME_ERROR, "Runtime Error", error=crash, inputs=shown(test_input), expected=shown(expected)
    )


def _failure(code: int, message: str, **details: Any) -> dict[str, Any]:
    return {**details, "error_code": code, "error_message": message}


def _test_failure(
    report: dict[str, Any], test_input: str, expected: str, fn_name: str | None
) -> dict[str, Any] | None:
    status, context = report.get("status"), {"inputs": shown(test_input), "expected": shown(expected)}
    if status == "timeout":
        return _failure(TIME_LIMIT, "Time Limit Exceeded", error=report.get("error"), **context)
    if status != "ok":
        return _failure(RUNTIME_ERROR, "Runtime Error", error=report.get("error"), **context)
    if fn_name is None:
        output = str(report.get("output", ""))
        message = compare_stdout(output, expected)
        return None if message is None else _failure(WRONG_ANSWER, message, output=shown(output), **context)
    if "value" in report and same_value(report["value"], _expected_value(expected)):
        return None
    output = json.dumps(report["value"]) if "value" in report else str(report.get("unserializable"))
    return _failure(WRONG_ANSWER, "Wrong Answer", output=shown(output), **context)


def compare_stdout(output: str, expected: str) -> str | None:
    """None when the output matches line by line (stripped; tokens compared as decimals when the text
    differs), else the wrong-answer message."""
    got_lines, expected_lines = _stripped_lines(output), _stripped_lines(expected)
    if len(got_lines) != len(expected_lines):
        return "Wrong answer: mismatched output length"
    for index, (got, want) in enumerate(zip(got_lines, expected_lines, strict=True)):
        if got != want and not _same_decimals(got, want):
            return f"Wrong answer at output_line_idx={index}: {shown(got)} != {shown(want)}"
    return None


def _stripped_lines(text: str) -> list[str]:
    return [line.strip() for line in text.strip().split("\n")]


def _same_decimals(got: str, want: str) -> bool:
    try:
        return [Decimal(token) for token in got.split()] == [Decimal(token) for token in want.split()]
    except InvalidOperation:
        return False


def _expected_value(expected: str) -> Any:
    try:
        return json.loads(expected)
    except ValueError:
        return expected


def same_value(got: Any, want: Any) -> bool:
    """Equal, equal as JSON, or numbers (also inside lists) equal within a relative 1e-6. Values nested
    too deeply (or numbers too large) to compare do not match."""
    try:
        return _same(got, want)
    except (RecursionError, OverflowError):
        return False


def _same(got: Any, want: Any) -> bool:
    if got == want:
        return True
    if _is_number(got) and _is_number(want):
        return math.isclose(got, want, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(got, list) and isinstance(want, list) and len(got) == len(want):
        return all(_same(a, b) for a, b in zip(got, want, strict=True))
    return json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
