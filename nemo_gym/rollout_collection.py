"""The historical import path of rollout collection: every name lives in a module of
`nemo_gym.collection` (see its docstring for the layout and the files a collection writes).

`RolloutCollectionHelper` here is NeMo Gym's trainer-facing API (`nemo_gym.collection.trainer`); the
`NG_*` names are NeMo Gym's names for the keys collection stamps on rows.
"""

from nemo_gym.collection.aggregation import aggregate_results, stripped_for_aggregation
from nemo_gym.collection.collector import RolloutCollector, collect_rollouts
from nemo_gym.collection.config import DEFAULT_MAX_IN_FLIGHT, RolloutCollectionConfig
from nemo_gym.collection.ledger import CollectionLedger
from nemo_gym.collection.materialize import MAX_ROWS_LISTED, materialize, repeats_for, seeded_metadata
from nemo_gym.collection.paths import CollectionPaths, refuse_to_replace
from nemo_gym.collection.pipeline import ItemT, ResultT, completed_in_any_order
from nemo_gym.collection.progress import PROGRESS_MILESTONES_PCT, CollectionProgress, CollectionSummary
from nemo_gym.collection.records import (
    DEFAULT_MAX_ATTEMPTS,
    FAILURE_ATTEMPT_KEY,
    FAILURE_MESSAGE_KEY,
    FAILURE_STATUS_KEY,
    FAILURE_TERMINAL_KEY,
    MAX_ATTEMPTS_ENV_VAR_NAME,
    MAX_FAILURE_MESSAGE_CHARS,
    NO_PERSIST_KEY,
    RETRYABLE_CLIENT_STATUSES,
    FailureClass,
    agent_name_of,
    error_message,
    failure_record,
    max_rollout_attempts,
    status_failure_class,
)
from nemo_gym.collection.runner import COLLECTOR_DEADLINE_MARGIN_S, RolloutRunner
from nemo_gym.collection.shards import SIDECAR_SUFFIXES, ShardAggregationConfig, aggregate_shards, shard_files
from nemo_gym.collection.trainer import (
    AGENT_REQUEST_FAILED_FAILURE_CLASS,
    AGENT_RUN_ERROR_FAILURE_CLASS,
    DISPATCH_DRAINED_KEY,
    RolloutCollectionHelper,
    RolloutTimeoutError,
)
from nemo_gym.config.jsonl import FAILURE_CLASS_KEY

NG_FAILURE_CLASS_KEY = FAILURE_CLASS_KEY
NG_NO_PERSIST_KEY = NO_PERSIST_KEY
NG_TERMINAL_KEY = FAILURE_TERMINAL_KEY
NG_DISPATCH_DRAINED_KEY = DISPATCH_DRAINED_KEY
get_max_rollout_attempts = max_rollout_attempts

__all__ = [
    "AGENT_REQUEST_FAILED_FAILURE_CLASS",
    "AGENT_RUN_ERROR_FAILURE_CLASS",
    "agent_name_of",
    "aggregate_results",
    "aggregate_shards",
    "collect_rollouts",
    "CollectionLedger",
    "CollectionPaths",
    "CollectionProgress",
    "CollectionSummary",
    "COLLECTOR_DEADLINE_MARGIN_S",
    "completed_in_any_order",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_IN_FLIGHT",
    "error_message",
    "FAILURE_ATTEMPT_KEY",
    "FAILURE_MESSAGE_KEY",
    "failure_record",
    "FAILURE_STATUS_KEY",
    "FAILURE_TERMINAL_KEY",
    "FailureClass",
    "get_max_rollout_attempts",
    "ItemT",
    "materialize",
    "MAX_ATTEMPTS_ENV_VAR_NAME",
    "MAX_FAILURE_MESSAGE_CHARS",
    "max_rollout_attempts",
    "MAX_ROWS_LISTED",
    "NG_DISPATCH_DRAINED_KEY",
    "NG_FAILURE_CLASS_KEY",
    "NG_NO_PERSIST_KEY",
    "NG_TERMINAL_KEY",
    "NO_PERSIST_KEY",
    "PROGRESS_MILESTONES_PCT",
    "refuse_to_replace",
    "repeats_for",
    "ResultT",
    "RETRYABLE_CLIENT_STATUSES",
    "RolloutCollectionConfig",
    "RolloutCollectionHelper",
    "RolloutRunner",
    "RolloutTimeoutError",
    "RolloutCollector",
    "seeded_metadata",
    "shard_files",
    "ShardAggregationConfig",
    "SIDECAR_SUFFIXES",
    "status_failure_class",
    "stripped_for_aggregation",
]
