"""A quick check of every shipped server folder, without starting one: `gym env publish` over the install
root reads each folder's configs (resolved through the config loader), README, example rows, example
rollouts and metrics, and tests. The folders' own tests and their offline replays are `make test-envs`."""

from __future__ import annotations

import json
import subprocess

from tests.helpers import REPO_ROOT, gym_command

KINDS = {
    "resources_servers": "resources-server",
    "responses_api_agents": "agent",
    "responses_api_models": "model",
    "environment_servers": "environment-server",
}


def test_every_shipped_folder_passes_the_publication_checks() -> None:
    result = subprocess.run(
        gym_command("env", "publish", "--search-dir", str(REPO_ROOT), "--json"),
        capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
    )  # fmt: skip
    reports = json.loads(result.stdout)
    failed = {
        report["name"]: [check["detail"] for check in report["checks"] if not check["ok"]]
        for report in reports
        if not all(check["ok"] for check in report["checks"])
    }
    assert failed == {} and result.returncode == 0, result.stderr
    checked = {(report["kind"], report["name"]) for report in reports}
    shipped = {
        (kind, app.parent.name)
        for folder, kind in KINDS.items()
        for app in (REPO_ROOT / folder).glob("*/app.py")
    }
    assert shipped <= checked
