"""`gym show`: rollouts printed for a terminal (or a pager): a header line per rollout, then its
conversation, its verify fields and a note of the token data it carries."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from nemo_gym.rollout_viewer.index import RolloutIndex, RolloutQuery

ROLE_LABELS = {"system": "system", "developer": "developer", "user": "user", "assistant": "assistant"}
INDENT = "    "
PAGE_ROWS = 500


class Style:
    """ANSI styling when writing to a terminal that wants it (NO_COLOR unset), plain text otherwise."""

    CODES = {
        "bold": "1",
        "dim": "2",
        "red": "31",
        "green": "32",
        "yellow": "33",
        "blue": "34",
        "magenta": "35",
    }

    def __init__(self, stream: TextIO) -> None:
        self.enabled = stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"

    def __call__(self, text: str, *styles: str) -> str:
        if not self.enabled or not styles:
            return text
        codes = ";".join(self.CODES[name] for name in styles)
        return f"\033[{codes}m{text}\033[0m"


def shortened(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… ({len(text) - max_chars:,} more characters; --full shows all)"


def indented(text: str) -> str:
    return "\n".join(INDENT + line for line in text.splitlines() or [""])


def rollout_lines(shown: dict[str, Any], style: Style, max_chars: int | None) -> Iterator[str]:
    summary = shown["summary"]
    reward = summary["reward"]
    header = [f"{name} {summary[name]}" for name in ("task", "rollout") if summary[name] is not None]
    if summary["agent"]:
        header.append(summary["agent"])
    if reward is not None:
        header.append(style(f"reward {reward:g}", "bold", "green" if reward > 0 else "red"))
    if summary["failure"]:
        header.append(style(f"failed: {summary['failure']}", "bold", "red"))
    if summary["input_tokens"] is not None:
        header.append(f"{summary['input_tokens']:,} in / {summary['output_tokens'] or 0:,} out tokens")
    yield (
        style("━━ ", "dim")
        + " · ".join(header)
        + style(f"   ({shown['source']}s line {shown['line']})", "dim")
    )
    if shown["failure"]:
        failure = shown["failure"]
        yield style(f"[failure] {failure.get('class')} on attempt {failure.get('attempt')}", "red")
        yield indented(shortened(str(failure.get("message", "")), max_chars))
        if shown["conversation"]:
            yield style("what was asked:", "dim")
    elif shown["failed_attempts"]:
        classes = ", ".join(str(attempt["failure"]) for attempt in shown["failed_attempts"])
        yield style(f"{len(shown['failed_attempts'])} earlier attempt(s) failed: {classes}", "yellow")
    tool_names = {
        step["call_id"]: step["name"] for step in shown["conversation"] if step["kind"] == "tool_call"
    }
    for step in shown["conversation"]:
        yield from step_lines(step, tool_names, style, max_chars)
    if shown["verify"]:
        yield style("[verify]", "bold")
        for key, value in shown["verify"].items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            yield f"{INDENT}{key}: {shortened(text, max_chars)}"
    yield ""


def step_lines(
    step: dict[str, Any], tool_names: dict[str, str], style: Style, max_chars: int | None
) -> Iterator[str]:
    kind = step["kind"]
    if kind == "message":
        label = "final answer" if step.get("final") else ROLE_LABELS.get(step["role"], step["role"])
        yield style(f"[{label}]", "bold", "green" if step.get("final") else "blue")
        yield indented(shortened(step["text"], max_chars))
    elif kind == "reasoning":
        yield style("[reasoning]", "dim")
        yield style(indented(shortened(step["text"], max_chars)), "dim")
    elif kind == "tool_call":
        yield style(f"[tool call] {step['name']}", "bold", "magenta")
        yield indented(shortened(step["arguments"], max_chars))
    elif kind == "tool_output":
        yield style(f"[tool output] {tool_names.get(step['call_id'], step['call_id'])}", "magenta")
        yield indented(shortened(step["text"], max_chars))
    else:
        yield style(f"[{step.get('type', 'item')}]", "dim")
        yield indented(shortened(json.dumps(step.get("item"), ensure_ascii=False), max_chars))
    tokens = step.get("tokens")
    if tokens:
        counts = ", ".join(f"{len(values)} {key}" for key, values in tokens.items())
        yield style(f"{INDENT}(token data: {counts})", "dim")


def print_rollouts(
    index: RolloutIndex,
    query: RolloutQuery,
    count: int | None,
    max_chars: int | None,
    stream: TextIO = sys.stdout,
) -> int:
    """Print `count` (None: all) of the rollouts `query` selects, from `query.offset` on; returns how many
    it selects in all."""
    index.build()
    style = Style(stream)
    offset, printed, total = query.offset, 0, 0
    while count is None or printed < count:
        limit = min(PAGE_ROWS, count - printed) if count is not None else PAGE_ROWS
        page = index.rollouts(query.model_copy(update={"offset": offset, "limit": limit}))
        total = page["total"]
        for row in page["rows"]:
            for line in rollout_lines(index.rollout(row["id"]), style, max_chars):  # type: ignore[arg-type]
                print(line, file=stream)
        printed += len(page["rows"])
        offset += len(page["rows"])
        if not page["rows"]:
            break
    if total > offset:
        more = f"… {total - offset:,} more rollout(s); --offset {offset} shows the next ones, --limit 0 all of them"
        print(style(more, "dim"), file=stream)
    elif not total:
        print("No rollout matches.", file=stream)
    return total
