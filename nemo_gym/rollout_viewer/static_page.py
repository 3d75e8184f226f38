"""`gym view --static`: the page as one HTML file, with its style, script and rollouts inside, to send to
someone or keep with a run. It opens from disk with no server and no network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from nemo_gym.config.jsonl import write_atomically
from nemo_gym.rollout_viewer.index import FAILURE, RolloutIndex
from nemo_gym.rollout_viewer.server import page_html


def embedded_rows(index: RolloutIndex, max_rollouts: int) -> list[int]:
    """The rows a static page carries: every failed rollout first (they are what a reader looks for),
    then results in file order, `max_rollouts` in all; in list order."""
    failed = [row_id for row_id, entry in enumerate(index.entries) if entry.source == FAILURE]
    results = [row_id for row_id, entry in enumerate(index.entries) if entry.source != FAILURE]
    chosen = failed[:max_rollouts]
    return sorted(chosen + results[: max_rollouts - len(chosen)])


def page_data(index: RolloutIndex, max_rollouts: int) -> dict[str, Any]:
    row_ids = embedded_rows(index, max_rollouts)
    rows, histogram = index.task_stats()
    return {
        "summary": index.summary() | {"shown": len(row_ids)},
        "rows": [index.entries[row_id].listed(row_id) for row_id in row_ids],
        "details": {str(row_id): index.rollout(row_id) for row_id in row_ids},
        "tasks": {
            "total": len(rows),
            "complete": True,
            "histogram": histogram,
            "pass_threshold": index.pass_threshold,
            "rows": rows,
        },
    }


def write_static_page(index: RolloutIndex, destination: Path, max_rollouts: int) -> int:
    """Write the page (atomically) and return how many rollouts it carries."""
    index.build()
    data = page_data(index, max_rollouts)
    # `<` only occurs inside JSON strings, where \u003c means the same; so no rollout text can close the tag.
    payload = orjson.dumps(data).replace(b"<", b"\\u003c")
    destination.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(destination, [page_html(payload).encode()])
    return len(data["rows"])
