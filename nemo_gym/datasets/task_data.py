"""A resources server's task-row schema, NeMo Gym 0.7's `task_data.TaskData` in the server's folder: finding
it, and checking dataset rows against it as `gym dataset collate` does (`task_data_validation`)."""

from __future__ import annotations

import importlib.util
import inspect
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Literal

from pydantic import BaseModel, ValidationError

from nemo_gym.config.errors import ConfigError
from nemo_gym.wire.validation_errors import first_problem

logger = logging.getLogger("nemo_gym.task_data")

TaskDataValidation = Literal["off", "warn", "error", "auto"]


def folder_module(folder: Path, stem: str) -> ModuleType:
    """`<folder>/<stem>.py` imported under its package name, as the server itself imports it."""
    root = folder.parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    name = f"{folder.parent.name}.{folder.name}.{stem}"
    spec = importlib.util.spec_from_file_location(name, folder / f"{stem}.py")
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {folder / f'{stem}.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def task_data_model(folder: Path) -> type[BaseModel] | None:
    """The folder's `task_data.TaskData`, or None when the folder has no task_data.py."""
    if not (folder / "task_data.py").is_file():
        return None
    model = getattr(folder_module(folder, "task_data"), "TaskData", None)
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise ConfigError(f"{folder / 'task_data.py'}: defines no pydantic model named TaskData")
    return model


class RowCheck:
    """The rows of one file against a TaskData model: `error` stops at the first bad row (file:line and the
    field), `warn` counts them and reports the first once the file is read."""

    def __init__(self, model: type[BaseModel], strict: bool, path: Path) -> None:
        self.model, self.strict, self.path = model, strict, path
        self.bad = 0
        self.first: str | None = None

    def check(self, row: dict, line_number: int) -> None:
        try:
            self.model.model_validate(row)
        except ValidationError as error:
            problem = f"{self.path}:{line_number}: not a {self.model.__name__} row ({first_problem(error)})"
            if self.strict:
                raise ConfigError(problem + "; fix the row, or set task_data_validation: warn") from None
            self.bad += 1
            self.first = self.first or problem

    def report(self) -> None:
        if self.bad:
            logger.warning(
                "%s: %d row(s) do not match %s; the first: %s",
                self.path,
                self.bad,
                self.model.__name__,
                self.first,
            )
