"""Deciding who joins Ray, without a cluster: what an entrypoint declares, what a deployment needs, the
`cpu_pool_backend` setting's check, and choosing the `ray` backend loading no Ray until a call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nemo_gym.config.deployment import deployment_settings
from nemo_gym.config_types import ConfigError
from nemo_gym.server_utils import SimpleServer
from nemo_gym.serving.cpu_pool_ray import worker_python_path
from nemo_gym.serving.ray_cluster import deployment_needs_ray, entrypoint_declares_ray, server_uses_ray
from tests.helpers import REPO_ROOT

DECLARING = "class Server(SimpleResourcesServer):\n    ray_enabled = True\n"
DECLARING_ANNOTATED = "class Server(SimpleResourcesServer):\n    ray_enabled: ClassVar[bool] = True\n"
DECLINING = "class Server(SimpleResourcesServer):\n    ray_enabled = False\n"
UNDECLARED = "import ray\n\nclass Server(SimpleResourcesServer):\n    pass\n"
OUTSIDE_A_CLASS = "ray_enabled = True\n"
BROKEN = "class Server(:\n    ray_enabled = True\n"


@pytest.mark.parametrize(
    ("source", "declares"),
    [
        (DECLARING, True),
        (DECLARING_ANNOTATED, True),
        (DECLINING, False),
        (UNDECLARED, False),
        (OUTSIDE_A_CLASS, False),
        (BROKEN, False),
    ],
)
def test_an_entrypoint_declares_ray_only_by_a_class_setting_ray_enabled_true(
    tmp_path: Path, source: str, declares: bool
) -> None:
    entrypoint = tmp_path / "app.py"
    entrypoint.write_text(source)
    assert entrypoint_declares_ray(entrypoint) is declares


def test_a_missing_entrypoint_declares_nothing(tmp_path: Path) -> None:
    assert entrypoint_declares_ray(tmp_path / "app.py") is False


def test_a_deployment_needs_ray_for_shards_the_ray_pool_or_a_declaring_server(tmp_path: Path) -> None:
    declaring, undeclared = tmp_path / "declaring.py", tmp_path / "undeclared.py"
    declaring.write_text(DECLARING)
    undeclared.write_text(UNDECLARED)
    plain = OmegaConf.create({"ray_head_node_address": "127.0.0.1:6379"})  # an address alone joins nothing
    assert deployment_needs_ray(plain, [undeclared]) is False
    assert deployment_needs_ray(OmegaConf.create({"cpu_pool_backend": "process"}), [undeclared]) is False
    assert deployment_needs_ray(OmegaConf.create({"cpu_pool_backend": "ray"}), [undeclared]) is True
    assert deployment_needs_ray(OmegaConf.create({"shards": {"s": {"servers": ["a"]}}}), []) is True
    assert deployment_needs_ray(plain, [undeclared, declaring]) is True


def test_a_server_class_uses_ray_only_when_it_declares_it() -> None:
    class Declaring(SimpleServer):
        ray_enabled = True

    class Declining(SimpleServer):
        ray_enabled = False

    class Undeclared(SimpleServer):
        pass

    assert [server_uses_ray(cls) for cls in (Declaring, Declining, Undeclared)] == [True, False, False]


def test_cpu_pool_backend_is_process_by_default_and_accepts_ray() -> None:
    assert deployment_settings(OmegaConf.create({})).knobs.cpu_pool_backend == "process"
    assert deployment_settings(OmegaConf.create({"cpu_pool_backend": "ray"})).knobs.cpu_pool_backend == "ray"


def test_a_bad_cpu_pool_backend_is_a_one_line_error_naming_the_key() -> None:
    with pytest.raises(ConfigError) as raised:
        deployment_settings(OmegaConf.create({"cpu_pool_backend": "threads"}))
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message.startswith("Top-level key 'cpu_pool_backend'") and "'threads'" in message
    assert "++cpu_pool_backend=" in message


NO_RAY_UNTIL_A_CALL = (
    "import sys\n"
    "from omegaconf import OmegaConf\n"
    "from nemo_gym import server_utils\n"
    "from nemo_gym.serving import cpu_pool, cpu_pool_ray\n"
    "cpu_pool.use_backend('ray', OmegaConf.create({'ray_head_node_address': '127.0.0.1:1'}))\n"
    "cpu_pool.shutdown_pool()\n"
    "print('ray' in sys.modules)\n"
)


def test_choosing_the_ray_backend_loads_no_ray_until_a_call() -> None:
    result = subprocess.run(
        [sys.executable, "-c", NO_RAY_UNTIL_A_CALL],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_ray_workers_get_this_processs_own_import_paths_not_the_interpreters(tmp_path: Path) -> None:
    folder, root = tmp_path / "resources_servers" / "probe", tmp_path
    folder.mkdir(parents=True)
    stdlib = os.path.dirname(os.__file__)
    paths = ("", str(folder), str(root), stdlib, str(folder), str(tmp_path / "missing"))
    assert worker_python_path(paths, str(root)).split(os.pathsep) == [str(root), str(folder)]
