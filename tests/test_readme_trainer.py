"""The trainer script of README.md ("For trainers") runs as printed: it starts the demo deployment with
RunHelper, collects with run_examples, aggregates, and shuts everything down."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO_ROOT

TIMEOUT_S = 300


def readme_trainer_script() -> str:
    section = (REPO_ROOT / "README.md").read_text().split("## For trainers", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def test_the_readme_trainer_script_starts_collects_aggregates_and_shuts_down(tmp_path: Path):
    (tmp_path / "env.yaml").write_text("{}\n")
    script = tmp_path / "trainer.py"
    script.write_text(readme_trainer_script())
    result = subprocess.run(
        [sys.executable, "-W", "error::ResourceWarning", str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rewards = re.findall(r"^task (\d) rollout (\d): reward ([\d.]+)$", result.stdout, re.MULTILINE)
    assert len(rewards) == 10  # 5 tasks x 2 rollouts
    assert {reward for _, _, reward in rewards} == {"0.0", "1.0"}  # two of the recorded answers are wrong
    assert "mean/reward 0.6" in result.stdout
    assert "did not stop" not in result.stderr
