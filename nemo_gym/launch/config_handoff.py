"""How a server child gets the deployment's complete config: an anonymous in-memory file it inherits, and
an environment that says where that file is and which instance the child is.

Never an environment variable or a file on disk holding the config itself: a launcher killed with SIGKILL
leaves no secret behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from nemo_gym.config.global_config import NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME
from nemo_gym.config.key_names import NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME
from nemo_gym.config.sources import install_root
from nemo_gym.serving.servers import CHECK_CONFIG_ONLY_ENV_VAR_NAME
from nemo_gym.serving.workers import LAUNCHER_PID_ENV_VAR_NAME


class ConfigHandoff:
    """The merged config, unmasked, for children to read once when they start.

    On Linux it lives in an anonymous in-memory file (memfd) that each child inherits as a file descriptor
    and opens as `/proc/self/fd/<n>`: nothing is written to disk, so a launcher killed by SIGKILL leaves no
    secret behind, and the memory is freed when the last child exits. Elsewhere it is a private file in a
    private folder, removed by `close()` (called as soon as every child has read it).
    """

    def __init__(self, text: str) -> None:
        self._fd: int | None = None
        self._folder: Path | None = None
        data = text.encode()
        if hasattr(os, "memfd_create"):
            self._fd = os.memfd_create("gym-config")
            _write_all(self._fd, data)
        else:
            self._folder = Path(tempfile.mkdtemp(prefix="gym-config-"))
            descriptor = os.open(self._folder / "config.yaml", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _write_all(descriptor, data)
            finally:
                os.close(descriptor)

    @property
    def child_path(self) -> str:
        """What a child puts in NEMO_GYM_CONFIG_FILE to read the config."""
        if self._fd is not None:
            return f"/proc/self/fd/{self._fd}"
        assert self._folder is not None
        return str(self._folder / "config.yaml")

    @property
    def pass_fds(self) -> list[int]:
        return [self._fd] if self._fd is not None else []

    def close(self) -> None:
        """Forget the config here; children that inherited the memfd keep their own reference."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def child_environment(
    instance_name: str, dir_path: Path, config_path: str, extra: dict[str, str]
) -> dict[str, str]:
    """The environment of a server child: where its config is and which instance it is, never the config."""
    # The folder's own root too: a server under a --search-dir root imports its package from there.
    python_path = [
        str(install_root()),
        str(dir_path),
        str(dir_path.parent.parent),
        os.environ.get("PYTHONPATH", ""),
    ]
    env = {key: value for key, value in os.environ.items() if key != CHECK_CONFIG_ONLY_ENV_VAR_NAME}
    return {
        **env,
        NEMO_GYM_CONFIG_FILE_ENV_VAR_NAME: config_path,
        NEMO_GYM_CONFIG_PATH_ENV_VAR_NAME: instance_name,
        LAUNCHER_PID_ENV_VAR_NAME: str(os.getpid()),
        "PYTHONPATH": os.pathsep.join(filter(None, python_path)),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
