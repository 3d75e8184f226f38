"""`gym env schema`, `gym env packages`, `gym env prefetch` and `gym dev test`: NeMo Gym 0.7's commands
about a server's environment, for a Gym that runs every server in one virtual environment."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import typing
from pathlib import Path

from pydantic import BaseModel

from nemo_gym.cli.flags import Invocation
from nemo_gym.cli.selectors import selected_config
from nemo_gym.config import server_kinds
from nemo_gym.config.errors import ConfigError
from nemo_gym.config.sources import install_root
from nemo_gym.datasets.task_data import folder_module, task_data_model

ROW_ONLY_FIELDS = ("response",)  # fields /verify gets from the rollout, never from the task row


def print_schema(invocation: Invocation) -> int:
    """The JSON Schema of a resources server's task rows: its `task_data.TaskData` when the folder has
    one (as NeMo Gym 0.7 folders do), else what its `/verify` reads from a row."""
    name = invocation.options.get("resources_server")
    if not name:
        raise ConfigError("gym env schema: name the server with --resources-server NAME")
    folder = selected_config(
        server_kinds.RESOURCES.key, name, invocation.options.get("search_dir") or []
    ).parent.parent
    model = task_data_model(folder) or _verify_row_model(folder)
    schema = model.model_json_schema()
    for field in ROW_ONLY_FIELDS:
        schema.get("properties", {}).pop(field, None)
        if field in schema.get("required", []):
            schema["required"].remove(field)
    print(json.dumps(schema, indent=2))
    return 0


def _verify_row_model(folder: Path) -> type[BaseModel]:
    from nemo_gym.serving.resources_server import SimpleResourcesServer

    module = folder_module(folder, "app")
    for value in vars(module).values():
        if (
            inspect.isclass(value)
            and issubclass(value, SimpleResourcesServer)
            and value.__module__ == module.__name__
        ):
            body = typing.get_type_hints(value.verify).get("body")
            if inspect.isclass(body) and issubclass(body, BaseModel):
                return body
    raise ConfigError(f"{folder / 'app.py'}: no resources server class whose verify(body) has a typed body")


def list_packages(invocation: Invocation) -> int:
    """`pip list` of the one environment every server runs in (any --resources-server shares it)."""
    command = [sys.executable, "-m", "pip", "list"]
    if invocation.options.get("outdated"):
        command.append("--outdated")
    if invocation.options.get("json"):
        command += ["--format", "json"]
    return subprocess.run(command, check=False).returncode


def prefetch(invocation: Invocation) -> int:
    """What NeMo Gym does by building each server's virtual environment: here every server shares this
    one, so check that each selected folder's requirements.txt is installed in it."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    from nemo_gym.config.discovery import require_server_instances
    from nemo_gym.config.global_config import parse_global_config_dict
    from nemo_gym.launch.preflight import implementation_dir

    cfg = parse_global_config_dict(invocation.overrides)
    missing: list[str] = []
    for instance in require_server_instances(cfg):
        requirements = implementation_dir(instance, Path.cwd()) / "requirements.txt"
        if not requirements.is_file():
            continue
        for line in requirements.read_text().splitlines():
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                requirement = Requirement(text)
            except InvalidRequirement as error:
                raise ConfigError(f"{requirements}: {text!r} is not a requirement ({error})") from None
            try:
                installed = metadata.version(requirement.name)
            except metadata.PackageNotFoundError:
                installed = None
            if installed is None or not requirement.specifier.contains(installed, prereleases=True):
                missing.append(f"{text} (for {instance.name}; installed: {installed or 'none'})")
    if missing:
        raise ConfigError(
            f"{len(missing)} requirement(s) missing from {sys.prefix}: {'; '.join(missing)}; "
            "install them with `make test` (or pip install -r <folder>/requirements.txt)"
        )
    print(f"Nothing to build: every server runs in {sys.prefix}, which has what each one needs.")
    return 0


def dev_test(invocation: Invocation) -> int:
    """The core's test suite (`make test` without the lint), from the install root."""
    root = install_root()
    command = [sys.executable, "-m", "pytest", "-q", "-n", "auto", "--dist", "loadgroup", "tests",
               "--ignore=tests/browser", "--ignore=tests/reliability"]  # fmt: skip
    return subprocess.run(command, cwd=root, check=False).returncode
