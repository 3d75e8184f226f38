"""Shards: slices of a deployment placed on the nodes of a Ray cluster, each replica one co-hosting process.

```yaml
ray_head_node_address: auto        # or host:port of the cluster's GCS; unset: a private local cluster
shards:
  weather:
    servers: [example_single_tool_call, example_single_tool_call_simple_agent, policy_model]
    replicas: 2                     # replicas of this slice, each a Ray actor on some node
    num_cpus: 1                     # CPUs each replica reserves
    placement_strategy: SPREAD      # SPREAD | STRICT_SPREAD | PACK | STRICT_PACK
```

A rollout's calls stay inside the replica that took its `/run` (the servers of one replica call each other
in-process), so sessions never need routing to a particular replica. Servers in no shard run on the
launcher's host as usual. Only this module's checks run without Ray: nothing here imports it.
"""

from __future__ import annotations

from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nemo_gym.config.errors import ConfigError
from nemo_gym.config.key_names import RAY_HEAD_NODE_ADDRESS_KEY_NAME
from nemo_gym.config.settings import top_level_setting
from nemo_gym.wire.validation_errors import describe_validation_error

SHARDS_KEY_NAME = "shards"
# A replica's `status` in the head server's `/server_instances`.
REPLICA_UP = "up"
REPLICA_LOST = "lost"
PlacementStrategy = Literal["SPREAD", "STRICT_SPREAD", "PACK", "STRICT_PACK"]


class ShardSpec(BaseModel):
    """One shard of a deployment: which server instances, how many replicas, and where they go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    servers: tuple[str, ...] = Field(min_length=1, description="server instances every replica hosts")
    replicas: int = Field(default=1, ge=1)
    num_cpus: float = Field(default=1.0, gt=0, description="CPUs each replica reserves on its node")
    placement_strategy: PlacementStrategy = "SPREAD"


def shard_specs(cfg: DictConfig, instance_names: list[str]) -> list[ShardSpec]:
    """The `shards` of the config, checked against its server instances (each in at most one shard);
    empty when there are none. A bad block is a one-line ConfigError naming the shard and the fix."""
    block = top_level_setting(cfg, SHARDS_KEY_NAME, None)
    if block is None:
        return []
    raw = OmegaConf.to_container(block, resolve=True) if isinstance(block, DictConfig) else block
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(
            f"{SHARDS_KEY_NAME} must map shard names to {{servers, replicas, num_cpus, placement_strategy}}, "
            f"got {raw!r}"
        )
    specs = [_shard_spec(name, body) for name, body in raw.items()]
    owner: dict[str, str] = {}
    known = set(instance_names)
    for spec in specs:
        for server in spec.servers:
            if server not in known:
                raise ConfigError(
                    f"{SHARDS_KEY_NAME}.{spec.name}.servers: '{server}' is not a server instance of this "
                    f"config (instances: {', '.join(sorted(known))})"
                )
            if server in owner:
                raise ConfigError(
                    f"server instance '{server}' is in shards '{owner[server]}' and '{spec.name}'; "
                    "a server belongs to one shard"
                )
            owner[server] = spec.name
    return specs


def _shard_spec(name: Any, body: Any) -> ShardSpec:
    if not isinstance(body, dict):
        raise ConfigError(f"{SHARDS_KEY_NAME}.{name} must be a mapping with at least 'servers', got {body!r}")
    try:
        return ShardSpec.model_validate({**body, "name": str(name)})
    except ValidationError as error:
        raise ConfigError(f"{SHARDS_KEY_NAME}.{name}: {describe_validation_error(error)}") from None


def ray_address_from(cfg: DictConfig) -> str | None:
    """`ray_head_node_address` (`auto` finds a cluster started on this node by `ray start`), or None."""
    address = top_level_setting(cfg, RAY_HEAD_NODE_ADDRESS_KEY_NAME, None)
    return str(address) if address else None
