"""The server-side names of public-api.md exist where trainers and environment code import them from."""

import importlib

import pytest

PUBLIC_NAMES = {
    "nemo_gym.server_utils": [
        "ServerClient",
        "request",
        "raise_for_status",
        "get_response_json",
        "MAX_NUM_TRIES",
        "BaseServer",
        "SimpleServer",
    ],
    "nemo_gym.base_resources_server": [
        "SimpleResourcesServer",
        "BaseRunRequest",
        "BaseVerifyRequest",
        "BaseVerifyResponse",
        "BaseSeedSessionRequest",
        "BaseSeedSessionResponse",
    ],
    "nemo_gym.base_responses_api_agent": ["SimpleResponsesAPIAgent"],
    "nemo_gym.base_responses_api_model": ["SimpleResponsesAPIModel"],
    # Not in public-api.md: Gym's own base of the agent folders (simple_agent, gymnasium_agent).
    "nemo_gym.agents.rollout_agent": ["RolloutAgent", "RolloutAgentConfig", "RolloutRunRequest", "Rollout"],
}


@pytest.mark.parametrize("module_name, name", [(m, n) for m, names in PUBLIC_NAMES.items() for n in names])
def test_public_name_exists(module_name, name):
    assert hasattr(importlib.import_module(module_name), name)


def test_max_num_tries_matches_the_reference():
    from nemo_gym.server_utils import MAX_NUM_TRIES

    assert MAX_NUM_TRIES == 3


@pytest.mark.parametrize(
    "module_name, routes",
    [
        (
            "nemo_gym.base_resources_server:SimpleResourcesServer",
            {"/seed_session", "/verify", "/aggregate_metrics"},
        ),
        (
            "nemo_gym.base_responses_api_agent:SimpleResponsesAPIAgent",
            {"/v1/responses", "/run", "/aggregate_metrics"},
        ),
        (
            "nemo_gym.base_responses_api_model:SimpleResponsesAPIModel",
            {"/v1/chat/completions", "/v1/responses"},
        ),
    ],
)
def test_base_servers_register_the_reference_routes(module_name, routes):
    from omegaconf import OmegaConf

    from nemo_gym.config_types import BaseServerConfig
    from nemo_gym.server_utils import ServerClient

    module, class_name = module_name.split(":")
    server_class = getattr(importlib.import_module(module), class_name)
    config_class = server_class.model_fields["config"].annotation
    config = config_class(host="127.0.0.1", port=0, entrypoint="app.py", name="x", domain="other")
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=OmegaConf.create({})
    )
    app = server_class(config=config, server_client=client).setup_webserver()
    assert routes <= {route.path for route in app.routes}
