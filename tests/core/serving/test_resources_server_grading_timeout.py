"""`grading_timeout_s` is one base setting: an old key still sets it, two keys at once are refused."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
from pathlib import Path

import orjson
import pytest
import yaml
from omegaconf import OmegaConf
from pydantic import ValidationError

from nemo_gym.base_resources_server import BaseResourcesServerConfig
from nemo_gym.testing import post_json, run_resources_server
from resources_servers.calendar.app import CalendarConfig

RESOURCES_SERVERS = Path(__file__).resolve().parents[3] / "resources_servers"
MCQA = RESOURCES_SERVERS / "mcqa"
ROLLOUT = orjson.loads((MCQA / "data" / "example_rollouts.jsonl").read_bytes().splitlines()[0])


def catastrophic_row() -> dict:
    """An mcqa row whose own answer regex backtracks for far longer than any grading deadline."""
    response = copy.deepcopy(ROLLOUT["response"])
    response["output"] = [
        {
            "id": "msg_0",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "a" * 60 + "!", "annotations": []}],
        }
    ]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": "Pick one."}]},
        "options": [{"A": "x"}, {"B": "y"}],
        "expected_answer": "B",
        "response": response,
        "template_metadata": {"template_id": "t1", "output_regex": "^(a+)+$", "weight": 0.5},
    }


async def test_the_old_key_sets_the_deadline_a_real_server_grades_under(tmp_path):
    with run_resources_server(
        "mcqa_old_key", tmp_path, implementation="mcqa", domain="knowledge", grading_timeout_seconds=0.25
    ) as server:
        status, body = await post_json(server.url + "/verify", catastrophic_row())
        assert status == 200 and body["reward"] == 0.0
        assert "exceeded its 0.25 s deadline" in server.log()


def test_both_names_at_once_stop_the_server_naming_both(tmp_path):
    with pytest.raises(RuntimeError) as failure:
        with run_resources_server(
            "mcqa_two_keys",
            tmp_path,
            implementation="mcqa",
            domain="knowledge",
            grading_timeout_seconds=1,
            grading_timeout_s=2,
        ):
            pass
    assert "'grading_timeout_seconds' and 'grading_timeout_s' name the same setting" in str(failure.value)


def test_a_folder_keeps_its_own_default_and_the_base_default_is_ten_seconds():
    assert CalendarConfig.model_fields["grading_timeout_s"].default == 5.0
    assert BaseResourcesServerConfig.model_fields["grading_timeout_s"].default == 10.0


# Folders whose grading deadline had its own key: (folder, server class, the folder's old key, its default).
RENAMED = [
    ("format_verification", "FormatVerificationResourcesServer", "check_timeout_seconds", 5.0),
    ("reasoning_gym", "ReasoningGymResourcesServer", "verify_timeout_s", 30.0),
    ("workplace_assistant", "WorkplaceAssistantResourcesServer", "verify_timeout_s", 30.0),
    ("math_with_judge", "MathWithJudgeResourcesServer", "library_verifier_timeout_seconds", 10.0),
    ("physics_judge", "PhysicsJudgeResourcesServer", "library_verifier_timeout_seconds", 10.0),
    ("polymath", "PolyMathResourcesServer", "library_verifier_timeout_seconds", 10.0),
    ("math_with_autograder", "MathWithAutograderResourcesServer", "library_verifier_timeout_seconds", 10.0),
    ("ugphysics_judge", "UGPhysicsJudgeResourcesServer", "library_verifier_timeout_seconds", 10.0),
    ("imo_proofbench_judge", "ImoProofBenchJudgeServer", "library_verifier_timeout_seconds", 10.0),
    ("equivalence_llm_judge", "EquivalenceLLMJudgeResourcesServer", "extraction_timeout_s", 10.0),
]
RENAMED_IDS = [folder for folder, *_ in RENAMED]


def server_class(folder: str, class_name: str) -> type:
    return getattr(importlib.import_module(f"resources_servers.{folder}.app"), class_name)


def shipped_inner(folder: str) -> dict:
    """The folder's own instance block from its shipped configs/<folder>.yaml."""
    config = yaml.safe_load((RESOURCES_SERVERS / folder / "configs" / f"{folder}.yaml").read_text())
    return config[folder]["resources_servers"][folder]


def started_config(server: type, folder: str, inner: dict):
    """The server's config as a start reads it: unknown-key check, then validation (`load_config`)."""
    block = {**inner, "host": "127.0.0.1", "port": 0}
    return server.load_config(OmegaConf.create({folder: {"resources_servers": {folder: block}}}), folder)


@pytest.mark.parametrize(("folder", "class_name", "old_key", "default"), RENAMED, ids=RENAMED_IDS)
def test_a_folder_s_old_key_sets_the_base_deadline_its_shipped_config_uses_the_new_one(
    folder, class_name, old_key, default
):
    server = server_class(folder, class_name)
    inner = shipped_inner(folder)
    assert old_key not in inner and "grading_timeout_s" in inner
    assert started_config(server, folder, inner).grading_timeout_s == inner["grading_timeout_s"]
    del inner["grading_timeout_s"]
    assert started_config(server, folder, inner).grading_timeout_s == default
    assert started_config(server, folder, {**inner, old_key: 0.25}).grading_timeout_s == 0.25
    # The base's own old key still works on a folder that names another one.
    assert started_config(server, folder, {**inner, "grading_timeout_seconds": 0.5}).grading_timeout_s == 0.5


@pytest.mark.parametrize(("folder", "class_name", "old_key", "default"), RENAMED, ids=RENAMED_IDS)
def test_a_folder_s_old_and_new_key_at_once_are_refused_naming_both(folder, class_name, old_key, default):
    server = server_class(folder, class_name)
    with pytest.raises(ValidationError, match=f"'{old_key}' and 'grading_timeout_s' name the same setting"):
        started_config(server, folder, {**shipped_inner(folder), old_key: 1})


def grading_code(server: type) -> str:
    """The source of every resources_servers module the server class and its config are built from."""
    classes = [*server.__mro__, *server.model_fields["config"].annotation.__mro__]
    modules = {inspect.getmodule(klass) for klass in classes}
    return "\n".join(
        inspect.getsource(module) for module in modules if module.__name__.startswith("resources_servers.")
    )


@pytest.mark.parametrize(("folder", "class_name", "old_key", "default"), RENAMED, ids=RENAMED_IDS)
def test_a_folder_grades_under_the_base_key_and_names_its_old_key_only_as_an_old_key(
    folder, class_name, old_key, default
):
    code = grading_code(server_class(folder, class_name))
    assert ".grading_timeout_s" in code
    mentions = [line.strip() for line in code.splitlines() if old_key in line]
    assert mentions and all(line.startswith("OLD_KEY_NAMES") for line in mentions), mentions


def redeclared_base_default(path: Path) -> list[str]:
    """Config classes in `path` that declare `grading_timeout_s` again with the base default."""
    base_default = BaseResourcesServerConfig.model_fields["grading_timeout_s"].default
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "grading_timeout_s"):
            continue
        call = node.value
        defaults = [kw.value for kw in getattr(call, "keywords", []) if kw.arg == "default"]
        value = defaults[0] if defaults else call
        if isinstance(value, ast.Constant) and value.value == base_default:
            found.append(f"{path.relative_to(RESOURCES_SERVERS.parent)}:{node.lineno}")
    return found


def test_no_folder_declares_the_base_deadline_again_with_the_base_default():
    """A folder declares `grading_timeout_s` only to change its default; otherwise the base field is it."""
    redeclared = [
        where
        for path in sorted(RESOURCES_SERVERS.glob("*/**/*.py"))
        if "tests" not in path.parts
        for where in redeclared_base_default(path)
    ]
    assert redeclared == []
