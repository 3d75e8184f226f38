"""The trainer script of README.md ("For trainers") runs as printed against a running deployment."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT, running_deployment

MCQA_TASKS = REPO_ROOT / "resources_servers/mcqa/data/example.jsonl"


def readme_trainer_script() -> str:
    section = (REPO_ROOT / "README.md").read_text().split("## For trainers", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def test_the_readme_trainer_script_runs_rollouts_aggregates_and_closes_its_session(tmp_path: Path):
    (tmp_path / "env.yaml").write_text("{}\n")
    script = tmp_path / "trainer.py"
    script.write_text(readme_trainer_script())
    with running_deployment(["+config_paths=[configs/demo.yaml]"], cwd=tmp_path) as deployment:
        port = deployment.head_url.rsplit(":", 1)[1]
        result = subprocess.run(
            [sys.executable, "-W", "error::ResourceWarning", str(script), port, str(MCQA_TASKS)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rollouts = [line for line in lines if re.fullmatch(r"task \d rollout [01]: reward [01]\.0", line)]
    assert len(rollouts) == 10, lines
    assert lines[-1] == "mean/reward 0.6"
    assert "Unclosed" not in result.stderr, "the script must close its HTTP session"
