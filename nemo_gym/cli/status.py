"""`gym status`: the instances of a running deployment, from its head server, whether each answers, and
the headline figures of its `/metrics`."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from nemo_gym.config.global_config import parse_global_config_dict
from nemo_gym.config.shards import REPLICA_LOST
from nemo_gym.http.client import (
    HTTPStatusError,
    RequestFailedError,
    RetryPolicy,
    checked_json,
    request,
)
from nemo_gym.serving.servers import head_server_config_from
from nemo_gym.telemetry.metrics import METRICS_PATH
from nemo_gym.telemetry.metrics_summary import HeadlineFigures, headline_figures
from nemo_gym.text.tables import format_table

HEAD_POLICY = RetryPolicy(max_attempts=1, deadline_s=5.0, connect_timeout_s=2.0)
INSTANCE_POLICY = RetryPolicy(max_attempts=1, deadline_s=2.0, connect_timeout_s=2.0)


async def instance_health(url: str) -> str:
    """`success` for any HTTP answer on `/`, else the kind of failure (`connection_error`, `timeout`)."""
    try:
        response = await request("GET", url + "/", retry_policy=INSTANCE_POLICY)
        response.release()
    except RequestFailedError as error:
        return "timeout" if error.kind == "timeout" else "connection_error"
    return "success"


async def health_of(instance: dict[str, Any]) -> str:
    """A shard replica the launcher knows is lost is `lost`; any other instance is asked."""
    if instance.get("status") == REPLICA_LOST:
        return REPLICA_LOST
    return await instance_health(instance["url"])


async def figures_of(url: str) -> HeadlineFigures | None:
    """The headline figures of the server's `/metrics`; None when it has none (metrics off, an older
    server), does not answer in time, or answers something else."""
    try:
        response = await request("GET", url + METRICS_PATH, retry_policy=INSTANCE_POLICY)
        page = await response.text()
    except RequestFailedError:
        return None
    if response.status != 200:
        return None
    try:
        return headline_figures(page)
    except (ValueError, KeyError):
        return None


async def report_of(instance: dict[str, Any]) -> tuple[str, HeadlineFigures | None]:
    """The instance's health and, when it answers, its figures."""
    status = await health_of(instance)
    return status, await figures_of(instance["url"]) if status == "success" else None


FIGURE_COLUMNS = ("REQUESTS", "5XX", "P50_S", "P95_S", "IN_FLIGHT", "RETRIES")


def figure_cells(figures: dict[str, Any] | None) -> tuple[str, ...]:
    """The figure columns of one row: `-` throughout for a server without figures."""
    if figures is None:
        return ("-",) * len(FIGURE_COLUMNS)
    latencies = (figures["latency_p50_s"], figures["latency_p95_s"])
    return (
        str(figures["requests"]),
        str(figures["errors_5xx"]),
        *("-" if latency is None else f"{latency:.3g}" for latency in latencies),
        str(figures["in_flight"]),
        str(figures["retries"]),
    )


def status_rows(instances: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """The table of `gym status`; with shards, each instance's shard replica and node too."""
    sharded = any("shard" in instance for instance in instances)
    rows = [("INSTANCE", "TYPE", "IMPLEMENTATION", "URL", "PID", "STATUS", "UPTIME_S", *FIGURE_COLUMNS)]
    if sharded:
        rows[0] += ("SHARD", "NODE")
    for i in instances:
        row = (
            i["process_name"], i["server_type"], i["name"], i["url"], str(i["pid"]), i["status"],
            f"{i['uptime_seconds']:g}", *figure_cells(i.get("metrics")),
        )  # fmt: skip
        if sharded:
            shard = f"{i['shard']}#{i['replica']}" if "shard" in i else "-"
            row += (shard, str(i.get("node_id") or "-")[:12])
        rows.append(row)
    return rows


INSTANCE_KEYS = frozenset({"process_name", "server_type", "name", "url", "pid", "start_time"})


def is_instance_list(value: Any) -> bool:
    """Shape of a head server's `/server_instances` answer (anything else is some other server)."""
    return isinstance(value, list) and all(
        isinstance(entry, dict) and INSTANCE_KEYS <= entry.keys() for entry in value
    )


class NoHeadServerError(Exception):
    """No Gym head server answers where the config says: the message says what to check."""


async def deployment_instances(head_url: str) -> list[dict[str, Any]]:
    """The instances the head server at `head_url` lists; `NoHeadServerError` when there is none."""
    try:
        response = await request("GET", head_url + "/server_instances", retry_policy=HEAD_POLICY)
        instances: Any = await checked_json(response)
    except RequestFailedError as error:
        raise NoHeadServerError(
            f"no head server answers at {head_url} ({error.kind} failed); is `gym run` running, "
            "and does head_server.port match it?"
        ) from None
    except HTTPStatusError as error:
        raise NoHeadServerError(
            f"{head_url} is not a Gym head server (GET /server_instances answered HTTP {error.status})"
        ) from None
    except ValueError:
        instances = None
    if not is_instance_list(instances):
        raise NoHeadServerError(
            f"{head_url} is not a Gym head server (GET /server_instances did not list instances)"
        )
    return instances


async def print_status(overrides: Sequence[str], as_json: bool = False) -> int:
    """Exit 0 when every instance answers, 1 when one does not or the head server is unreachable.
    `as_json` (`--json`, or `+json=true` as in NeMo Gym) prints the list as JSON instead of a table."""
    cfg = parse_global_config_dict(list(overrides))
    head = head_server_config_from(cfg)
    try:
        instances = await deployment_instances(f"http://{head.host}:{head.port}")
    except NoHeadServerError as error:
        print(f"Error: {error}", file=sys.stderr)
        return 1
    reports = await asyncio.gather(*(report_of(instance) for instance in instances))
    for instance, (status, figures) in zip(instances, reports, strict=True):
        instance["status"] = status
        instance["uptime_seconds"] = round(time.time() - instance["start_time"], 1)
        instance["metrics"] = figures.as_json() if figures is not None else None
    if as_json or cfg.get("json"):
        print(orjson.dumps(instances, option=orjson.OPT_INDENT_2).decode())
    else:
        print(format_table(status_rows(instances)))
    return 0 if all(status == "success" for status, _ in reports) else 1
