"""A project folder with its own server implementations, as a user's checkout would have, and running `gym`
on it: what the tests of the launcher, its preflight checks, its child processes and co-hosting share
(tests/core/launch/conftest.py makes the folder a fixture)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from tests.helpers import run_gym, write_config

COUNTER_APP = "from tests.fixtures.counter_resources_server import CounterResourcesServer\n\n" + (
    'if __name__ == "__main__":\n    CounterResourcesServer.run_webserver()\n'
)


SLEEPY_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.sleepy_server', run_name='__main__')\n"


NOISY_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.noisy_server', run_name='__main__')\n"


GRANDCHILD_APP = "import runpy\n\nrunpy.run_module('tests.fixtures.grandchild_server', run_name='__main__')\n"


SLOW_APP = (
    "import os\nimport time\n\n"
    "print(f'pid {os.getpid()} loading a very large model...', flush=True)\ntime.sleep(3600)\n"
)


PEEKING_APP = (
    "import urllib.request\n\n"
    "from nemo_gym.global_config import get_global_config_dict\n"
    "from nemo_gym.server_utils import head_server_config_from\n"
    "from tests.fixtures.counter_resources_server import CounterResourcesServer\n\n"
    "head = head_server_config_from(get_global_config_dict())\n"
    "with urllib.request.urlopen(f'http://{head.host}:{head.port}/server_instances', timeout=10) as answer:\n"
    "    print('listed while starting:', answer.read().decode(), flush=True)\n"
    "CounterResourcesServer.run_webserver()\n"
)


def counter_instance(implementation: str = "counter", **inner) -> dict:
    return {"resources_servers": {implementation: {"entrypoint": "app.py", "domain": "other", **inner}}}


def run_dirs(temporary_folder: Path) -> list[Path]:
    return sorted(temporary_folder.glob("gym-run-*"))


def get_status(url: str) -> int:
    with urllib.request.urlopen(url + "/", timeout=5) as answer:
        return answer.status


def check_settings_in_one_line(workdir: Path, setting: dict, expected: str) -> None:
    for implementation in ("counter", "noisy"):
        folder = workdir / "resources_servers" / implementation
        (folder / "grading.py").write_text("")
        (folder / "scoring.py").write_text("import grading\nimport resources_servers.x.scoring\n")
    args = [write_config(workdir, {"first": counter_instance(), **setting}), "++head_server.port=0"]
    for command in ("run", "validate"):
        result = run_gym(command, *args, cwd=workdir)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and expected in lines[0], result.stderr
