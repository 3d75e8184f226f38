"""Names that change, and the references that must follow them, as NeMo Gym 0.7 handles them.

A top-level `_inherit_from` moves an agent block under a new name: the environment servers naming the old
one are re-pointed to it. 0.7 renamed six reasoning-gym environments and their agents: a config or dataset
naming an old agent reaches the new one through `agent_map` (the names: `nemo_gym.config.legacy_names`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import AGENT_SERVER_TYPE_KEY_NAME, ENVIRONMENT_SERVER_TYPE_KEY_NAME
from nemo_gym.config.legacy_names import LEGACY_AGENT_NAMES

logger = logging.getLogger("nemo_gym.global_config")

_MOVE_KEY = "_inherit_from"
_COPY_KEY = "_copy"
_DIRECTIVE_STRING = re.compile(r"^\$\{(inherit_from|copy):\s*([^}]*?)\s*\}$")


class AmbiguousAgentRenameError(ConfigError):
    pass


def _is_agent(block: Any) -> bool:
    return isinstance(block, Mapping) and isinstance(block.get(AGENT_SERVER_TYPE_KEY_NAME), Mapping)


def _directive_source(value: Any) -> str | None:
    """The dotted source of a `_inherit_from` / `_copy` directive, else None."""
    if isinstance(value, str) and (match := _DIRECTIVE_STRING.match(value)):
        return match.group(2)
    if isinstance(value, Mapping):
        source = value.get(_MOVE_KEY, value.get(_COPY_KEY))
        return None if source is None else str(source)
    return None


def top_level_agent_copies(tree: Mapping[str, Any]) -> dict[str, list[str]]:
    """Before the directives run: agent instance -> the top-level names that take their block from it."""
    copies: dict[str, list[str]] = {}
    for name, value in tree.items():
        source = _directive_source(value)
        if source and "." not in source and _is_agent(tree.get(source)):
            copies.setdefault(source, []).append(str(name))
    return copies


def _environment_server_refs(tree: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(environment server, a reference dict in its config) for every `{name: ...}` field it has."""
    refs = []
    for server, instance in tree.items():
        implementations = (
            instance.get(ENVIRONMENT_SERVER_TYPE_KEY_NAME) if isinstance(instance, Mapping) else None
        )
        for inner in (implementations or {}).values():
            for value in (inner or {}).values() if isinstance(inner, Mapping) else ():
                if isinstance(value, dict) and "name" in value:
                    refs.append((str(server), value))
    return refs


def repoint_moved_agents(tree: dict[str, Any], copies: Mapping[str, list[str]]) -> None:
    """After the directives ran: an environment server naming an agent that `_inherit_from` moved away now
    names the agent's new name; with several new names it cannot be told which, a config error."""
    for server, ref in _environment_server_refs(tree):
        source = ref["name"]
        if source in tree or source not in copies:
            continue
        targets = [name for name in copies[source] if _is_agent(tree.get(name))]
        if len(targets) > 1:
            raise AmbiguousAgentRenameError(
                f"environment server '{server}' names agent '{source}', which was moved to "
                f"{', '.join(map(repr, targets))}; name one of them in {server}'s config"
            )
        if targets:
            ref["name"] = targets[0]


def apply_legacy_agent_aliases(tree: dict[str, Any]) -> None:
    """Route 0.7's old reasoning-gym agent names to the renamed agents (in place): rows naming an old name
    follow `agent_map`; an `agent_name` naming one is rewritten, with a warning."""
    aliases = {
        old: new for old, new in LEGACY_AGENT_NAMES.items() if old not in tree and _is_agent(tree.get(new))
    }
    if not aliases:
        return
    agent_map = dict(tree.get("agent_map") or {})
    tree["agent_map"] = {**aliases, **agent_map}
    old = tree.get("agent_name")
    if old in aliases:
        tree["agent_name"] = aliases[old]
        logger.warning("agent_name=%s is a renamed agent; using %s (update the config)", old, aliases[old])
