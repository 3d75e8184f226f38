"""The routing condition a run served under, kept beside its outputs (NeMo Gym 0.7's `condition_dir`):
`switchyard-condition.json` when the server starts (the route, the proxy, the operator's provenance) and
`switchyard-stats.json` when it stops (the proxy's `/v1/stats`). Two routed runs are comparable when their
records say what differs. A record that cannot be written costs a warning, never the run."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.http.client import HTTPStatusError, RequestFailedError, RetryPolicy, checked_json, request

logger = logging.getLogger("switchyard_model")
CONDITION_FILE = "switchyard-condition.json"
STATS_FILE = "switchyard-stats.json"
STATS_PATH = "/v1/stats"
# Shutdown is short (the launcher escalates soon after asking a server to stop), so the snapshot is too.
STATS_DEADLINE_S = 2.0
# An attached proxy counts from its own start, across every run and neighbour it served.
ATTACHED_SCOPE = "proxy-lifetime aggregate"


def proxy_root(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _write(folder: Path, name: str, record: dict[str, Any]) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2) + b"\n")
    except OSError as error:
        logger.warning("switchyard_model: could not write %s in %s: %s", name, folder, error)


def write_condition(
    folder: Path, route: str, base_url: str, provenance: dict[str, Any], session_id_headers: list[str]
) -> None:
    """The record of what this run is routed through; the proxy's build is the operator's to name
    (`proxy_provenance`), since an attached proxy is one Gym cannot identify."""
    record = {
        "route": route,
        "mode": "attached",
        "proxy_root_url": proxy_root(base_url),
        "nemo_switchyard_version": None,
        "proxy_provenance": provenance or None,
        "deployment_path": None,
        "deployment_sha256": None,
        "deployment_toml": None,
        "session_id_headers": session_id_headers,
        "written_at": _now(),
    }
    _write(folder, CONDITION_FILE, record)


async def snapshot_stats(folder: Path, base_url: str, headers: dict[str, str]) -> None:
    """The proxy's `/v1/stats`, asked as the model calls are (same key and headers), within
    `STATS_DEADLINE_S`; a proxy that does not answer in time leaves a warning instead."""
    url = f"{proxy_root(base_url)}{STATS_PATH}"
    policy = RetryPolicy(max_attempts=1, deadline_s=STATS_DEADLINE_S)
    try:
        stats = await checked_json(await request("GET", url, headers=headers, retry_policy=policy))
    except RequestFailedError as error:
        logger.warning("switchyard_model: no proxy stats snapshot: %s", error)
        return
    except HTTPStatusError as error:  # its body may echo the key, so only the status is named
        logger.warning("switchyard_model: no proxy stats snapshot: %s answered HTTP %d", url, error.status)
        return
    _write(
        folder,
        STATS_FILE,
        {"scope": ATTACHED_SCOPE, "mode": "attached", "written_at": _now(), "stats": stats},
    )
