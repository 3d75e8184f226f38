"""Which environment server runs a row (NeMo Gym 0.7), what it is sent, and how its answer is read back.

In a 0.7 deployment collection talks to environment servers, each fronting one agent: a row goes to the
environment server of its agent (`environment_routing_mode: agent`, the default), to one named server
(`legacy`), or, for materialized rows (`task_id` + `task_input`), to the server its taskset is routed to
(`environment_server_routes`). An agent that no environment server names is, in NeMo Gym 0.7, given a
generated `legacy_agent` relay; here the collector calls such an agent directly, which is exactly what the
relay would forward, without a process and a hop per rollout. Results carry the relay's generated name
in `_ng_environment_server` all the same, so results and metrics group as in 0.7.

Typed servers (`single_agent_turn`) take an episode request and answer an episode response; the row is
turned into the one and the other back into a flat result here, so every caller sees flat rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from omegaconf import DictConfig

from nemo_gym.collection.records import agent_name_of
from nemo_gym.config.discovery import find_server_instances
from nemo_gym.config.environment_servers import environment_server_agent_names, generated_relays
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.jsonl import TASK_INDEX_KEY
from nemo_gym.config.key_names import (
    ENVIRONMENT_SERVER_STAMP_KEY_NAME,
    ENVIRONMENT_SERVER_TYPE_KEY_NAME,
    ROLLOUT_ID_KEY_NAME,
    TASK_SOURCE_KEY_NAME,
)
from nemo_gym.http.rollout_paths import episode_id_of
from nemo_gym.wire.episodes import is_materialized_task_row, materialize_task
from nemo_gym.wire.sessions import ROLLOUT_ID_PATTERN

RoutingMode = Literal["agent", "legacy", "taskset"]
RESULT_TYPE_KEY = "_ng_result_type"
TASK_ID_KEY = "_ng_task_id"
ENVIRONMENT_SERVER_FAILURE_CLASS = "environment_server_failed"
LEGACY_AGENT = "legacy_agent"
# Environment servers whose `/run` takes an episode request (the others take the flat row).
TYPED_IMPLEMENTATIONS = frozenset({"single_agent_turn"})
# Keys a typed result may not carry: the collector's own.
RESERVED_RESULT_KEYS = ("ng_trajectory", "ng_model_call_capture", "ng_perf")
ROLLOUT_ID = re.compile(ROLLOUT_ID_PATTERN)


class AmbiguousEnvironmentServerError(ValueError):
    pass


@dataclass(frozen=True)
class RunTarget:
    """Where a row's `/run` goes (`server`), the environment server it is filed under, and how to talk to it."""

    server: str
    environment_server: str
    result_type: str
    typed: bool
    resources_server: str | None = None


class EpisodeFailedError(Exception):
    """An environment server answered that the episode failed (HTTP 200 with a failure)."""

    def __init__(self, message: str, terminal: bool, stage: str | None, partial_response: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.terminal = terminal
        self.stage = stage
        self.partial_response = partial_response
        # Trainers classify failures by status: a retry can help (503) or it cannot (422).
        self.status = 422 if terminal else 503

    def sidecar_fields(self) -> dict[str, Any]:
        """NeMo Gym 0.7's failure keys for this failure."""
        fields = {
            "_ng_failure_class": ENVIRONMENT_SERVER_FAILURE_CLASS,
            "_ng_failure_terminal": self.terminal,
            "_ng_failure_message": self.message,
        }
        if self.stage is not None:
            fields["_ng_failure_stage"] = self.stage
        if self.partial_response is not None:
            fields["_ng_failure_partial_response"] = self.partial_response
        return fields


class EnvironmentRouter:
    """Routes rows of one deployment (its merged config) to environment servers."""

    def __init__(
        self,
        cfg: DictConfig,
        mode: RoutingMode = "agent",
        server_name: str | None = None,
        routes: Mapping[str, str] | None = None,
    ) -> None:
        self.mode = mode
        self.server_name = server_name
        self.routes = dict(routes or {})
        self.targets: dict[str, RunTarget] = {}
        self.fronting: dict[str, list[str]] = {}
        instances = find_server_instances(cfg)
        for instance in instances:
            if instance.SERVER_TYPE != ENVIRONMENT_SERVER_TYPE_KEY_NAME:
                continue
            resources = instance.get_inner_run_server_config_dict().get("resources_server")
            self.targets[instance.name] = RunTarget(
                server=instance.name,
                environment_server=instance.name,
                result_type=instance.impl_name,
                typed=instance.impl_name in TYPED_IMPLEMENTATIONS,
                resources_server=resources.get("name") if isinstance(resources, Mapping) else None,
            )
            for agent in environment_server_agent_names(instance):
                self.fronting.setdefault(agent, []).append(instance.name)
        self.generated = generated_relays(instances)
        for agent, name in self.generated.items():
            self.targets[name] = RunTarget(agent, name, LEGACY_AGENT, typed=False)
        self._check_settings()

    @classmethod
    def for_deployment(cls, cfg: DictConfig, settings: Any = None) -> EnvironmentRouter:
        """The router of a deployment, with the routing keys of `settings` (a collection config) if given."""
        return cls(
            cfg,
            mode=getattr(settings, "environment_routing_mode", None) or "agent",
            server_name=getattr(settings, "environment_server_name", None),
            routes=getattr(settings, "environment_server_routes", None),
        )

    def _check_settings(self) -> None:
        if self.mode == "legacy" and not self.server_name:
            raise ConfigError(
                "environment_routing_mode=legacy needs environment_server_name; set ++environment_server_name=<server>"
            )
        if self.mode == "taskset" and not self.routes:
            raise ConfigError(
                "environment_routing_mode=taskset needs environment_server_routes; set "
                "++environment_server_routes={<taskset>: <environment server>}"
            )
        named = ([self.server_name] if self.server_name else []) + list(self.routes.values())
        unknown = sorted({name for name in named if name not in self.targets})
        if unknown:
            raise ConfigError(
                f"environment server(s) {unknown} are not in the deployment; known: {sorted(self.targets)}"
            )

    def target(self, row: Mapping[str, Any]) -> RunTarget:
        """The environment server of one row (ValueError saying why there is none)."""
        rollout_id = row.get(ROLLOUT_ID_KEY_NAME)
        if rollout_id is not None and not (isinstance(rollout_id, str) and ROLLOUT_ID.match(rollout_id)):
            raise ValueError(f"{ROLLOUT_ID_KEY_NAME} {rollout_id!r} must match {ROLLOUT_ID_PATTERN}")
        if is_materialized_task_row(row):
            taskset = row["task_id"].get("taskset")
            if taskset not in self.routes:
                raise ValueError(f"taskset {taskset!r} has no route in environment_server_routes")
            return self.targets[self.routes[taskset]]
        if self.mode == "taskset":
            raise ValueError(
                "environment_routing_mode=taskset takes only materialized rows (task_id, task_input)"
            )
        if self.mode == "legacy":
            return self.targets[self.server_name]
        stamped = row.get(ENVIRONMENT_SERVER_STAMP_KEY_NAME)
        if isinstance(stamped, str) and stamped in self.targets:
            return self.targets[stamped]
        agent = agent_name_of(dict(row))
        servers = self.fronting.get(agent or "", [])
        if len(servers) > 1:
            raise AmbiguousEnvironmentServerError(
                f"agent {agent!r} is fronted by several environment servers {servers}; name one in "
                f"the row's {ENVIRONMENT_SERVER_STAMP_KEY_NAME}"
            )
        if servers:
            return self.targets[servers[0]]
        if agent in self.generated:
            return self.targets[self.generated[agent]]
        raise ValueError(f"agent_ref {agent!r} names no agent of this deployment")

    def request_body(self, row: dict[str, Any], target: RunTarget) -> dict[str, Any]:
        """What `target`'s `/run` is sent for `row`."""
        if not target.typed:
            return row
        if is_materialized_task_row(row):
            task = {"task_id": row["task_id"], "task_input": row["task_input"]}
        else:
            taskset = row.get(TASK_SOURCE_KEY_NAME) or target.resources_server or target.server
            task = materialize_task(row, taskset=taskset, task_index=row.get(TASK_INDEX_KEY))
        return {"episode_id": episode_id_of(row), "task": task}

    def result_of(self, target: RunTarget, answer: Any, *, stamp: bool = True) -> dict[str, Any]:
        """The flat result of `target`'s answer, stamped with the environment server (unless `stamp` is
        false, as trainers get it); raises
        `EpisodeFailedError` for a failed episode and ValueError for an answer that is neither."""
        if not isinstance(answer, dict):
            raise ValueError(f"{target.server} answered {type(answer).__name__}, not a JSON object")
        if target.typed:
            answer = _flat_episode_result(answer)
        elif answer.get("_ng_failure_class") == ENVIRONMENT_SERVER_FAILURE_CLASS:
            raise EpisodeFailedError(
                str(answer.get("_ng_failure_message")),
                bool(answer.get("_ng_failure_terminal")),
                answer.get("_ng_failure_stage"),
                answer.get("_ng_failure_partial_response"),
            )
        if stamp:
            answer[ENVIRONMENT_SERVER_STAMP_KEY_NAME] = target.environment_server
            answer[RESULT_TYPE_KEY] = target.result_type
        return answer


def _flat_episode_result(answer: dict[str, Any]) -> dict[str, Any]:
    failure = answer.get("failure")
    if isinstance(failure, dict):
        raise EpisodeFailedError(
            str(failure.get("failure_reason")),
            bool(failure.get("terminal")),
            failure.get("stage"),
            failure.get("partial_response"),
        )
    result = answer.get("result")
    if not isinstance(result, dict):
        raise ValueError("the episode answer has neither a result nor a failure")
    reserved = [key for key in result if key.startswith("_ng_") or key in RESERVED_RESULT_KEYS]
    if reserved:
        raise ValueError(f"the episode result uses keys reserved for the collector: {reserved}")
    task_id = answer.get("task_id")
    return {**result, TASK_ID_KEY: task_id.get("task_id") if isinstance(task_id, dict) else task_id}
