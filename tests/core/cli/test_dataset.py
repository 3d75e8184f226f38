"""`gym dataset migrate` (GitLab → Hugging Face: upload to the Hub, then delete the GitLab copy) against
the local Hub and GitLab registry the storage tests use, and `gym dataset render` on real files."""

from __future__ import annotations

import json

from tests.core.datasets.test_gitlab import PROJECT, registry  # noqa: F401  (fixture)
from tests.core.datasets.test_gitlab import TOKEN as GITLAB_TOKEN
from tests.core.datasets.test_huggingface import ENV_YAML, RESOURCE_CONFIG, ROWS, hub, stored  # noqa: F401  (fixture)
from tests.core.datasets.test_huggingface import TOKEN as HF_TOKEN
from tests.helpers import REPO_ROOT, one_line_error, run_gym, service_control


def test_migrate_uploads_to_the_hub_then_deletes_the_gitlab_copy(hub, registry, tmp_path):  # noqa: F811
    service_control(hub, "POST", "/_reset")
    service_control(registry, "POST", "/_reset")
    (tmp_path / "env.yaml").write_text(
        ENV_YAML + f"gitlab_url: {registry.url}\ngitlab_project: '{PROJECT}'\n"
    )
    (tmp_path / "data.jsonl").write_bytes(ROWS)
    env = {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / ".hf"),
        "HF_TOKEN": HF_TOKEN,
        "GITLAB_TOKEN": GITLAB_TOKEN,
    }
    on_gitlab = run_gym(
        *"dataset upload --storage gitlab -i data.jsonl --name weather --revision 1.0.0".split(),
        env=env,
        cwd=tmp_path,
    )
    assert on_gitlab.returncode == 0, on_gitlab.stderr
    assert [package["name"] for package in service_control(registry, "GET", "/_state")["packages"]] == [
        "weather"
    ]

    migrated = run_gym(
        *"dataset migrate -i data.jsonl --name weather --resource-config".split(),
        str(REPO_ROOT / RESOURCE_CONFIG),
        env=env,
        cwd=tmp_path,
    )
    assert migrated.returncode == 0, migrated.stderr
    assert stored(hub, "nvidia/Nemotron-RL-agent-weather", "main", "data.jsonl") == ROWS
    assert service_control(registry, "GET", "/_state")["packages"] == []
    assert (
        HF_TOKEN not in migrated.stdout + migrated.stderr
        and GITLAB_TOKEN not in migrated.stdout + migrated.stderr
    )


def test_render_writes_every_row_with_its_prompt_and_names_a_missing_field(tmp_path):
    (tmp_path / "raw.jsonl").write_text('{"question": "2+2?", "id": 1}\n{"question": "3+3?", "id": 2}\n')
    (tmp_path / "prompt.yaml").write_text('system: "Answer briefly."\nuser: "Q{id}: {question}"\n')
    rendered = run_gym(
        *"dataset render -i raw.jsonl --prompt-config prompt.yaml -o out/rendered.jsonl".split(), cwd=tmp_path
    )
    assert rendered.returncode == 0, rendered.stderr
    rows = [json.loads(line) for line in (tmp_path / "out/rendered.jsonl").read_text().splitlines()]
    assert [row["responses_create_params"]["input"] for row in rows] == [
        [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Q1: 2+2?"}],
        [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Q2: 3+3?"}],
    ]
    assert {row["prompt_config_used"] for row in rows} == {str(tmp_path / "prompt.yaml")}

    (tmp_path / "prompt.yaml").write_text('user: "{question} ({topic})"\n')
    missing = run_gym(
        *"dataset render -i raw.jsonl --prompt-config prompt.yaml -o x.jsonl".split(), cwd=tmp_path
    )
    assert "topic" in one_line_error(missing) and not (tmp_path / "x.jsonl").exists()

    legacy = run_gym("+input_jsonl_fpath=raw.jsonl", "+prompt_config=prompt.yaml",
                     "+output_jsonl_fpath=legacy.jsonl", cwd=tmp_path, command="ng_materialize_prompts")  # fmt: skip
    notice, error = legacy.stderr.strip().splitlines()
    assert notice == "ng_materialize_prompts is deprecated: it runs `gym dataset render`."
    assert legacy.returncode == 1 and "'topic'" in error and "Traceback" not in legacy.stderr
