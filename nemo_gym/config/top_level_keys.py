"""Top-level config keys that look like a misspelt setting: one warning line each, with a did-you-mean.

A top-level key is a server instance, a setting (Gym's or NeMo Gym 0.7's), or a value of the user's own
that other values refer to (`${my_var}`). NeMo Gym accepts any top-level key, and so does Gym; but a key
that is none of those and nearly spells a setting (`num_repeat`) is almost surely a typo that would
otherwise change nothing, silently.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from nemo_gym.config.server_kinds import is_instance_block

logger = logging.getLogger("nemo_gym.global_config")

# NeMo Gym 0.7's top-level keys (global settings, collection, reverify, aggregation, exporters).
NEMO_GYM_KEYS = frozenset(
    """
    config_paths entrypoint default_host head_server disallowed_ports head_server_deps python_version
    pip_install_verbose uv_pip_set_python skip_venv_if_present hf_token ray_head_node_address port_range_low
    port_range_high dry_run server_spinup_timeout_seconds model_endpoint_readiness_timeout_seconds
    allow_openai_version_skew uv_cache_dir uv_lock_timeout_seconds uv_venv_dir results_dir cache_dir
    _inherit_from _copy _delete_key nemo_gym_log_dir verbose json query component_name observability_enabled
    model_call_capture_dir token_id_capture skip_verification skip_verification_reward allow_unsupported_pairing
    environment_server_name environment_server_routes environment_routing_mode
    error_on_agent_without_environment_server policy_base_url policy_api_key policy_model_name policy_model
    use_absolute_ip error_on_almost_servers uvicorn_timeout_worker_healthcheck global_aiohttp_connector_limit
    global_aiohttp_connector_limit_per_host global_aiohttp_intended_concurrency
    global_aiohttp_intended_concurrency_per_host global_aiohttp_client_request_debug
    global_aiohttp_tcp_keepalive_idle_seconds global_aiohttp_tcp_keepalive_interval_seconds
    global_aiohttp_tcp_keepalive_probes profiling_enabled profiling_results_dirpath uvicorn_logging_show_200_ok
    uvicorn_proxy_headers uvicorn_forwarded_allow_ips wandb_project wandb_name wandb_api_key mlflow_tracking_uri
    mlflow_tracking_token mlflow_experiment_name mlflow_run_name upload_rollouts upload_rollouts_to_wandb
    telemetry agent_name agent_map fan_out output_jsonl_fpath input_jsonl_fpath limit num_repeats
    num_repeats_add_seed interleave_repeats num_samples_in_parallel max_resident_rollout_tasks
    retain_results_in_memory responses_create_params resume_from_cache prompt_config skills disable_aggregation
    disable_health_check health_check_workers health_check_ignored_checks count_failure_classes_as_zero
    count_missing_rollouts_as_zero route_failures_to_sidecar require_complete rollout_collection_driver
    dispatch_budget_s drain_margin_s dispatch_longest_first retry_terminal_timeouts
    retry_invalid_judge_responses split reuse_existing_data_preparation input_glob merge_shards input_format
    materialized_inputs_jsonl_fpath rollouts_jsonl_fpath atif_manifest_jsonl_fpath force overwrite
    judge_failed_only append dotenv_path task_data_validation format session_id agent_version
    """.split()
)
# Gym's own: the fields of every command's settings model and of the deployment's settings (a test keeps
# this list complete), and keys read outside a model.
GYM_KEYS = frozenset(
    """
    colocate colocate_num_workers readiness_deadline_s shards gitlab_token gitlab_url gitlab_project
    all allow_partial_rollouts artifact_fpath commit_description commit_message create_pr data_source
    dataset_name delete_from_gitlab failed full global_http_connect_timeout_s global_http_deadline_s
    global_http_max_attempts global_max_request_body_mb global_request_read_timeout_s hf_collection_name
    hf_collection_slug hf_dataset_prefix hf_organization host inputs_jsonl_fpath jsonl_fpath max_chars
    max_reward max_rollouts mode num_shards offset output_dirpath output_fpath overwrite_metrics_conflicts
    parallel pass_threshold port repo_id resource_config_path resources_server resources_server_name revision
    rollout_timeout_s shard_index should_download skip_data_checks skip_tool_replay static_html_fpath task
    timeout_s use_cached_prepared_benchmarks prepare_script_args version yes cpu_pool_backend health_check_timeout_s
    """.split()
)
KNOWN_KEYS = NEMO_GYM_KEYS | GYM_KEYS
INTERPOLATED_ROOT = re.compile(r"\$\{\s*([A-Za-z_][\w-]*)")
SIMILARITY = 0.8


def misspelt_keys(tree: Mapping[str, Any]) -> list[str]:
    """One line per top-level key that looks like a misspelt setting (each also logged as a warning)."""
    referenced = set(_interpolated_roots(tree))
    known = sorted(KNOWN_KEYS)
    lines = []
    for key, value in tree.items():
        if not isinstance(key, str) or key in KNOWN_KEYS or key in referenced:
            continue
        if is_instance_block(value):
            continue  # a server instance
        close = difflib.get_close_matches(key, known, n=1, cutoff=SIMILARITY)
        if close:
            lines.append(
                f"top-level key '{key}' is no setting; did you mean '{close[0]}'? (a value of your own is "
                f"fine once another value refers to it as ${{{key}}})"
            )
    for line in lines:
        logger.warning(line)
    return lines


def _interpolated_roots(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield from INTERPOLATED_ROOT.findall(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _interpolated_roots(item)
    elif isinstance(value, list):
        for item in value:
            yield from _interpolated_roots(item)
