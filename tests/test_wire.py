"""The wire types know no transport: importing them, or `nemo_gym.openai_utils`, loads no HTTP layer, and
every name keeps working from its historical import path."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from nemo_gym import openai_utils
from nemo_gym.http import upstream
from nemo_gym.wire import base, chat_completions, responses
from nemo_gym.wire.rows import (
    BaseRunRequest,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
)

ROOT = Path(__file__).resolve().parents[1]
WIRE = ROOT / "nemo_gym" / "wire"
HTTP_LAYER = (
    "aiohttp",
    "fastapi",
    "starlette",
    "uvicorn",
    "nemo_gym.http",
    "nemo_gym.serving",
    "nemo_gym.server_utils",
)
# What a type module may import: the standard library's typing helpers, collections.abc and logging, pydantic,
# and the other wire modules.
ALLOWED_IMPORTS = (
    "__future__",
    "typing",
    "typing_extensions",
    "collections.abc",
    "logging",
    "pydantic",
    "nemo_gym.wire",
)
LAZY_NAMES = ("NeMoGymAsyncOpenAI", "RATE_LIMIT_ERROR_CODES", "RETRY_ERROR_CODES")

# A rollout as `gym eval run` writes it: a verify response row.
ROLLOUT_FILE = ROOT / "responses_api_models/replay_model/tests/data/example_single_tool_call_rollouts.jsonl"


def loaded_after(script: str) -> list[str]:
    """The HTTP-layer modules a fresh interpreter holds after running `script`."""
    probe = f"{script}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    completed = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    modules = json.loads(completed.stdout.splitlines()[-1])
    return [name for name in modules if any(name == m or name.startswith(f"{m}.") for m in HTTP_LAYER)]


@pytest.mark.parametrize(
    "module",
    [
        "nemo_gym.openai_utils",
        "nemo_gym.wire.responses",
        "nemo_gym.wire.chat_completions",
        "nemo_gym.wire.rows",
    ],
)
def test_importing_the_types_loads_no_http_layer(module: str) -> None:
    assert loaded_after(f"import {module}") == []


def test_the_upstream_client_is_loaded_only_when_asked_for() -> None:
    assert loaded_after("from nemo_gym.openai_utils import NeMoGymResponse") == []
    assert "aiohttp" in loaded_after("from nemo_gym.openai_utils import NeMoGymAsyncOpenAI")


@pytest.mark.parametrize("path", sorted(WIRE.glob("*.py")), ids=lambda path: path.name)
def test_a_type_module_imports_only_pydantic_typing_and_the_other_wire_modules(path: Path) -> None:
    imported = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    assert [
        name for name in imported if not any(name == a or name.startswith(f"{a}.") for a in ALLOWED_IMPORTS)
    ] == []


def test_openai_utils_names_are_the_wire_objects_themselves() -> None:
    homes = (base, responses, chat_completions)
    for name in openai_utils.__all__:
        if name in LAZY_NAMES:
            assert getattr(openai_utils, name) is getattr(upstream, name)
        else:
            assert any(getattr(openai_utils, name) is getattr(home, name, None) for home in homes)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        openai_utils.NoSuchName  # noqa: B018


def test_the_row_types_keep_their_fields_and_validate_a_verify_row() -> None:
    assert list(BaseRunRequest.model_fields) == ["responses_create_params"]
    assert list(BaseVerifyRequest.model_fields) == ["responses_create_params", "response"]
    assert list(BaseVerifyResponse.model_fields) == [
        "responses_create_params",
        "response",
        "reward",
        "mask_sample",
        "failure_kind",
        "failure_reason",
    ]  # the last three since NeMo Gym 0.7
    assert BaseVerifyResponse.model_fields["mask_sample"].default is False
    assert BaseSeedSessionRequest.model_fields == BaseSeedSessionResponse.model_fields == {}

    row = json.loads(ROLLOUT_FILE.read_text().splitlines()[0])
    verified = BaseVerifyResponse.model_validate(row)
    assert verified.reward == row["reward"]
    assert verified.model_dump(mode="json", exclude_unset=True) == row
    with pytest.raises(ValidationError):
        BaseRunRequest.model_validate({"responses_create_params": {"input": "hi", "not_a_param": 1}})
