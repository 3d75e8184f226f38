"""Which agent runs a row, decided before anything is sent: the row's `agent_ref`, NeMo Gym 0.7's
`task_source` (the instance that declared the row's dataset) and a trainer's `agent_map` / `fan_out`.

A name that matches no agent of the deployment fails the whole batch at once, naming the rows, rather
than turning into one failed rollout per row later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from omegaconf import DictConfig

from nemo_gym.collection.materialize import seeded_metadata
from nemo_gym.collection.records import agent_name_of, mapped_agent
from nemo_gym.config import server_kinds
from nemo_gym.config.discovery import find_server_instances
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.key_names import TASK_SOURCE_KEY_NAME
from nemo_gym.config.server_instances import ServerInstanceConfig
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.wire.episodes import is_materialized_task_row

AGENT_TYPE = server_kinds.AGENT.key
MAX_ROWS_NAMED = 10


def agents_of(cfg: DictConfig) -> dict[str, list[str]]:
    """Each agent instance of the config, with the resources servers it refers to."""
    return {
        instance.name: _resources_servers_of(instance)
        for instance in find_server_instances(cfg)
        if instance.SERVER_TYPE == AGENT_TYPE
    }


def _resources_servers_of(instance: ServerInstanceConfig) -> list[str]:
    inner = instance.get_inner_run_server_config_dict()
    return [
        value["name"]
        for value in inner.values()
        if isinstance(value, Mapping) and value.get("type") == server_kinds.RESOURCES.key and "name" in value
    ]


def agent_for_task_source(task_source: str, agents: Mapping[str, list[str]]) -> str | None:
    """The agent a `task_source` stands for: the agent itself, or the one agent of that resources server."""
    if task_source in agents:
        return task_source
    serving = [agent for agent, servers in agents.items() if task_source in servers]
    return serving[0] if len(serving) == 1 else None


def resolve_agent_refs(rows: Sequence[dict[str, Any]], cfg: DictConfig) -> None:
    """Give every row an `agent_ref` naming an agent of `cfg` (in place), or raise ValueError for all rows
    that cannot have one."""
    agents = agents_of(cfg)
    problems: list[str] = []
    for index, row in enumerate(rows):
        if is_materialized_task_row(row):
            continue  # routed by its taskset (nemo_gym.collection.environments)
        name = agent_name_of(row)
        source = row.get(TASK_SOURCE_KEY_NAME)
        if name is None and isinstance(source, str):
            name = agent_for_task_source(source, agents)
            if name is not None:
                row[AGENT_REF_KEY] = {"type": AGENT_TYPE, "name": name}
        if name not in agents:
            problems.append(_unroutable(index, row, name))
    if problems:
        raise ValueError(
            f"{len(problems)} of {len(rows)} rows name no agent of this deployment "
            f"(agents: {', '.join(agents) or 'none'}): " + "; ".join(problems[:MAX_ROWS_NAMED])
        )


def _unroutable(index: int, row: Mapping[str, Any], name: str | None) -> str:
    if name is not None:
        return f"row {index}: agent_ref {name!r}"
    source = row.get(TASK_SOURCE_KEY_NAME)
    if source is not None:
        return f"row {index}: task_source {source!r} names no agent, nor a resources server with one agent"
    return f"row {index}: no agent_ref and no task_source"


def routed_rows(
    examples: Iterable[Mapping[str, Any]],
    agent_map: Mapping[str, str] | None,
    fan_out: Mapping[str, Sequence[str]] | None,
) -> list[tuple[int, dict[str, Any]]]:
    """(task index, row) pairs: `agent_map` re-routes a row by its agent or task_source (then `_default`),
    and `fan_out` runs a matching row once per listed agent."""
    for key, agents in (fan_out or {}).items():
        if not agents or len(set(agents)) != len(agents):
            raise ValueError(f"fan_out[{key!r}] must list distinct agents, got {list(agents)!r}")
    routed: list[tuple[int, dict[str, Any]]] = []
    for task_index, example in enumerate(examples):
        row = dict(example)
        key = agent_name_of(row) or row.get(TASK_SOURCE_KEY_NAME)
        target = mapped_agent(row, agent_map)
        for agent in (fan_out or {}).get(key) or [target]:
            routed.append(
                (task_index, {**row, AGENT_REF_KEY: {"type": AGENT_TYPE, "name": agent}} if agent else row)
            )
    return routed


def preprocessed_rows(
    examples: Iterable[Mapping[str, Any]],
    *,
    agent_map: Mapping[str, str] | None,
    fan_out: Mapping[str, Sequence[str]] | None,
    num_repeats: int,
    num_repeats_add_seed: bool,
) -> list[dict[str, Any]]:
    """Rows ready for `/run`: routed, repeated `num_repeats` times each (aabb order), stamped with their
    task and rollout indices (a task index the row already has is kept), and seeded per rollout when
    asked."""
    if num_repeats < 1:
        raise ConfigError(f"num_repeats must be at least 1, got {num_repeats}")
    rows: list[dict[str, Any]] = []
    next_rollout: dict[int, int] = {}
    for task_index, row in routed_rows(examples, agent_map, fan_out):
        for _ in range(num_repeats):
            rollout_index = next_rollout.get(task_index, 0)
            next_rollout[task_index] = rollout_index + 1
            repeated = {
                **row,
                TASK_INDEX_KEY: row.get(TASK_INDEX_KEY, task_index),
                ROLLOUT_INDEX_KEY: rollout_index,
            }
            if num_repeats_add_seed:
                params = dict(repeated.get("responses_create_params") or {})
                params["metadata"] = seeded_metadata(params, rollout_index, f"row {task_index}")
                repeated["responses_create_params"] = params
            rows.append(repeated)
    return rows
