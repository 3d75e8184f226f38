"""The materialized inputs: every (task, rollout) of a collection, one line each, written atomically
before anything runs so that a resumed run knows exactly what is missing."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from nemo_gym.collection.config import RolloutCollectionConfig
from nemo_gym.collection.ledger import CollectionLedger
from nemo_gym.collection.paths import CollectionPaths
from nemo_gym.collection.records import agent_name_of, mapped_agent
from nemo_gym.config import server_kinds
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY, iter_jsonl, write_atomically
from nemo_gym.config.key_names import TASK_SOURCE_KEY_NAME
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.datasets.prompts import load_prompt_config, prompted_row

logger = logging.getLogger("nemo_gym.collection")

MAX_ROWS_LISTED = 10


def seeded_metadata(params: dict[str, Any], seed: int, where: str) -> dict[str, Any]:
    """`metadata` with `{"seed": seed}` merged into its `extra_body` JSON string."""
    metadata = dict(params.get("metadata") or {})
    try:
        extra_body = json.loads(metadata.get("extra_body") or "{}")
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{where}: responses_create_params.metadata.extra_body is not JSON ({error})"
        ) from error
    metadata["extra_body"] = json.dumps({**extra_body, "seed": seed})
    return metadata


def repeats_for(num_repeats: int | dict[str, int], agent: str) -> int | None:
    if isinstance(num_repeats, int):
        return num_repeats
    return num_repeats.get(agent, num_repeats.get("_default"))


def _listed(items: list[str], total: int) -> str:
    more = f" and {total - len(items)} more" if total > len(items) else ""
    return ", ".join(items) + more


def materialize(
    config: RolloutCollectionConfig,
    input_path: Path,
    paths: CollectionPaths,
    ledger: CollectionLedger,
    agent_of_source: Callable[[str], str | None] = lambda source: None,
) -> tuple[int, set[str]]:
    """Write the materialized inputs (atomically) and return how many rollouts and which agents they use.

    A row with only a `task_source` (NeMo Gym 0.7's collation stamp) runs on `agent_of_source(source)`.
    Rows without an agent, or whose agent has no repeat count, are collected into one error."""
    templates = load_prompt_config(config.prompt_config) if config.prompt_config else None
    agents: set[str] = set()
    unrouted: list[str] = []
    unrouted_total = 0
    unrepeated: dict[str, list[str]] = {}
    overridden: Counter[str] = Counter()  # agent_ref names agent_name replaced, with their row counts
    counting = True  # the first read of the input (interleaved repeats read it once per round)
    written = 0

    def prepared() -> Iterator[tuple[str, bytes, dict[str, Any], int]]:
        """Each runnable row once: where it is, its raw line, the row as it will run, its repeat count."""
        for number, _, raw, row in iter_jsonl(input_path, config.limit):
            where = f"{input_path}:{number}"
            if templates is not None:
                row = prompted_row(row, templates, where)
            routing_key = agent_name_of(row) or row.get(TASK_SOURCE_KEY_NAME)
            if mapped := mapped_agent(row, config.agent_map):
                if counting and config.agent_name and agent_name_of(row) not in (None, mapped):
                    overridden[agent_name_of(row)] += 1
                row[AGENT_REF_KEY] = {**(row.get(AGENT_REF_KEY) or {}), "name": mapped}
            source = row.get(TASK_SOURCE_KEY_NAME)
            if AGENT_REF_KEY not in row and isinstance(source, str) and (resolved := agent_of_source(source)):
                row[AGENT_REF_KEY] = {"type": server_kinds.AGENT.key, "name": resolved}
            if not agent_name_of(row):
                yield where, raw, row, 0
                continue
            if config.responses_create_params:
                row["responses_create_params"] = {
                    **(row.get("responses_create_params") or {}),
                    **config.responses_create_params,
                }
            for agent in (config.fan_out or {}).get(routing_key) or [agent_name_of(row)]:
                routed = {**row, AGENT_REF_KEY: {**row[AGENT_REF_KEY], "name": agent}}
                repeats = repeats_for(config.num_repeats, agent)
                yield where, raw, routed, -1 if repeats is None else repeats

    def copies(where: str, raw: bytes, row: dict[str, Any], rounds: range) -> Iterator[bytes]:
        nonlocal written
        task = row[TASK_INDEX_KEY] if isinstance(row.get(TASK_INDEX_KEY), int) else ledger.task_of_line(raw)
        for _ in rounds:
            rollout = ledger.next_rollout(task)
            copy = {**row, TASK_INDEX_KEY: task, ROLLOUT_INDEX_KEY: rollout}
            if config.num_repeats_add_seed:
                params = dict(copy.get("responses_create_params") or {})
                params["metadata"] = seeded_metadata(params, rollout, where)
                copy["responses_create_params"] = params
            written += 1
            yield orjson.dumps(copy) + b"\n"
        if written % 10_000 == 0:
            ledger.commit()

    def rows() -> Iterator[bytes]:
        """All repeats of a row together (aabb), or with `interleave_repeats` one round of every row at a
        time (abab): the input is then read once per round, so memory stays flat."""
        nonlocal unrouted_total, counting
        most_repeats = 0
        for where, raw, row, repeats in prepared():
            if repeats == 0:
                unrouted_total += 1
                if len(unrouted) < MAX_ROWS_LISTED:
                    unrouted.append(where.rsplit(":", 1)[1])
                continue
            if repeats < 0:
                unrepeated.setdefault(agent_name_of(row) or "", []).append(where.rsplit(":", 1)[1])
                continue
            agents.add(agent_name_of(row) or "")
            most_repeats = max(most_repeats, repeats)
            yield from copies(where, raw, row, range(1 if config.interleave_repeats else repeats))
        counting = False
        for round_number in range(1, most_repeats if config.interleave_repeats else 1):
            for where, raw, row, repeats in prepared():
                if repeats > round_number:
                    yield from copies(where, raw, row, range(1))

    write_atomically(paths.materialized, rows())
    if overridden:
        logger.warning(
            "agent_name=%s runs rows whose agent_ref names another agent: %s",
            config.agent_name,
            ", ".join(f"{name} ({count} rows)" for name, count in sorted(overridden.items())),
        )
    if unrouted_total or unrepeated:
        paths.materialized.unlink(missing_ok=True)
    if unrouted_total:
        raise ConfigError(
            f"{input_path}: {unrouted_total} row(s) name no agent (lines {_listed(unrouted, unrouted_total)}); "
            "give each row an agent_ref or pass +agent_name=<agent instance>"
        )
    if unrepeated:
        names = ", ".join(
            f"'{agent}' (lines {_listed(lines[:MAX_ROWS_LISTED], len(lines))})"
            for agent, lines in unrepeated.items()
        )
        raise ConfigError(
            f"num_repeats has no count for agent(s) {names}; add them or a `_default` to num_repeats"
        )
    ledger.commit()
    return written, agents
