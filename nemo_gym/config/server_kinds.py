"""The kinds of server Gym runs, declared once.

Each kind is a top-level folder (`resources_servers/`), the key of an instance's config block
(`{my_env: {resources_servers: {mcqa: ...}}}`), the `type` of a reference to one of its instances and a
`gym list` / `gym env publish --kind` word. Everything that needs the set of kinds or one of these facts reads
it from here, so adding a kind is one entry below (plus its config classes in `server_instances`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServerKind:
    """One kind of server and the names the CLI and configs use for it."""

    key: str  # folder name, config-block key and reference `type`
    listing: str  # `gym list <listing>`
    publish_kind: str  # `gym env publish --kind <publish_kind>`


MODEL = ServerKind("responses_api_models", listing="models", publish_kind="model")
RESOURCES = ServerKind("resources_servers", listing="resources-servers", publish_kind="resources-server")
AGENT = ServerKind("responses_api_agents", listing="agents", publish_kind="agent")
ENVIRONMENT = ServerKind(
    "environment_servers", listing="environment-servers", publish_kind="environment-server"
)

# Order matters: it is the order kinds are validated, discovered and listed in.
SERVER_KINDS: tuple[ServerKind, ...] = (MODEL, RESOURCES, AGENT, ENVIRONMENT)
SERVER_TYPES: tuple[str, ...] = tuple(kind.key for kind in SERVER_KINDS)
KINDS_BY_KEY: dict[str, ServerKind] = {kind.key: kind for kind in SERVER_KINDS}


def server_type_of(block: Mapping[str, Any], default: str = "unknown") -> str:
    """The kind key an instance's config block is written under, or `default` when it has none."""
    return next((key for key in SERVER_TYPES if key in block), default)


def is_instance_block(value: Any) -> bool:
    """Whether `value` looks like a server instance's block: a mapping with a kind key at its top."""
    return isinstance(value, Mapping) and bool(value.keys() & set(SERVER_TYPES))
