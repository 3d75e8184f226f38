"""`/aggregate_metrics` per agent over a collection's results and unresolved failures, with request
bodies assembled on disk so memory does not grow with the number of results."""

from __future__ import annotations

import itertools
import json
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY, ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, write_atomically
from nemo_gym.config.key_names import ENVIRONMENT_SERVER_STAMP_KEY_NAME
from nemo_gym.config.metrics_bodies import AggregateMetrics
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.envkit.reward_profile import failure_metrics
from nemo_gym.http.client import raise_for_status
from nemo_gym.serving.servers import ServerClient

# Why a rollout without a result was scored 0: its failure class, or "missing".
IMPUTED_KEY = "_ng_imputed_zero"
IMPUTED_METRIC = "coverage/imputed"


def scored_as_zero(record: dict[str, Any], reason: str) -> dict[str, Any]:
    """A rollout without a result as NeMo Gym 0.7's `count_*_as_zero` settings score it: reward 0."""
    return {
        AGENT_REF_KEY: record.get(AGENT_REF_KEY),
        TASK_INDEX_KEY: record.get(TASK_INDEX_KEY),
        ROLLOUT_INDEX_KEY: record.get(ROLLOUT_INDEX_KEY),
        "reward": 0.0,
        IMPUTED_KEY: reason,
    }


def stripped_for_aggregation(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its heavy parts: no request params, and of the response only its usage."""
    light = {
        key: value for key, value in result.items() if key not in ("responses_create_params", "response")
    }
    response = result.get("response")
    if isinstance(response, dict) and "usage" in response:
        light["response"] = {"usage": response["usage"]}
    return light


async def aggregate_results(
    results: Iterable[dict[str, Any]],
    failures: Iterable[dict[str, Any]],
    server_client: ServerClient,
    destination: Path,
) -> list[dict[str, Any]]:
    """One `/aggregate_metrics` per agent over its results and its unresolved failures (which the servers
    count but keep out of the statistics; those `scored_as_zero` enter them and are counted as
    `coverage/imputed`), written to `destination`; each entry also names the environment
    server the agent's results came through (`_ng_environment_server`, as NeMo Gym 0.7's file does). The request bodies are assembled on
    disk, never as a list of parsed results."""
    failure_classes: dict[str, Counter[str]] = {}
    imputed: Counter[str] = Counter()
    environment_servers: dict[str, str] = {}  # agent -> the environment server its results came through
    with tempfile.TemporaryDirectory(prefix="gym-aggregate-") as scratch:
        bodies: dict[str, Any] = {}
        try:
            for record in itertools.chain(results, failures):
                agent = agent_name_of(record) or ""
                if isinstance(server := record.get(ENVIRONMENT_SERVER_STAMP_KEY_NAME), str):
                    environment_servers.setdefault(agent, server)
                if agent not in bodies:
                    bodies[agent] = (Path(scratch) / f"{len(bodies)}.json").open("wb")
                    bodies[agent].write(b'{"verify_responses":[')
                else:
                    bodies[agent].write(b",")
                bodies[agent].write(orjson.dumps(stripped_for_aggregation(record)))
                if FAILURE_CLASS_KEY in record:
                    failure_classes.setdefault(agent, Counter())[record[FAILURE_CLASS_KEY]] += 1
                imputed[agent] += IMPUTED_KEY in record
        finally:
            for body in bodies.values():
                body.write(b"]}")
                body.close()
        entries = []
        for agent in sorted(bodies):
            response = await server_client.post(
                agent, "/aggregate_metrics", data=Path(bodies[agent].name).read_bytes(),
                headers={"Content-Type": "application/json"}, idempotent=True,
            )  # fmt: skip
            await raise_for_status(response)
            metrics = AggregateMetrics.model_validate_json(await response.read())
            counts = failure_metrics(failure_classes.get(agent, Counter()))
            for key, value in counts.items():  # servers that predate failure records do not count them
                metrics.agent_metrics.setdefault(key, value)
            if counts["num_failed_rollouts"]:
                metrics.key_metrics.update(counts)
            if imputed[agent]:
                metrics.agent_metrics[IMPUTED_METRIC] = metrics.key_metrics[IMPUTED_METRIC] = imputed[agent]
            stamp = (
                {ENVIRONMENT_SERVER_STAMP_KEY_NAME: environment_servers[agent]}
                if agent in environment_servers
                else {}
            )
            entries.append({AGENT_REF_KEY: {"name": agent}, **stamp, **metrics.model_dump()})
    write_atomically(destination, [json.dumps(entries, indent=2).encode()])
    return entries
