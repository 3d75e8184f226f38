"""The structural directives of a merged config, expanded in place: `_inherit_from` moves a subtree,
`_copy` copies one, `_delete_key` drops keys; and the check that no mandatory value (`???`) is left."""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Sequence
from typing import Any

from nemo_gym.config.errors import ConfigError, ConfigMissingValuesError, InheritPathNotFoundError

MISSING_VALUE = "???"
INHERIT_FROM_KEY = "_inherit_from"
COPY_KEY = "_copy"
DELETE_KEY_KEY = "_delete_key"

_DIRECTIVE_STRING = re.compile(r"^\$\{(inherit_from|copy):\s*([^}]*?)\s*\}$")


def apply_structural_directives(tree: dict[str, Any]) -> None:
    """Expand `_inherit_from` (move), `_copy` (copy) and `_delete_key` in place, anywhere in `tree`."""
    expansion = _expanded_directive(tree, tree, (), ())
    if expansion is not None:
        new_root, _ = expansion
        if not isinstance(new_root, dict):
            raise ConfigError("A directive at the top level of the config must resolve to a mapping")
        tree.clear()
        tree.update(new_root)
    _expand_directives_below(tree, tree, (), ())


def _expand_directives_below(
    root: dict[str, Any], node: dict | list, path: tuple, active_sources: tuple[str, ...]
) -> None:
    keys = list(node) if isinstance(node, dict) else list(range(len(node)))
    for key in keys:
        if key not in (node if isinstance(node, dict) else range(len(node))):
            continue  # moved away by an earlier `_inherit_from`
        child_path = (*path, key)
        sources = active_sources
        expansion = _expanded_directive(root, node[key], child_path, active_sources)
        if expansion is not None:
            node[key], source = expansion
            sources = (*active_sources, source) if source else active_sources
        if isinstance(node[key], dict | list):
            _expand_directives_below(root, node[key], child_path, sources)


def _expanded_directive(
    root: dict[str, Any], value: Any, path: tuple, active_sources: tuple[str, ...]
) -> tuple[Any, str | None] | None:
    """`(new value, source path or None)` if `value` is a directive, else None."""
    if isinstance(value, str) and (match := _DIRECTIVE_STRING.match(value)):
        kind, source = match.groups()
        return _taken_from_source(
            root, source, path, move=kind == "inherit_from", active=active_sources
        ), source
    if not isinstance(value, dict) or not ({INHERIT_FROM_KEY, COPY_KEY, DELETE_KEY_KEY} & value.keys()):
        return None
    if INHERIT_FROM_KEY in value and COPY_KEY in value:
        raise ConfigError(f"'{dotted(path)}' has both {INHERIT_FROM_KEY} and {COPY_KEY}; keep one")
    own = {k: v for k, v in value.items() if k not in (INHERIT_FROM_KEY, COPY_KEY, DELETE_KEY_KEY)}
    keys_to_delete = _keys_to_delete(value.get(DELETE_KEY_KEY), path)
    for key in keys_to_delete & own.keys():
        del own[key]
    source = value.get(INHERIT_FROM_KEY, value.get(COPY_KEY))
    if source is None:
        _delete_keys(own, keys_to_delete - value.keys(), path)
        return own, None
    base = _taken_from_source(root, str(source), path, move=INHERIT_FROM_KEY in value, active=active_sources)
    if base == MISSING_VALUE:
        return MISSING_VALUE, str(source)
    if not isinstance(base, dict):
        if own:
            raise ConfigError(f"'{dotted(path)}' adds keys to '{source}', which is not a mapping")
        return base, str(source)
    result = _deep_merged(base, own)
    _delete_keys(result, keys_to_delete - value.keys(), path)
    return result, str(source)


def _keys_to_delete(spec: Any, path: tuple) -> set[str]:
    """`_delete_key: "a, b"` (or a list) as a set of key names."""
    if spec is None:
        return set()
    names = spec.split(",") if isinstance(spec, str) else spec
    if not isinstance(names, list):
        raise ConfigError(f"{DELETE_KEY_KEY} at '{dotted(path)}' must be a comma-separated string of keys")
    return {str(name).strip() for name in names if str(name).strip()}


def _delete_keys(mapping: dict[str, Any], keys: set[str], path: tuple) -> None:
    for key in sorted(keys):
        if key not in mapping:
            raise InheritPathNotFoundError(
                f"{DELETE_KEY_KEY} at '{dotted(path)}' names '{key}', which is not a key there"
            )
        del mapping[key]


def _taken_from_source(
    root: dict[str, Any], source: str, target: tuple, move: bool, active: tuple[str, ...]
) -> Any:
    """A deep copy of the subtree at dotted path `source`, removed from its place when `move`."""
    directive = INHERIT_FROM_KEY if move else COPY_KEY
    parts = tuple(part for part in source.split(".") if part)
    if not parts:
        raise InheritPathNotFoundError(f"{directive} at '{dotted(target)}' names no path")
    if source in active or tuple(map(str, target[: len(parts)])) == parts:
        raise ConfigError(
            f"{directive} at '{dotted(target)}' refers to '{source}', which encloses it (a cycle)"
        )
    parent, last = _parent_and_key(root, parts, directive, target)
    value = copy.deepcopy(parent[last])
    if move:
        del parent[last]
    return _fully_expanded(root, value, target, (*active, source))


def _fully_expanded(root: dict[str, Any], value: Any, path: tuple, active: tuple[str, ...]) -> Any:
    """`value` with its own directives and those below it expanded, so chains resolve in any order."""
    expansion = _expanded_directive(root, value, path, active)
    if expansion is not None:
        value, source = expansion
        active = (*active, source) if source else active
    if isinstance(value, dict | list):
        _expand_directives_below(root, value, path, active)
    return value


def _parent_and_key(
    root: dict[str, Any], parts: tuple[str, ...], directive: str, target: tuple
) -> tuple[Any, Any]:
    """The container holding the (non-empty) dotted path `parts`, and the last key."""
    parent: Any = None
    key: Any = None
    node: Any = root
    for depth, part in enumerate(parts):
        key = _existing_child_key(node, part)
        if key is None:
            siblings = [str(name) for name in node] if isinstance(node, dict) else []
            close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.6)
            hint = f"; did you mean '{dotted((*parts[:depth], close[0]))}'?" if close else ""
            raise InheritPathNotFoundError(
                f"{directive} at '{dotted(target)}' names '{'.'.join(parts)}', "
                f"which does not exist in the merged config{hint}"
            )
        parent, node = node, node[key]
    return parent, key


def _existing_child_key(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return part if part in node else None
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return int(part)
    return None


def _deep_merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in override.items():
        both_mappings = isinstance(result.get(key), dict) and isinstance(value, dict)
        result[key] = _deep_merged(result[key], value) if both_mappings else value
    return result


def dotted(path: Sequence[Any]) -> str:
    return ".".join(str(part) for part in path) or "<root>"


def find_missing_value_paths(tree: Any, path: tuple = ()) -> list[str]:
    """Dotted paths of every `???` leaf, in config order."""
    if isinstance(tree, dict):
        return [
            found for key, value in tree.items() for found in find_missing_value_paths(value, (*path, key))
        ]
    if isinstance(tree, list):
        return [
            found
            for index, value in enumerate(tree)
            for found in find_missing_value_paths(value, (*path, index))
        ]
    return [dotted(path)] if tree == MISSING_VALUE else []


def raise_if_missing_values(tree: dict[str, Any]) -> None:
    missing = find_missing_value_paths(tree)
    if missing:
        raise ConfigMissingValuesError(
            f"Missing values (???): {', '.join(missing)} — set each with ++<path>=<value> "
            f"(e.g. ++{missing[0]}=<value>) or in env.yaml"
        )
