"""`--agent-type`: swap the agent of every environment of a config for another agent implementation.

The chosen agent's standalone config (`responses_api_agents/<type>/configs/<type>.yaml`) declares one
*unbound* agent: its `resources_server.name` is `???`. Each other agent of the config that names a
resources server is rebuilt as a copy of the unbound one that keeps its own resources server, model
server and datasets, under NeMo Gym 0.7's name `<name without _<old type> (or _agent)>_<new type>`; the
unbound agent itself goes. Environment servers follow the renamed agents, rows still naming an old agent
reach its replacement through `agent_map`, and overrides addressed to a composed agent's name apply to it.

Resources servers may say which agents and model servers score them correctly (`allowed_agents`,
`allowed_model_types`); any other pairing is refused unless `allow_unsupported_pairing` is set.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from typing import Any

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import (
    AGENT_SERVER_TYPE_KEY_NAME,
    ALLOW_UNSUPPORTED_PAIRING_ENV_VAR_NAME,
    ALLOW_UNSUPPORTED_PAIRING_KEY_NAME,
    ALLOWED_AGENTS_KEY_NAME,
    ALLOWED_MODEL_TYPES_KEY_NAME,
    ENVIRONMENT_SERVER_TYPE_KEY_NAME,
    MODEL_SERVER_TYPE_KEY_NAME,
    RESOURCES_SERVER_TYPE_KEY_NAME,
)

MISSING = "???"
CARRIED_KEYS = ("resources_server", "model_server", "datasets")
AGENT_MAP_KEY = "agent_map"
EXEMPT_MODEL_TYPES = frozenset({"dummy_model"})


class AgentCompositionError(ConfigError):
    pass


class UnsupportedAgentPairingError(ConfigError):
    pass


class UnsupportedModelPairingError(ConfigError):
    pass


class UnsupportedAgentOverrideError(ConfigError):
    pass


def _only_block(instance: Any, server_type: str) -> tuple[str, dict[str, Any]] | None:
    """(implementation, inner config) of a `{server_type: {implementation: {...}}}` block, else None."""
    if not isinstance(instance, dict) or not isinstance(instance.get(server_type), dict):
        return None
    implementations = instance[server_type]
    if len(implementations) != 1:
        return None
    implementation, inner = next(iter(implementations.items()))
    return (str(implementation), inner) if isinstance(inner, dict) else None


def _agents(tree: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        name: block
        for name, instance in tree.items()
        if (block := _only_block(instance, AGENT_SERVER_TYPE_KEY_NAME)) is not None
    }


def _referenced_name(inner: Mapping[str, Any], key: str) -> Any:
    ref = inner.get(key)
    return ref.get("name") if isinstance(ref, Mapping) else None


def composed_name(target: str, old_type: str, new_type: str) -> str:
    """NeMo Gym 0.7's name for the agent that replaces `target`."""
    for ending in (f"_{old_type}", "_agent"):
        if target.endswith(ending) and len(target) > len(ending):
            return f"{target[: -len(ending)]}_{new_type}"
    return f"{target}_{new_type}"


def compose_unbound_agent(tree: dict[str, Any], command_line: Mapping[str, Any]) -> dict[str, str]:
    """Compose the unbound agent of `tree` (in place) over every bound one; old name -> new name.

    `command_line` is what the command line set: a block it gave a composed agent's name was merged in as
    a partial instance and is applied to the composed agent here."""
    agents = _agents(tree)
    unbound = [
        name for name, (_, inner) in agents.items() if _referenced_name(inner, "resources_server") == MISSING
    ]
    if not unbound:
        _check_model_pairings(tree, agents)
        return {}
    if len(unbound) > 1:
        raise AgentCompositionError(
            f"agents {', '.join(map(repr, unbound))} both have resources_server.name ???; --agent-type composes "
            "one agent over the others, so load one agent config"
        )
    source = unbound[0]
    source_type, source_inner = agents[source]
    targets = {
        name: block
        for name, block in agents.items()
        if name != source and _referenced_name(block[1], "resources_server") is not None
    }
    if not targets:
        raise AgentCompositionError(
            f"agent '{source}' has resources_server.name ??? and there is no environment to put it in: add one "
            f"(--resources-server NAME), or set ++{source}.{AGENT_SERVER_TYPE_KEY_NAME}.{source_type}."
            "resources_server.name=<resources server instance>"
        )
    _check_agent_pairings(tree, source_type, targets)
    renames = {name: composed_name(name, old_type, source_type) for name, (old_type, _) in targets.items()}
    _check_names(tree, command_line, source, renames)
    del tree[source]
    for old, new in renames.items():
        inner = copy.deepcopy(source_inner)
        for key in CARRIED_KEYS:
            if key in targets[old][1]:
                inner[key] = copy.deepcopy(targets[old][1][key])
        del tree[old]
        tree[new] = {AGENT_SERVER_TYPE_KEY_NAME: {source_type: inner}}
        _apply_held_back(tree, command_line, new, source_type)
    _repoint_environment_servers(tree, renames)
    _check_collection_keys(tree, renames)
    agent_map = dict(tree.get(AGENT_MAP_KEY) or {})
    tree[AGENT_MAP_KEY] = {**{old: new for old, new in renames.items() if old != new}, **agent_map}
    _check_model_pairings(tree, _agents(tree))
    return renames


def _check_names(
    tree: Mapping[str, Any], command_line: Mapping[str, Any], source: str, renames: Mapping[str, str]
) -> None:
    """Composed names must be free, and an agent the command line addresses must be the unbound one (its
    settings reach every copy) or a composed one."""
    produced = set(renames.values())
    clashes = sorted(
        new
        for new in produced
        if new in tree and new not in renames and new != source and new not in command_line
    )
    if clashes:
        raise AgentCompositionError(
            f"the composed agent name(s) {', '.join(clashes)} are already taken by other instances; rename them"
        )
    for name, block in command_line.items():
        addresses_an_agent = isinstance(block, Mapping) and AGENT_SERVER_TYPE_KEY_NAME in block
        if addresses_an_agent and name != source and name not in produced:
            raise UnsupportedAgentOverrideError(
                f"the override of '{name}' addresses an agent --agent-type replaces; address the agent that "
                f"replaces it ({', '.join(sorted(produced))}) or '{source}' (every composed agent)"
            )


def _apply_held_back(
    tree: dict[str, Any], command_line: Mapping[str, Any], name: str, agent_type: str
) -> None:
    """Overrides the command line addressed to the composed agent, merged onto it (its type's block)."""
    given = command_line.get(name)
    if not isinstance(given, Mapping):
        return
    for server_type, implementations in given.items():
        if server_type != AGENT_SERVER_TYPE_KEY_NAME or not isinstance(implementations, Mapping):
            raise UnsupportedAgentOverrideError(
                f"the override of '{name}' must address {name}.{AGENT_SERVER_TYPE_KEY_NAME}.{agent_type}"
            )
        for implementation, settings in implementations.items():
            if implementation != agent_type:
                raise UnsupportedAgentOverrideError(
                    f"'{name}' is a {agent_type} agent; the override addresses {name}.{server_type}.{implementation}"
                )
            _deep_merge(tree[name][server_type][agent_type], settings)


def _deep_merge(into: dict[str, Any], given: Mapping[str, Any]) -> None:
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def _repoint_environment_servers(tree: dict[str, Any], renames: Mapping[str, str]) -> None:
    for instance in tree.values():
        block = _only_block(instance, ENVIRONMENT_SERVER_TYPE_KEY_NAME)
        if block is None:
            continue
        for value in block[1].values():
            if isinstance(value, dict) and value.get("name") in renames:
                value["name"] = renames[value["name"]]


def _check_collection_keys(tree: Mapping[str, Any], renames: Mapping[str, str]) -> None:
    """`agent_name`, `agent_map` values and `fan_out` entries must name the composed agents."""
    named = [("agent_name", tree.get("agent_name"))]
    named += [(f"agent_map.{key}", value) for key, value in (tree.get(AGENT_MAP_KEY) or {}).items()]
    named += [
        (f"fan_out.{key}", agent)
        for key, agents in (tree.get("fan_out") or {}).items()
        for agent in agents or []
    ]
    stale = [
        f"{where}={value} (now {renames[value]})"
        for where, value in named
        if value in renames and renames[value] != value
    ]
    if stale:
        raise AgentCompositionError(f"--agent-type renamed agents these keys still name: {'; '.join(stale)}")


def _allowed(inner: Mapping[str, Any], key: str) -> list[str] | None:
    value = inner.get(key)
    if value is None:
        return None
    return [value] if isinstance(value, str) else [str(entry) for entry in value]


def _resources_inner(tree: Mapping[str, Any], name: Any) -> dict[str, Any]:
    block = _only_block(tree.get(name), RESOURCES_SERVER_TYPE_KEY_NAME) if isinstance(name, str) else None
    return block[1] if block else {}


def _pairing_allowed(tree: Mapping[str, Any]) -> bool:
    from_environment = os.environ.get(ALLOW_UNSUPPORTED_PAIRING_ENV_VAR_NAME, "").strip().lower()
    return bool(tree.get(ALLOW_UNSUPPORTED_PAIRING_KEY_NAME)) or from_environment not in ("", "0", "false")


def _check_agent_pairings(
    tree: Mapping[str, Any], agent_type: str, targets: Mapping[str, tuple[str, dict[str, Any]]]
) -> None:
    if _pairing_allowed(tree):
        return
    rejects: list[str] = []
    intersection: set[str] | None = None
    for name, (_, inner) in targets.items():
        resources = _referenced_name(inner, "resources_server")
        allowed = _allowed(_resources_inner(tree, resources), ALLOWED_AGENTS_KEY_NAME)
        if allowed is None:
            continue
        intersection = set(allowed) if intersection is None else intersection & set(allowed)
        if agent_type not in allowed:
            rejects.append(f"{resources} (of {name}) allows {', '.join(allowed)}")
    if rejects:
        common = ", ".join(sorted(intersection or ())) or "none"
        raise UnsupportedAgentPairingError(
            f"--agent-type {agent_type} is not known to score these environments correctly: {'; '.join(rejects)}. "
            f"Agent types all of them allow: {common}. Pass --allow-unsupported-pairing to run it anyway"
        )


def _check_model_pairings(tree: Mapping[str, Any], agents: Mapping[str, tuple[str, dict[str, Any]]]) -> None:
    if _pairing_allowed(tree):
        return
    for name, (_, inner) in agents.items():
        allowed = _allowed(
            _resources_inner(tree, _referenced_name(inner, "resources_server")), ALLOWED_MODEL_TYPES_KEY_NAME
        )
        model = _only_block(tree.get(_referenced_name(inner, "model_server")), MODEL_SERVER_TYPE_KEY_NAME)
        if allowed is None or model is None or model[0] in EXEMPT_MODEL_TYPES or model[0] in allowed:
            continue
        resources = _referenced_name(inner, "resources_server")
        raise UnsupportedModelPairingError(
            f"{resources} (of agent {name}) allows the model server types {', '.join(allowed)}, not {model[0]}; "
            f"use --model-type {allowed[0]}, or pass --allow-unsupported-pairing"
        )
