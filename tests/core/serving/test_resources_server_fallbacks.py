"""A verify that could not grade in time (a `run_cpu_bound` deadline fallback) is marked as not measured
(`mask_sample`, `failure_kind`, `failure_reason`), not passed off as a wrong answer; a real server."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import StartedServer, message_item, response_with
from tests.helpers import run_resources_fixture

FIXTURE = Path(__file__).parents[2] / "fixtures" / "grading_resources_server.py"
ROW = {
    "responses_create_params": {"input": "what is 1 squared?"},
    "response": response_with(message_item("1")),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_fixture(FIXTURE, "grading", "grading", tmp_path_factory.mktemp("grading")) as started:
        yield started


async def verify(server: StartedServer, **row: object) -> dict:
    response = await request("POST", server.url + "/verify", json={**ROW, **row})
    assert response.status == 200
    return await get_response_json(response)


async def test_a_grading_deadline_fallback_is_masked_with_its_reason(server: StartedServer) -> None:
    answer = await verify(server, runaway=True)
    assert (answer["reward"], answer["mask_sample"], answer["failure_kind"]) == (0.0, True, "verifier_error")
    assert "tests.cpu_workloads.spin_forever exceeded its 0.3 s deadline" in answer["failure_reason"]


async def test_a_graded_answer_is_not_masked(server: StartedServer) -> None:
    answer = await verify(server)
    assert (answer["reward"], answer["mask_sample"], answer["failure_kind"], answer["failure_reason"]) == (
        1.0,
        False,
        None,
        None,
    )
