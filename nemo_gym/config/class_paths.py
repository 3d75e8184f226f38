"""Classes named in a config by dotted path (`package.module.Class`), as adapter environments take them."""

from __future__ import annotations

import importlib


def class_at_path(key: str, dotted: str, base: type) -> type:
    """The class `dotted` names, which must subclass `base`; otherwise a ValueError in one line naming the
    config `key` (a field validator turns it into the usual config error)."""
    module_name, _, class_name = dotted.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), class_name) if module_name else None
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"{key} {dotted!r} cannot be imported: {error}") from None
    if not (isinstance(found, type) and issubclass(found, base)):
        raise ValueError(f"{key} {dotted!r} is not a {base.__module__}.{base.__qualname__} subclass")
    return found
