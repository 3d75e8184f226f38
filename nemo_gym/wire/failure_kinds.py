"""Names for why an episode or a verification failed (`failure_kind`), shared by every server so that
metrics can count failures by cause. A server may also use its own `<server>:<kind>`; an unknown name is
logged once and passed on, never refused."""

from __future__ import annotations

import logging

from nemo_gym.wire.episodes import FailureStage as FailureStage

logger = logging.getLogger("nemo_gym.failure_kinds")

TRANSPORT_UNREACHABLE = "transport_unreachable"
TRANSPORT_PEER_DROP = "transport_peer_drop"
TRANSPORT_TIMEOUT = "transport_timeout"
TRANSPORT_LOCAL_RESOURCE = "transport_local_resource"
AGENT_RUN_ERROR = "agent_run_error"
AGENT_REQUEST_FAILED = "agent_request_failed"
AGENT_TIMEOUT = "agent_timeout"
AGENT_COMMAND_NOT_ALLOWED = "agent_command_not_allowed"
JUDGE_FAILED = "judge_failed"
JUDGE_UNPARSEABLE = "judge_unparseable"
VERIFIER_ERROR = "verifier_error"
PROVIDER_UNAVAILABLE = "provider_unavailable"
PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"
PROVIDER_OOM_KILLED = "provider_oom_killed"
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
SESSION_RELEASE_FAILED = "session_release_failed"
CANCELLED = "cancelled"
KILL_SHAPED = "kill_shaped"
SHUTDOWN = "shutdown"
PERSISTENCE_FAILED = "persistence_failed"
COHORT_INCOMPLETE = "cohort_incomplete"

FAILURE_KINDS = frozenset(
    {
        TRANSPORT_UNREACHABLE,
        TRANSPORT_PEER_DROP,
        TRANSPORT_TIMEOUT,
        TRANSPORT_LOCAL_RESOURCE,
        AGENT_RUN_ERROR,
        AGENT_REQUEST_FAILED,
        AGENT_TIMEOUT,
        AGENT_COMMAND_NOT_ALLOWED,
        JUDGE_FAILED,
        JUDGE_UNPARSEABLE,
        VERIFIER_ERROR,
        PROVIDER_UNAVAILABLE,
        PROVIDER_QUOTA_EXHAUSTED,
        PROVIDER_OOM_KILLED,
        SESSION_LOST,
        SESSION_EXPIRED,
        SESSION_RELEASE_FAILED,
        CANCELLED,
        KILL_SHAPED,
        SHUTDOWN,
        PERSISTENCE_FAILED,
        COHORT_INCOMPLETE,
    }
)
_warned: set[str] = set()


def is_registered(name: str) -> bool:
    return name in FAILURE_KINDS


def is_namespaced(name: str) -> bool:
    """`<server>:<kind>`, both parts non-empty."""
    server, colon, kind = name.partition(":")
    return bool(colon and server and kind)


def validate_failure_kind(name: str) -> str:
    """`name` unchanged; a name neither registered nor namespaced is logged (once per name)."""
    if not (is_registered(name) or is_namespaced(name)) and name not in _warned:
        _warned.add(name)
        logger.warning(
            "failure_kind %r is neither a registered kind nor '<server>:<kind>'; metrics will count it as is",
            name,
        )
    return name
