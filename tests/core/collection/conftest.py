"""The running deployment the collection tests share (one per test module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.collection_deployment import DEADLINE_S
from tests.helpers import REPO_ROOT, RunningDeployment, running_deployment
from tests.upstream_script import ScriptedUpstream, fresh_model


@pytest.fixture(scope="module")
def deployment(scripted_upstream: ScriptedUpstream) -> Iterator[tuple[RunningDeployment, str]]:
    """example_single_tool_call with its simple agent, the policy model pointed at the scripted upstream."""
    model = fresh_model("collect")
    args = [
        "+config_paths=[resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml,"
        "configs/policy_model.yaml]",
        f"+policy_base_url={scripted_upstream.base_url}",
        "+policy_api_key=sk-collect",
        f"+policy_model_name={model}",
        f"+global_http_deadline_s={DEADLINE_S}",
        # One retry of a scripted 500: it then fails within about a second, far from the deadline.
        "++policy_model.responses_api_models.openai_model.max_retries=1",
    ]
    with running_deployment(args, REPO_ROOT) as running:
        yield running, model
