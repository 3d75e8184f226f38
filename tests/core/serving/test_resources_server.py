"""The environment kit of SimpleResourcesServer: an environment written for NeMo Gym (`verify(self, body)`)
served for real, its declared metrics, and the session store the base provides."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.base_resources_server import (
    DEFAULT_MAX_SESSIONS,
    BaseResourcesServerConfig,
    SimpleResourcesServer,
)
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import ServerClient
from nemo_gym.testing import (
    StartedServer,
    message_item,
    post_json,
    response_with,
)
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[2] / "fixtures" / "nemo_gym_style_resources_server.py"
INSTANCE = "exact_answer"
PARAMS = {"input": [{"role": "user", "content": "Capital of France?"}]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(
        FIXTURE, INSTANCE, "exact_answer", tmp_path_factory.mktemp(INSTANCE)
    ) as started:
        yield started


def verify_body(answer: str, expected: str = "Paris") -> dict:
    return {
        "responses_create_params": PARAMS,
        "response": response_with(message_item(answer)),
        "expected_answer": expected,
    }


async def test_a_verify_without_a_request_parameter_serves_verify(server):
    status, body = await post_json(server.url + "/verify", verify_body("Paris"))
    assert status == 200 and body["reward"] == 1.0 and body["extracted_answer"] == "Paris"
    status, body = await post_json(server.url + "/verify", verify_body("Lyon"))
    assert status == 200 and body["reward"] == 0.0


async def test_its_body_is_still_validated_and_seed_session_without_a_request_works(server):
    status, body = await post_json(server.url + "/verify", {"responses_create_params": PARAMS})
    assert status == 422
    assert {tuple(error["loc"]) for error in body["detail"]} >= {
        ("body", "response"),
        ("body", "expected_answer"),
    }
    assert await post_json(server.url + "/seed_session", {"expected_answer": "Paris"}) == (200, {})
    assert (await post_json(server.url + "/seed_session", {}))[0] == 422


async def test_declared_pass_at_k_metrics_reach_aggregate_metrics(server):
    answers = [["Paris", "Paris", "Lyon"], ["Lyon", "Nice", "Paris"]]
    responses = []
    for task_index, task_answers in enumerate(answers):
        for rollout_index, answer in enumerate(task_answers):
            _, verified = await post_json(server.url + "/verify", verify_body(answer))
            responses.append({**verified, "_ng_task_index": task_index, "_ng_rollout_index": rollout_index})
    status, metrics = await post_json(server.url + "/aggregate_metrics", {"verify_responses": responses})
    assert status == 200
    assert metrics["agent_metrics"]["pass@3/accuracy"] == 100.0
    # majority@3: Paris wins task 0; task 1 is a three-way tie, whose pairs share the win (1/3).
    assert metrics["key_metrics"] == {"mean/reward": 0.5, "majority@3/accuracy": pytest.approx(200 / 3)}


def built(config: BaseResourcesServerConfig) -> SimpleResourcesServer:
    client = ServerClient(
        head_server_config=BaseServerConfig(host="127.0.0.1", port=1), global_config_dict=OmegaConf.create({})
    )
    return SimpleResourcesServer(config=config, server_client=client)


def test_the_session_store_is_made_on_first_use_with_the_configured_capacity():
    fields = {"host": "127.0.0.1", "port": 0, "entrypoint": "app.py", "name": "x", "domain": "other"}
    default = built(BaseResourcesServerConfig(**fields))
    assert default._sessions is None, "a stateless environment holds no store"
    assert default.sessions is default.sessions and default.sessions.max_sessions == DEFAULT_MAX_SESSIONS
    small = built(BaseResourcesServerConfig(**fields, max_sessions=2)).sessions
    for session_id in ("a", "b", "c"):
        small.put(session_id, session_id)
    assert (small.get("a"), small.get("c"), len(small)) == (None, "c", 2)
