"""NeMo Gym's names for config keys, row keys and environment variables, at the values NeMo Gym gives them.

Trainers and environment folders written for NeMo Gym import these from `nemo_gym.config.global_config`; each
one that Gym already spells elsewhere is that same value, not a second copy of the string.
"""

from __future__ import annotations

from nemo_gym.config import server_kinds
from nemo_gym.config.defaults import DEFAULT_HEAD_SERVER_PORT as DEFAULT_HEAD_SERVER_PORT
from nemo_gym.config.directives import COPY_KEY, DELETE_KEY_KEY, INHERIT_FROM_KEY
from nemo_gym.config.jsonl import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.config.server_refs import AGENT_REF_KEY
from nemo_gym.config.sources import CONFIG_PATHS_KEY

# Environment variables a launcher hands its server processes.
NEMO_GYM_CONFIG_DICT_ENV_VAR_NAME = "NEMO_GYM_CONFIG_DICT"
NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME = "NEMO_GYM_CONFIG_PATH"
ALLOW_UNSUPPORTED_PAIRING_ENV_VAR_NAME = "NEMO_GYM_ALLOW_UNSUPPORTED_PAIRING"

# Top-level config keys.
CONFIG_PATHS_KEY_NAME = CONFIG_PATHS_KEY
ENTRYPOINT_KEY_NAME = "entrypoint"
DEFAULT_HOST_KEY_NAME = "default_host"
HEAD_SERVER_KEY_NAME = "head_server"
DISALLOWED_PORTS_KEY_NAME = "disallowed_ports"
HEAD_SERVER_DEPS_KEY_NAME = "head_server_deps"
PYTHON_VERSION_KEY_NAME = "python_version"
PIP_INSTALL_VERBOSE_KEY_NAME = "pip_install_verbose"
USE_ABSOLUTE_IP = "use_absolute_ip"
UV_PIP_SET_PYTHON_KEY_NAME = "uv_pip_set_python"
SKIP_VENV_IF_PRESENT_KEY_NAME = "skip_venv_if_present"
HF_TOKEN_KEY_NAME = "hf_token"
RAY_HEAD_NODE_ADDRESS_KEY_NAME = "ray_head_node_address"
PORT_RANGE_LOW_KEY_NAME = "port_range_low"
PORT_RANGE_HIGH_KEY_NAME = "port_range_high"
DRY_RUN_KEY_NAME = "dry_run"
UVICORN_TIMEOUT_WORKER_HEALTHCHECK = "uvicorn_timeout_worker_healthcheck"
SERVER_SPINUP_TIMEOUT_SECONDS_KEY_NAME = "server_spinup_timeout_seconds"
MODEL_ENDPOINT_READINESS_TIMEOUT_KEY_NAME = "model_endpoint_readiness_timeout_seconds"
ALLOW_OPENAI_VERSION_SKEW_KEY_NAME = "allow_openai_version_skew"
UV_CACHE_DIR_KEY_NAME = "uv_cache_dir"
UV_LOCK_TIMEOUT_KEY_NAME = "uv_lock_timeout_seconds"
UV_VENV_DIR_KEY_NAME = "uv_venv_dir"
RESULTS_DIR_KEY_NAME = "results_dir"
CACHE_DIR_KEY_NAME = "cache_dir"
INHERIT_FROM_KEY_NAME = INHERIT_FROM_KEY
COPY_KEY_NAME = COPY_KEY
DELETE_KEY_KEY_NAME = DELETE_KEY_KEY
NEMO_GYM_LOG_DIR_KEY_NAME = "nemo_gym_log_dir"
VERBOSE_KEY_NAME = "verbose"
JSON_OUTPUT_KEY_NAME = "json"
QUERY_KEY_NAME = "query"
OBSERVABILITY_ENABLED_KEY_NAME = "observability_enabled"
MODEL_CALL_CAPTURE_DIR_KEY_NAME = "model_call_capture_dir"
TOKEN_ID_CAPTURE_BLOCK = "token_id_capture"
COMPONENT_NAME_KEY_NAME = "component_name"
SKIP_VERIFICATION_KEY_NAME = "skip_verification"
SKIP_VERIFICATION_REWARD_KEY_NAME = "skip_verification_reward"
ALLOW_UNSUPPORTED_PAIRING_KEY_NAME = "allow_unsupported_pairing"
ENVIRONMENT_SERVER_NAME_KEY_NAME = "environment_server_name"
ENVIRONMENT_SERVER_ROUTES_KEY_NAME = "environment_server_routes"
ENVIRONMENT_ROUTING_MODE_KEY_NAME = "environment_routing_mode"
ERROR_ON_AGENT_WITHOUT_ENVIRONMENT_SERVER_KEY_NAME = "error_on_agent_without_environment_server"
POLICY_BASE_URL_KEY_NAME = "policy_base_url"
POLICY_API_KEY_KEY_NAME = "policy_api_key"
POLICY_MODEL_NAME_KEY_NAME = "policy_model_name"
POLICY_MODEL_KEY_NAME = "policy_model"

# Server types and the keys that refer to them.
AGENT_SERVER_TYPE_KEY_NAME = server_kinds.AGENT.key
MODEL_SERVER_TYPE_KEY_NAME = server_kinds.MODEL.key
RESOURCES_SERVER_TYPE_KEY_NAME = server_kinds.RESOURCES.key
ENVIRONMENT_SERVER_TYPE_KEY_NAME = server_kinds.ENVIRONMENT.key
AGENT_SERVER_REF_KEY_NAME = "agent_server"
ALLOWED_AGENTS_KEY_NAME = "allowed_agents"
ALLOWED_MODEL_TYPES_KEY_NAME = "allowed_model_types"
LEGACY_ENVIRONMENT_SERVER_SUFFIX = "_environment_server"

# Keys of dataset rows and results.
TASK_INDEX_KEY_NAME = TASK_INDEX_KEY
ROLLOUT_INDEX_KEY_NAME = ROLLOUT_INDEX_KEY
ATTEMPT_INDEX_KEY_NAME = "_ng_attempt_index"
ROLLOUT_ID_KEY_NAME = "_ng_rollout_id"
RESPONSES_CREATE_PARAMS_KEY_NAME = "responses_create_params"
RESPONSE_KEY_NAME = "response"
AGENT_REF_KEY_NAME = AGENT_REF_KEY
ENVIRONMENT_SERVER_STAMP_KEY_NAME = "_ng_environment_server"
TASK_SOURCE_KEY_NAME = "task_source"
SKILLS_REF_KEY_NAME = "skills_ref"
REWARD_KEY_NAME = "reward"
ROLLOUT_INFOS_KEY_NAME = "rollout_infos"
NUM_ROLLOUTS_KEY_NAME = "num_rollouts"
EXPECTED_NUM_ROLLOUTS_KEY_NAME = "expected_num_rollouts"
MISSING_NUM_ROLLOUTS_KEY_NAME = "missing_num_rollouts"
