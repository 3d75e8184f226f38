"""Real server processes started by `gym run` on a two-node cluster: a NeMo Gym 0.7 folder that declares
`ray_enabled` and calls `ray.remote` / `ray.get` itself joins the deployment's cluster, and a folder that
grades through `run_cpu_bound` with `cpu_pool_backend: ray` runs its grading there, importing the folder's
own module on the worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from nemo_gym.testing import message_item, response_with
from tests.helpers import RunningDeployment, running_deployment
from tests.ray.conftest import TwoNodeCluster

FIXTURES = Path(__file__).parent / "fixtures"
ROW = {
    "responses_create_params": {"input": "what is 3 squared?"},
    "response": response_with(message_item("9")),
}
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def deployment(
    two_node_cluster: TwoNodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningDeployment]:
    args = [
        "--search-dir", str(FIXTURES),
        "--resources-server", "ray_remote_probe",
        "--resources-server", "cpu_pool_probe",
        f"++ray_head_node_address={two_node_cluster.address}",
        "++cpu_pool_backend=ray",
    ]  # fmt: skip
    with running_deployment(
        args, tmp_path_factory.mktemp("ray-servers"), env=two_node_cluster.env
    ) as running:
        yield running


def verify(deployment: RunningDeployment, instance: str) -> dict:
    response = requests.post(deployment.url(instance) + "/verify", json=ROW, timeout=120)
    response.raise_for_status()
    return response.json()


@pytest.mark.parametrize(
    "instance",
    [
        "ray_remote_probe",  # a ray_enabled folder calling its own @ray.remote function
        "cpu_pool_probe",  # a folder grading through run_cpu_bound with cpu_pool_backend: ray
    ],
)
def test_a_folder_runs_its_cpu_work_on_the_deployments_cluster(
    deployment: RunningDeployment, two_node_cluster: TwoNodeCluster, instance: str
) -> None:
    answer = verify(deployment, instance)
    assert answer["reward"] == 1.0
    assert answer["node_id"] in {two_node_cluster.node_a.node_id, two_node_cluster.node_b.node_id}
